package engine_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pipe-dev/pipe/pipeline/engine"
	"github.com/pipe-dev/pipe/pipeline/record"
	"go.uber.org/goleak"
)

func TestFanOutAndMerge(t *testing.T) {
	dir := t.TempDir()
	p := plan(t, dir, `
[[stage]]
id = "src"
kind = "count"
n = 1000

[[stage]]
id = "a"
kind = "pass"
input = "src"
tag = "a"
workers = 4

[[stage]]
id = "b"
kind = "pass"
input = "src"
tag = "b"

[[stage]]
id = "sink-merged"
kind = "collect"
input = ["a", "b"]
`)
	sum, err := engine.Run(context.Background(), p, engine.Options{})
	if err != nil {
		t.Fatal(err)
	}
	c := sink(t, "sink-merged")
	if len(c.IDs) != 1000 {
		t.Fatalf("merged sink saw %d distinct ids, want 1000", len(c.IDs))
	}
	for id, n := range c.IDs {
		if n != 2 {
			t.Fatalf("id %s arrived %d times, want 2 (once per branch)", id, n)
		}
	}
	// Each branch tagged its own copy: a record never carries both tags.
	if c.Tags["a"] != 1000 || c.Tags["b"] != 1000 {
		t.Fatalf("tags = %v, want a=1000 b=1000 (fan-out must copy records)", c.Tags)
	}
	if !c.Committed {
		t.Fatal("sink not committed")
	}
	for _, s := range sum.Stages {
		if !s.Balanced() {
			t.Errorf("stage %s unbalanced: %+v", s.ID, s)
		}
	}
}

func TestFirstFailingStageIsNamedAndOthersCommit(t *testing.T) {
	dir := t.TempDir()
	p := plan(t, dir, `
[[stage]]
id = "src"
kind = "count"
n = -1

[[stage]]
id = "flaky"
kind = "pass"
input = "src"
fail_at = 500

[[stage]]
id = "sink-fail"
kind = "collect"
input = "flaky"
`)
	_, err := engine.Run(context.Background(), p, engine.Options{})
	var se *engine.StageError
	if !errors.As(err, &se) || se.Stage != "flaky" {
		t.Fatalf("err = %v, want a StageError naming stage flaky", err)
	}
	if !strings.Contains(err.Error(), `stage "flaky" (pass): injected failure`) {
		t.Fatalf("err = %q", err)
	}
	if c := sink(t, "sink-fail"); !c.Committed || len(c.IDs) == 0 || len(c.IDs) > 500 {
		t.Fatalf("sink committed=%v with %d records; want committed with 1..500", c.Committed, len(c.IDs))
	}
}

// A run canceled mid-stream returns promptly and leaves no goroutine behind,
// even with a sink blocked on a slow record and full edges everywhere.
func TestCancelMidStream(t *testing.T) {
	defer goleak.VerifyNone(t)
	dir := t.TempDir()
	p := plan(t, dir, `
[[stage]]
id = "src"
kind = "count"
n = -1

[[stage]]
id = "p1"
kind = "pass"
input = "src"
workers = 8

[[stage]]
id = "p2"
kind = "pass"
input = "src"

[[stage]]
id = "sink-cancel"
kind = "collect"
input = ["p1", "p2"]
delay = "1ms"
`)
	ctx, cancel := context.WithCancel(context.Background())
	progressed := make(chan struct{})
	var once atomic.Bool
	done := make(chan error, 1)
	go func() {
		_, err := engine.Run(ctx, p, engine.Options{ProgressEvery: time.Millisecond, Progress: func(s *engine.Summary) {
			if s.Stages[3].In > 50 && once.CompareAndSwap(false, true) {
				close(progressed)
			}
		}})
		done <- err
	}()
	<-progressed
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, engine.ErrStopped) {
			t.Fatalf("err = %v, want ErrStopped", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return within 10s of cancel")
	}
}

