// Command tokbench measures the tokenizer on the reference corpus for
// bench/tokenizer.sh: one document at a time on one goroutine (run it under
// taskset -c 0 with GOMAXPROCS=1), or spread over all cores with -parallel.
// It prints one JSON line: bytes, tokens, wall and CPU seconds, and an FNV
// hash of all ids so the script can check they equal the reference's.
//
// With -write-corpus FILE it only writes the corpus as JSONL (one JSON
// string per line) for the reference benchmark.
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"hash/fnv"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/pipe-dev/pipe/stages/tokenize"
	"github.com/pipe-dev/pipe/stages/tokenize/internal/corpus"
)

// writeJSONL writes texts to path as JSON strings, one a line.
func writeJSONL(path string, texts []string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := bufio.NewWriter(f)
	for _, s := range texts {
		b, _ := json.Marshal(s)
		w.Write(b)
		w.WriteByte('\n')
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// encodeAll encodes texts into ids, on GOMAXPROCS goroutines if parallel.
func encodeAll(tok *tokenize.Tokenizer, texts []string, ids [][]int, parallel bool) {
	if !parallel {
		for i, s := range texts {
			ids[i] = tok.Encode(s)
		}
		return
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for range runtime.GOMAXPROCS(0) {
		wg.Go(func() {
			for i := int(next.Add(1) - 1); i < len(texts); i = int(next.Add(1) - 1) {
				ids[i] = tok.Encode(texts[i])
			}
		})
	}
	wg.Wait()
}

func main() {
	model := flag.String("tokenizer", "", "model directory")
	writeCorpus := flag.String("write-corpus", "", "write the corpus as JSONL to this file and exit")
	parallel := flag.Bool("parallel", false, "encode on GOMAXPROCS goroutines")
	rounds := flag.Int("rounds", 3, "passes over the corpus; the best is reported")
	flag.Parse()
	goroot, err := corpus.GoRoot()
	if err != nil {
		fail(err)
	}
	texts, err := corpus.Build(goroot, cjkDir())
	if err != nil {
		fail(err)
	}
	if *writeCorpus != "" {
		if err := writeJSONL(*writeCorpus, texts); err != nil {
			fail(err)
		}
		return
	}
	tok, err := tokenize.Load(*model)
	if err != nil {
		fail(err)
	}
	size := 0
	for _, s := range texts {
		size += len(s)
	}
	ids := make([][]int, len(texts))
	bestWall, bestCPU := 1e9, 1e9
	for r := 0; r < *rounds; r++ {
		cpu0 := cpuSeconds()
		t0 := time.Now()
		encodeAll(tok, texts, ids, *parallel)
		bestWall = min(bestWall, time.Since(t0).Seconds())
		bestCPU = min(bestCPU, cpuSeconds()-cpu0)
	}
	h := fnv.New64a()
	tokens := 0
	var buf [4]byte
	for _, row := range ids {
		tokens += len(row)
		for _, id := range row {
			buf[0], buf[1], buf[2], buf[3] = byte(id), byte(id>>8), byte(id>>16), byte(id>>24)
			h.Write(buf[:])
		}
		h.Write([]byte{0xff, 0xff, 0xff, 0xff})
	}
	out, _ := json.Marshal(map[string]any{
		"impl": "pipe", "texts": len(texts), "bytes": size, "tokens": tokens, "wall_s": bestWall, "cpu_s": bestCPU,
		"hash": fmt.Sprintf("%016x", h.Sum64()), "threads": runtime.GOMAXPROCS(0), "byte_level": tok.ByteLevel(),
	})
	fmt.Println(string(out))
}

func cpuSeconds() float64 {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
}

// cjkDir is Python's Lib/test/cjkencodings, as the tests find it.
func cjkDir() string {
	out, err := exec.Command("python3", "-c", "import sysconfig; print(sysconfig.get_paths()['stdlib'])").Output()
	if err != nil {
		return ""
	}
	dir := filepath.Join(strings.TrimSpace(string(out)), "test", "cjkencodings")
	if _, err := os.Stat(dir); err != nil {
		return ""
	}
	return dir
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "tokbench:", err)
	os.Exit(1)
}
