package stages

import (
	"bufio"
	"context"
	"encoding/binary"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/pipe-dev/pipe/pipeline"
	"github.com/pipe-dev/pipe/pipeline/commitlog"
	"github.com/pipe-dev/pipe/pipeline/engine"
	"github.com/pipe-dev/pipe/pipeline/pipefile"
)

// BenchmarkResumeFirstRequest is the resume of a big run (issue 9): 1,000,000
// prompts of which the run directory has finished 900,000 (done.ids), with
// the generation journal and the output as the earlier run left them (their
// indexes; the data files sparse). It measures the time from starting the
// run (plan included) to the first record entering generate — its first
// request — and the heap the resume state takes at that moment: the done
// set, the journal's and the writer's indexes. The finished prompts come
// first in the file, so the reader streams through 900,000 of them before
// the first request, as a resumed run does.
//
// The "fresh" case, the same file with nothing finished, is the reference.
func BenchmarkResumeFirstRequest(b *testing.B) {
	const total = 1_000_000
	dir := b.TempDir()
	writeResumePrompts(b, filepath.Join(dir, "prompts.jsonl"), total)
	src := `
[pipeline]
run_dir = "run"

[[stage]]
id   = "prompts"
kind = "read-prompts"
path = "prompts.jsonl"

[[stage]]
id    = "todo"
kind  = "dedupe-against-progress"
input = "prompts"

[[stage]]
id                = "gen"
kind              = "generate"
input             = "todo"
servers           = ["sim:7?speed=1000000"]
max_output_tokens = 2048

[[stage]]
id    = "out"
kind  = "write-jsonl"
input = ["gen", "gen.rejected"]
path  = "out.jsonl"
`
	path := filepath.Join(dir, "p.toml")
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		b.Fatal(err)
	}
	for _, done := range []int{0, 900_000} {
		name := "fresh"
		if done > 0 {
			name = strconv.Itoa(done/1000) + "K-done"
		}
		b.Run(name, func(b *testing.B) { benchFirstRequest(b, dir, path, done) })
	}
}

func benchFirstRequest(b *testing.B, dir, path string, done int) {
	var ids []string
	for i := range done {
		ids = append(ids, "p"+strconv.Itoa(i))
	}
	var firstTotal time.Duration
	var heapTotal uint64
	for b.Loop() {
		b.StopTimer()
		run := filepath.Join(dir, "run")
		os.RemoveAll(run)
		os.Remove(filepath.Join(dir, "out.jsonl"))
		os.Remove(commitlog.IndexPath(filepath.Join(dir, "out.jsonl")))
		fakeFinishedRun(b, run, filepath.Join(dir, "out.jsonl"), ids)
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		base := ms.HeapAlloc
		b.StartTimer()

		start := time.Now()
		f, probs := pipefile.Load(path, pipefile.Options{})
		if len(probs) > 0 {
			b.Fatal(probs)
		}
		plan, probs := pipeline.Build(f, pipeline.DefaultRegistry)
		if len(probs) > 0 {
			b.Fatal(probs)
		}
		ctx, cancel := context.WithCancel(context.Background())
		var once sync.Once
		var first time.Duration
		var heap uint64
		_, err := engine.Run(ctx, plan, engine.Options{ProgressEvery: time.Millisecond,
			Progress: func(s *engine.Summary) {
				if s.Stages[2].In > 0 {
					once.Do(func() {
						first = time.Since(start)
						runtime.GC()
						var ms runtime.MemStats
						runtime.ReadMemStats(&ms)
						heap = ms.HeapAlloc - min(ms.HeapAlloc, base)
						if p := os.Getenv("PIPE_BENCH_HEAPPROFILE"); p != "" {
							if f, err := os.Create(p); err == nil {
								pprof.WriteHeapProfile(f)
								f.Close()
							}
						}
						cancel()
					})
				}
			}})
		b.StopTimer()
		if first == 0 {
			b.Fatalf("no request was sent: %v", err)
		}
		firstTotal += first
		heapTotal += heap
		b.StartTimer()
	}
	b.ReportMetric(firstTotal.Seconds()/float64(b.N), "s-to-first-request")
	b.ReportMetric(float64(heapTotal)/float64(b.N)/(1<<20), "MiB-heap")
}

func writeResumePrompts(b *testing.B, path string, n int) {
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	w := bufio.NewWriterSize(f, 1<<20)
	for i := range n {
		w.WriteString(`{"id":"p` + strconv.Itoa(i) + `","messages":[{"role":"user","content":"Question ` + strconv.Itoa(i) + `: explain this topic in a few sentences."}]}` + "\n")
	}
	if err := w.Flush(); err != nil {
		b.Fatal(err)
	}
	f.Close()
}

// fakeFinishedRun writes what a run that finished ids leaves: done.ids, the
// journal of gen and the output, with real indexes over sparse data files
// (400 bytes a line).
func fakeFinishedRun(b *testing.B, runDir, out string, ids []string) {
	if err := os.MkdirAll(filepath.Join(runDir, "journal"), 0o755); err != nil {
		b.Fatal(err)
	}
	done := make([]byte, 0, 8+8*len(ids))
	done = append(done, "PIPEIDS1"...)
	idx := make([]byte, 0, 8+16*len(ids))
	idx = append(idx, "PIPEIDX1"...)
	for i, id := range ids {
		h := commitlog.Hash(id)
		done = binary.LittleEndian.AppendUint64(done, h)
		idx = binary.LittleEndian.AppendUint64(idx, h)
		idx = binary.LittleEndian.AppendUint64(idx, uint64(i+1)*400)
	}
	must := func(err error) {
		if err != nil {
			b.Fatal(err)
		}
	}
	must(os.WriteFile(filepath.Join(runDir, pipeline.DoneFile), done, 0o644))
	for _, data := range []string{filepath.Join(runDir, "journal", "gen.jsonl"), out} {
		must(os.WriteFile(commitlog.IndexPath(data), idx, 0o644))
		f, err := os.Create(data)
		must(err)
		must(f.Truncate(int64(len(ids)) * 400))
		f.Close()
	}
}
