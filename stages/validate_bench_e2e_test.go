//go:build e2e

package stages

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pipe-dev/pipe/pipeline"
)

// BenchmarkValidateInput: judging a 1,000,000-line prompts file (~350 MB)
// the way read-prompts' pass ahead of the reader does, next to references
// measured in the same run over the same file: `wc -l`, a plain bufio line
// scan (the I/O floor), and encoding/json's Valid on every line. Run on one
// core with bench/validate.sh (MB/s and ratios) or
//
//	go test ./stages -run '^$' -bench BenchmarkValidateInput -cpu 1 -benchtime 3x
//
// ahead is the run's pass (no id set); check-data also keeps the set of ids
// to count repeats (pipe check --data); reader-build makes every record, as
// the reader does. first-record is the time from Open (which starts the
// pass) to the reader's first record: what the pass may delay the first
// request by.
func BenchmarkValidateInput(b *testing.B) {
	lines := 1_000_000
	if testing.Short() {
		lines = 50_000
	}
	path := filepath.Join(b.TempDir(), "prompts.jsonl")
	size := writeBenchPrompts(b, path, lines)
	b.Logf("%s: %d lines, %.1f MB", path, lines, float64(size)/1e6)
	src := func(dedupe bool) *jsonlSource {
		return (&readPrompts{cfg: readPromptsConfig{Path: path, IDField: "id", OnBadLine: "fail"}}).source(dedupe)
	}
	check := func(b *testing.B, rep *pipeline.InputReport, err error) {
		if err != nil {
			b.Fatal(err)
		}
		if rep.Lines != int64(lines) || len(rep.Problems) != 0 {
			b.Fatalf("judged %d lines, problems %v", rep.Lines, rep.Problems)
		}
	}
	b.Run("wc-l", func(b *testing.B) {
		b.SetBytes(size)
		var used time.Duration // wc's own CPU time
		for b.Loop() {
			cmd := exec.Command("wc", "-l", path)
			out, err := cmd.Output()
			if err != nil {
				b.Skip("wc:", err)
			}
			if !strings.HasPrefix(string(out), fmt.Sprint(lines)) {
				b.Fatalf("wc -l: %s", out)
			}
			used += cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
		}
		if used > 0 {
			b.ReportMetric(float64(size)*float64(b.N)/1e6/used.Seconds(), "MB/cpu-s")
		}
	})
	b.Run("bufio-lines", func(b *testing.B) {
		b.SetBytes(size)
		defer cpuRate(b, size)()
		for b.Loop() {
			n := 0
			s := src(false)
			if err := s.eachLine(context.Background(), func(int, []byte) (bool, error) { n++; return true, nil }); err != nil || n != lines {
				b.Fatalf("%d lines, %v", n, err)
			}
		}
	})
	b.Run("encoding-json-valid", func(b *testing.B) {
		b.SetBytes(size)
		defer cpuRate(b, size)()
		for b.Loop() {
			s := src(false)
			if err := s.eachLine(context.Background(), func(_ int, line []byte) (bool, error) {
				if !json.Valid(line) {
					return false, fmt.Errorf("invalid: %s", line)
				}
				return true, nil
			}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("ahead", func(b *testing.B) {
		b.SetBytes(size)
		defer cpuRate(b, size)()
		for b.Loop() {
			rep, err := src(false).checkAll(context.Background(), nil)
			check(b, rep, err)
		}
	})
	b.Run("check-data", func(b *testing.B) {
		b.SetBytes(size)
		defer cpuRate(b, size)()
		for b.Loop() {
			rep, err := src(true).checkAll(context.Background(), nil)
			check(b, rep, err)
		}
	})
	b.Run("reader-build", func(b *testing.B) {
		b.SetBytes(size)
		defer cpuRate(b, size)()
		for b.Loop() {
			s := src(false)
			j := s.judge()
			if err := s.eachLine(context.Background(), func(n int, line []byte) (bool, error) {
				if _, p := j.line(n, line, true); p != nil {
					return false, fmt.Errorf("line %d: %s", n, p.Detail)
				}
				return true, nil
			}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("first-record", func(b *testing.B) {
		var worst time.Duration
		for b.Loop() {
			r := &readPrompts{cfg: readPromptsConfig{Path: path, IDField: "id", OnBadLine: "fail"}}
			ctx, cancel := context.WithCancel(context.Background())
			start := time.Now()
			if err := r.Open(ctx, &pipeline.Env{StageID: "prompts", Log: io.Discard, Notice: io.Discard}); err != nil {
				b.Fatal(err)
			}
			em := &firstEmitter{cancel: cancel}
			r.Read(ctx, em)
			worst = max(worst, em.at.Sub(start))
			r.Close()
			cancel()
		}
		b.ReportMetric(float64(worst.Microseconds())/1000, "worst-ms")
	})
}

// cpuRate reports MB per CPU second the process spent in the loop: the
// speed on one core however busy the machine is (b.SetBytes' MB/s is
// per wall second). cpuTime is generate_bench_test.go's.
func cpuRate(b *testing.B, size int64) func() {
	start := cpuTime()
	return func() {
		if used := cpuTime() - start; used > 0 {
			b.ReportMetric(float64(size)*float64(b.N)/1e6/used.Seconds(), "MB/cpu-s")
		}
	}
}

// writeBenchPrompts writes n prompt lines of ~350 bytes in the shapes a
// user has (OpenAI messages with a system turn, ShareGPT, plain prompt),
// with escapes, accents and CJK in the text, and returns the file's size.
func writeBenchPrompts(b *testing.B, path string, n int) int64 {
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	w := bufio.NewWriterSize(f, 1<<20)
	words := strings.Fields("explain the difference between a process and a thread, with an example in Go; " +
		"why does the café's \"menu\" list 東京 and naïve résumé items? write a poem about\tcompilers. " +
		"summarize: the quick brown fox jumps over the lazy dog while 数据 flows through the pipeline")
	var text bytes.Buffer
	for i := range n {
		text.Reset()
		for k := 0; text.Len() < 230; k++ {
			text.WriteString(words[(i*7+k*3)%len(words)])
			text.WriteByte(' ')
			if k%9 == 8 {
				text.WriteString("\n")
			}
		}
		content, _ := json.Marshal(text.String())
		switch i % 3 {
		case 0:
			fmt.Fprintf(w, `{"id":"p%07d","messages":[{"role":"system","content":"You are a careful assistant."},{"role":"user","content":%s}],"source":"bench"}`+"\n", i, content)
		case 1:
			fmt.Fprintf(w, `{"id":"p%07d","conversations":[{"from":"human","value":%s}],"source":"bench","lang":"en"}`+"\n", i, content)
		default:
			fmt.Fprintf(w, `{"id":"p%07d","prompt":%s,"source":"bench","meta":{"k":[1,2,3],"ok":true}}`+"\n", i, content)
		}
	}
	if err := w.Flush(); err != nil {
		b.Fatal(err)
	}
	st, err := f.Stat()
	f.Close()
	if err != nil {
		b.Fatal(err)
	}
	return st.Size()
}
