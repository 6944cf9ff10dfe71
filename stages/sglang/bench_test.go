package sglang

import (
	"context"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/pipe-dev/pipe/stages/sglang/sim"
)

// BenchmarkClient is the client alone (no pipeline): b.N chat completions
// from PIPE_BENCH_CONCURRENCY goroutines (default 64) against the server at
// PIPE_BENCH_SERVER, or an in-process simulator so fast that it does not
// wait. bench/generate.sh compares the whole pipeline with wrk; this one
// tells how much of the pipeline's cost is the client's.
func BenchmarkClient(b *testing.B) {
	server := os.Getenv("PIPE_BENCH_SERVER")
	if server == "" {
		f, err := sim.Start(context.Background(), sim.Config{Count: 1, Speed: 1e6, MaxRunning: 1024, ThinkTokensMean: 150, AnswerTokensMean: 50})
		if err != nil {
			b.Fatal(err)
		}
		defer f.Close()
		server = f.URLs()[0]
	}
	conc := 64
	if s := os.Getenv("PIPE_BENCH_CONCURRENCY"); s != "" {
		conc, _ = strconv.Atoi(s)
	}
	on := true
	c := New([]ServerSpec{{URL: server, Concurrency: conc}}, Options{API: APIChat, Thinking: true,
		Sampling: Sampling{MaxOutputTokens: 2048, EnableThinking: &on}})
	if err := c.Start(context.Background()); err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	var next atomic.Int64
	var wg sync.WaitGroup
	b.ResetTimer()
	cpu0 := cpuTime()
	start := time.Now()
	for range conc {
		wg.Go(func() {
			req := &Request{Messages: []Message{{Role: "user"}}}
			for {
				i := next.Add(1)
				if i > int64(b.N) {
					return
				}
				req.Messages[0].Content = "Question " + strconv.FormatInt(i, 10) + ": what is 1 + 1?"
				s := c.Session()
				if _, err := s.Generate(context.Background(), req); err != nil {
					b.Error(err)
				}
				s.Close()
			}
		})
	}
	wg.Wait()
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "completions/s")
	b.ReportMetric(float64((cpuTime()-cpu0).Milliseconds())/float64(b.N)*1000, "cpu-ms/1000")
}

// cpuTime is the process's user + system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
