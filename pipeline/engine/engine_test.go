package engine_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pipe-dev/pipe/pipeline"
	"github.com/pipe-dev/pipe/pipeline/engine"
	"github.com/pipe-dev/pipe/pipeline/internal/testkinds"
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

// A halt (a budget reached, a stage's early check) stops the intake before
// Env.Halt returns: an expensive stage begins, after that, only the
// records its other workers had already taken.
func TestHaltSpendsNothingPastWhatIsInFlight(t *testing.T) {
	const workers, haltAt = 8, 50
	for range 20 {
		p := spendPlan(t, fmt.Sprintf("workers = %d\nhalt_at = %d", workers, haltAt))
		sum, err := engine.Run(context.Background(), p, engine.Options{})
		if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("halted at record %d", haltAt)) {
			t.Fatalf("err = %v, want the halt's", err)
		}
		// Counted from when the halt returned: how long the halting
		// worker took to get there is not the engine's.
		gen := sum.Stages[1]
		begun, ok := testkinds.BegunAtHalt("gen")
		if !ok {
			t.Fatal("the stage never halted")
		}
		if after := gen.Out + gen.Rejected - begun; after > workers-1 {
			t.Fatalf("%d records begun by an expensive stage after its halt returned, with %d workers: want at most %d, begun by the others before it (%+v)",
				after, workers, workers-1, gen)
		}
		if !sum.Drained || !gen.Balanced() {
			t.Fatalf("drained %v, balanced %v: %+v", sum.Drained, gen.Balanced(), gen)
		}
	}
}

// A limit (a budget) is checked as soon as an expensive stage ends a
// record, not only at its tick (100 ms, 160 records here): a limit
// reached at the 50th record leaves what was in flight then, and the
// records begun while the check ran.
func TestLimitIsCheckedAsRecordsEnd(t *testing.T) {
	const workers, limit = 8, 50
	p := spendPlan(t, fmt.Sprintf("workers = %d\ndelay = \"5ms\"", workers))
	reached := errors.New("limit reached")
	sum, err := engine.Run(context.Background(), p, engine.Options{Limit: func(s *engine.Summary) error {
		if s.Stages[1].Out >= limit {
			return reached
		}
		return nil
	}})
	if !errors.Is(err, reached) {
		t.Fatalf("err = %v, want the limit's", err)
	}
	if gen := sum.Stages[1]; gen.Out > limit+2*workers {
		t.Fatalf("%d records past a limit reached at %d with %d workers of 5 ms each, want at most %d", gen.Out-limit, limit, workers, 2*workers)
	}
}

// spendPlan is an endless count source into an expensive stage "gen"
// (spend, with keys) into a collect sink.
func spendPlan(t *testing.T, keys string) *pipeline.Plan {
	t.Helper()
	return plan(t, t.TempDir(), `
[[stage]]
id = "src"
kind = "count"
n = -1

[[stage]]
id = "gen"
kind = "spend"
input = "src"
`+keys+`

[[stage]]
id = "sink"
kind = "collect"
input = "gen"
`)
}
