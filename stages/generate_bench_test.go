package stages

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/pipe-dev/pipe/pipeline"
	"github.com/pipe-dev/pipe/pipeline/engine"
	"github.com/pipe-dev/pipe/pipeline/pipefile"
	"github.com/pipe-dev/pipe/pipeline/record"
	"github.com/pipe-dev/pipe/stages/sglang/sim"
)

// BenchmarkGeneratePipeline runs read-prompts → generate → a discarding sink
// against a simulated server so fast (speed 10⁶: no simulated wait) that the
// client is the bottleneck. bench/generate.sh runs it against a `pipe sim`
// process next to wrk on the same endpoint; set PIPE_BENCH_SERVER to that
// server's URL and PIPE_BENCH_CONCURRENCY to wrk's connection count. Without
// PIPE_BENCH_SERVER it starts an in-process server (whose CPU then counts
// in the figures).
//
// It reports completions/s and the process's CPU time (user + system) per
// 1,000 completions.
func BenchmarkGeneratePipeline(b *testing.B) {
	server := os.Getenv("PIPE_BENCH_SERVER")
	if server == "" {
		f, err := sim.Start(context.Background(), sim.Config{Count: 1, Speed: 1e6, MaxRunning: 256, ThinkTokensMean: 150, AnswerTokensMean: 50})
		if err != nil {
			b.Fatal(err)
		}
		defer f.Close()
		server = f.URLs()[0]
	}
	conc := 64
	if s := os.Getenv("PIPE_BENCH_CONCURRENCY"); s != "" {
		var err error
		if conc, err = strconv.Atoi(s); err != nil {
			b.Fatal(err)
		}
	}
	n := b.N
	dir := b.TempDir()
	prompts, err := os.Create(filepath.Join(dir, "prompts.jsonl"))
	if err != nil {
		b.Fatal(err)
	}
	var line []byte
	for i := range n {
		line = line[:0]
		line = append(line, `{"id":"p`...)
		line = strconv.AppendInt(line, int64(i), 10)
		line = append(line, `","prompt":"Question `...)
		line = strconv.AppendInt(line, int64(i), 10)
		line = append(line, ": what is 1 + 1?\"}\n"...)
		if _, err := prompts.Write(line); err != nil {
			b.Fatal(err)
		}
	}
	if err := prompts.Close(); err != nil {
		b.Fatal(err)
	}
	src := `
[[stage]]
id   = "prompts"
kind = "read-prompts"
path = "prompts.jsonl"

[[stage]]
id                = "gen"
kind              = "generate"
input             = "prompts"
servers           = ["` + server + `"]
concurrency       = ` + strconv.Itoa(conc) + `
max_output_tokens = 2048

[[stage]]
id    = "sink"
kind  = "discard"
input = ["gen", "gen.rejected"]
`
	path := filepath.Join(dir, "p.toml")
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		b.Fatal(err)
	}
	reg := pipeline.NewRegistry()
	for _, k := range []string{"read-prompts", "generate"} {
		reg.Register(*pipeline.DefaultRegistry.Lookup(k))
	}
	reg.Register(pipeline.Spec{Kind: "discard", Summary: "drop every record (benchmarks)", New: pipeline.NewProcessor(func(c *struct{}) (pipeline.Processor, error) { return discard{}, nil })})
	f, probs := pipefile.Load(path, pipefile.Options{})
	if len(probs) > 0 {
		b.Fatal(probs)
	}
	plan, probs := pipeline.Build(f, reg)
	if len(probs) > 0 {
		b.Fatal(probs)
	}

	b.ResetTimer()
	cpu0 := cpuTime()
	start := time.Now()
	sum, err := engine.Run(context.Background(), plan, engine.Options{})
	elapsed := time.Since(start)
	cpu := cpuTime() - cpu0
	b.StopTimer()
	if err != nil {
		b.Fatal(err)
	}
	for _, s := range sum.Stages {
		if s.ID == "gen" && (s.Out != int64(n) || s.Failed != 0) {
			b.Fatalf("gen: %+v", s)
		}
	}
	b.ReportMetric(float64(n)/elapsed.Seconds(), "completions/s")
	b.ReportMetric(float64(cpu.Milliseconds())/float64(n)*1000, "cpu-ms/1000")
}

type discard struct{}

func (discard) Process(context.Context, *record.Record, pipeline.Emitter) error { return nil }

// cpuTime is the process's user + system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