// Stop drains: intake stops, every record read is processed, sinks commit,
// the accounting balances and Run reports Drained.
func TestStopDrainsAndCommits(t *testing.T) {
	dir := t.TempDir()
	p := plan(t, dir, `
[[stage]]
id = "src"
kind = "count"
n = -1

[[stage]]
id = "p"
kind = "pass"
input = "src"
workers = 4
reject_every = 10

[[stage]]
id = "sink-drain"
kind = "collect"
input = "p"
`)
	stop := make(chan struct{})
	var once atomic.Bool
	sum, err := engine.Run(context.Background(), p, engine.Options{Stop: stop, ProgressEvery: time.Millisecond,
		Progress: func(s *engine.Summary) {
			if s.Stages[2].In > 1000 && once.CompareAndSwap(false, true) {
				close(stop)
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	if !sum.Drained {
		t.Fatal("summary does not say drained")
	}
	src, mid, snk := sum.Stages[0], sum.Stages[1], sum.Stages[2]
	if !mid.Balanced() || !snk.Balanced() {
		t.Fatalf("unbalanced after drain: %+v %+v", mid, snk)
	}
	if mid.In != src.Out || snk.In != mid.Out {
		t.Fatalf("records lost in the drain: src out %d, p in %d out %d, sink in %d", src.Out, mid.In, mid.Out, snk.In)
	}
	if c := sink(t, "sink-drain"); !c.Committed || int64(len(c.IDs)) != snk.In {
		t.Fatalf("sink committed=%v with %d ids, want %d", c.Committed, len(c.IDs), snk.In)
	}
	// The rejections went to the run directory with their reason.
	data, err := os.ReadFile(filepath.Join(dir, "run", "rejected", "p.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	if int64(len(lines)) != mid.Rejected || mid.Reasons["every_k"] != mid.Rejected {
		t.Fatalf("%d rejected lines, summary says %d (%v)", len(lines), mid.Rejected, mid.Reasons)
	}
	var rec record.Record
	if err := json.Unmarshal([]byte(lines[0]), &rec); err != nil || rec.Reject == nil || rec.Reject.Reason != "every_k" || rec.Reject.Stage != "p" {
		t.Fatalf("rejected record %s: %v", lines[0], err)
	}
}

// One million prompts through read-prompts → pass-through → write-jsonl:
// every record arrives exactly once, and peak heap stays flat (within 1.5×
// of the peak with 100K records) apart from the set of ids read, which the
// reader keeps to reject repeated ids (as dedupe-against-progress does,
// 8 bytes an id plus the map's overhead, measured here).
func TestMillionRecordsFlatMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: skipping the 1M-record memory test")
	}
	small := runPromptsThrough(t, 100_000)
	large := runPromptsThrough(t, 1_000_000)
	ids := idSetBytes(1_000_000)
	t.Logf("100K: %.0f records/s, peak live heap %.1f MiB; 1M: %.0f records/s, peak live heap %.1f MiB (ratio %.2f); a set of 1M ids takes %.1f MiB",
		small.rate, mib(small.peak), large.rate, mib(large.peak), float64(large.peak)/float64(small.peak), mib(ids))
	if float64(large.peak) > 1.5*float64(small.peak)+float64(ids) {
		t.Fatalf("peak heap grew with input: %.1f MiB for 1M vs %.1f MiB for 100K (of which the ids read may take %.1f MiB)", mib(large.peak), mib(small.peak), mib(ids))
	}
}

// idSetBytes is the live heap a set of n id hashes takes.
func idSetBytes(n int) uint64 {
	live := func() uint64 {
		runtime.GC()
		s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
		metrics.Read(s)
		return s[0].Value.Uint64()
	}
	before := live()
	set := map[uint64]struct{}{}
	for i := range n {
		set[uint64(i)*0x9e3779b97f4a7c15] = struct{}{}
	}
	after := live()
	runtime.KeepAlive(set)
	if after < before {
		return 0
	}
	return after - before
}

type throughput struct {
	rate float64
	peak uint64
}

func mib(b uint64) float64 { return float64(b) / (1 << 20) }

func runPromptsThrough(t *testing.T, n int) throughput {
	dir := t.TempDir()
	in := filepath.Join(dir, "prompts.jsonl")
	writePrompts(t, in, n)
	p := plan(t, dir, passThroughGraph(2))
	// Frequent GCs sample the live heap often, so both runs' peaks come
	// close to the true maximum of what is in flight.
	defer debug.SetGCPercent(debug.SetGCPercent(10))
	runtime.GC()
	// Peak live heap: the heap each GC found live, sampled through the run.
	// It measures what the run holds, without the garbage a GC has not yet
	// collected (HeapAlloc's peak swings with GC timing).
	var peak atomic.Uint64
	stopSampling := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		sample := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
		tick := time.NewTicker(2 * time.Millisecond)
		defer tick.Stop()
		for {
			metrics.Read(sample)
			if v := sample[0].Value.Uint64(); v > peak.Load() {
				peak.Store(v)
			}
			select {
			case <-stopSampling:
				return
			case <-tick.C:
			}
		}
	}()
	start := time.Now()
	sum, err := engine.Run(context.Background(), p, engine.Options{})
	elapsed := time.Since(start)
	close(stopSampling)
	<-sampled
	if err != nil {
		t.Fatal(err)
	}
	if got := sum.Stages[2].Out; got != int64(n) {
		t.Fatalf("write-jsonl wrote %d records, want %d", got, n)
	}
	// Exactly once: every id appears once in the committed output.
	f, err := os.Open(filepath.Join(dir, "out.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	seen := make([]bool, n)
	sc := bufio.NewScanner(f)
	lines := 0
	for sc.Scan() {
		var rec struct{ ID string }
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
			t.Fatal(err)
		}
		var i int
		if _, err := fmt.Sscanf(rec.ID, "p%d", &i); err != nil || i < 0 || i >= n || seen[i] {
			t.Fatalf("id %q unexpected or seen twice", rec.ID)
		}
		seen[i] = true
		lines++
	}
	if lines != n {
		t.Fatalf("output has %d lines, want %d", lines, n)
	}
	return throughput{rate: float64(n) / elapsed.Seconds(), peak: peak.Load()}
}

func writePrompts(t testing.TB, path string, n int) {
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w := bufio.NewWriterSize(f, 1<<20)
	for i := 0; i < n; i++ {
		fmt.Fprintf(w, `{"id":"p%d","messages":[{"role":"user","content":"Explain topic number %d in a few sentences."}]}`+"\n", i, i)
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	f.Close()
}

// passThroughGraph is read-prompts → pass (workers) → write-jsonl over
// prompts.jsonl beside the pipeline file.
func passThroughGraph(workers int) string {
	return fmt.Sprintf(`
[[stage]]
id = "prompts"
kind = "read-prompts"
path = "prompts.jsonl"

[[stage]]
id = "mid"
kind = "pass"
input = "prompts"
workers = %d

[[stage]]
id = "out"
kind = "write-jsonl"
input = "mid"
path = "out.jsonl"
`, workers)
}

func BenchmarkPassThroughGraph(b *testing.B) {
	dir := b.TempDir()
	writePrompts(b, filepath.Join(dir, "prompts.jsonl"), 200_000)
	p := plan(b, dir, passThroughGraph(1))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := engine.Run(context.Background(), p, engine.Options{}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(200_000*b.N)/b.Elapsed().Seconds(), "records/s")
}

// BenchmarkPassThroughBaseline does the same work as
// BenchmarkPassThroughGraph — decode each JSONL prompt, encode it again,
// write it — in one loop without the engine: the reference its figure is
// reported against.
func BenchmarkPassThroughBaseline(b *testing.B) {
	dir := b.TempDir()
	in := filepath.Join(dir, "prompts.jsonl")
	writePrompts(b, in, 200_000)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		f, err := os.Open(in)
		if err != nil {
			b.Fatal(err)
		}
		out, err := os.Create(filepath.Join(dir, "out.jsonl"))
		if err != nil {
			b.Fatal(err)
		}
		w := bufio.NewWriterSize(out, 1<<20)
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			var rec record.Record
			if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
				b.Fatal(err)
			}
			line, _ := json.Marshal(&rec)
			w.Write(line)
			w.WriteByte('\n')
		}
		w.Flush()
		out.Sync()
		out.Close()
		f.Close()
	}
	b.ReportMetric(float64(200_000*b.N)/b.Elapsed().Seconds(), "records/s")
}
