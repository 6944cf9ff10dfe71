package engine_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/pipe-dev/pipe/pipeline"
	"github.com/pipe-dev/pipe/pipeline/commitlog"
	"github.com/pipe-dev/pipe/pipeline/config"
	"github.com/pipe-dev/pipe/pipeline/engine"
	"github.com/pipe-dev/pipe/pipeline/record"
)

// Test-only kinds for the durability tests (panics, an expensive stage that
// counts its work), registered together with the kinds of testRegistry and
// the real dedupe-against-progress.

type panickyConfig struct {
	PanicOn string `toml:"panic_on"`
	// AfterEmit panics after the record was sent on (not a per-record
	// failure any more: the run fails).
	AfterEmit bool `toml:"after_emit"`
	Workers   int  `toml:"workers" default:"1"`
}

// panicky forwards records and panics on the one whose id is PanicOn.
type panicky struct{ cfg panickyConfig }

func (p *panicky) Workers() int { return p.cfg.Workers }

func (p *panicky) Process(_ context.Context, rec *record.Record, out pipeline.Emitter) error {
	if rec.ID == p.cfg.PanicOn && !p.cfg.AfterEmit {
		panic("boom on " + rec.ID)
	}
	if err := out.Emit("", rec); err != nil {
		return err
	}
	if rec.ID == p.cfg.PanicOn {
		panic("boom after sending " + rec.ID)
	}
	return nil
}

// panicSink is a sink that panics on one id and counts the others.
type panicSink struct {
	cfg panickyConfig
	mu  sync.Mutex
	ids map[string]int
}

var panicSinks sync.Map // stage id -> *panicSink

func (s *panicSink) Open(_ context.Context, env *pipeline.Env) error {
	panicSinks.Store(env.StageID, s)
	return nil
}

func (s *panicSink) Process(_ context.Context, rec *record.Record, _ pipeline.Emitter) error {
	if rec.ID == s.cfg.PanicOn {
		var m map[string]int
		//lint:ignore SA5000 the panic is the point of this sink
		m[rec.ID]++ // a nil map write: a real runtime panic
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ids[rec.ID]++
	return nil
}

type expensiveConfig struct {
	// Key names the counter (see calls) the stage counts its work in.
	Key     string          `toml:"key" required:"true"`
	Workers int             `toml:"workers" default:"4"`
	Delay   config.Duration `toml:"delay"`
	// RejectEvery rejects the ids i with (i+1) % RejectEvery == 0 (0: none),
	// like generate rejecting a broken completion.
	RejectEvery int `toml:"reject_every"`
}

// expensive stands for generate: Spec.Expensive, so the engine journals what
// it emits and replays it on resume. It counts every Process call per id
// (the "requests sent") and the ids it finished (emitted).
type expensive struct {
	cfg expensiveConfig
	c   *counter
}

// counter is what an expensive stage did, shared across runs of one test.
type counter struct {
	mu       sync.Mutex
	calls    map[string]int
	finished map[string]bool
}

func (c *counter) snapshot() (calls map[string]int, finished map[string]bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	calls, finished = map[string]int{}, map[string]bool{}
	for k, v := range c.calls {
		calls[k] = v
	}
	for k, v := range c.finished {
		finished[k] = v
	}
	return calls, finished
}

var counters sync.Map // key -> *counter

func counterFor(key string) *counter {
	v, _ := counters.LoadOrStore(key, &counter{calls: map[string]int{}, finished: map[string]bool{}})
	return v.(*counter)
}

func (x *expensive) Workers() int { return x.cfg.Workers }

func (x *expensive) Process(ctx context.Context, rec *record.Record, out pipeline.Emitter) error {
	x.c.mu.Lock()
	x.c.calls[rec.ID]++
	x.c.mu.Unlock()
	if d := x.cfg.Delay.Duration; d > 0 {
		select {
		case <-time.After(d):
		case <-ctx.Done():
			return ctx.Err() // abandoned in flight, like a request cut off
		}
	}
	rec.Completion = &record.Completion{Answer: "answer to " + rec.ID, FinishReason: "stop"}
	var i int
	fmt.Sscan(rec.ID, &i)
	var err error
	if k := x.cfg.RejectEvery; k > 0 && (i+1)%k == 0 {
		err = out.Reject(rec, "bad_completion", "every k-th")
	} else {
		err = out.Emit("", rec)
	}
	if err != nil {
		return err
	}
	x.c.mu.Lock()
	x.c.finished[rec.ID] = true
	x.c.mu.Unlock()
	return nil
}

type delayConfig struct {
	Delay config.Duration `toml:"delay"`
}

// delay forwards each record after a pause: a slow branch.
type delay struct{ cfg delayConfig }

func (d *delay) Process(ctx context.Context, rec *record.Record, out pipeline.Emitter) error {
	select {
	case <-time.After(d.cfg.Delay.Duration):
	case <-ctx.Done():
		return ctx.Err()
	}
	return out.Emit("", rec)
}

func durableRegistry() *pipeline.Registry {
	reg := testRegistry()
	reg.Register(*pipeline.DefaultRegistry.Lookup("dedupe-against-progress"))
	reg.Register(pipeline.Spec{Kind: "panicky", Summary: "test: panics on one id", Outputs: []string{"out"},
		New: pipeline.NewProcessor(func(c *panickyConfig) (pipeline.Processor, error) { return &panicky{cfg: *c}, nil })})
	reg.Register(pipeline.Spec{Kind: "panic-sink", Summary: "test: sink that panics on one id", New: pipeline.NewProcessor(func(c *panickyConfig) (pipeline.Processor, error) {
		return &panicSink{cfg: *c, ids: map[string]int{}}, nil
	})})
	reg.Register(pipeline.Spec{Kind: "expensive", Summary: "test: costly work, journaled", Outputs: []string{"out", pipeline.RejectedPort},
		Expensive: true,
		New: pipeline.NewProcessor(func(c *expensiveConfig) (pipeline.Processor, error) {
			cfg := *c
			return &expensive{cfg: cfg, c: counterFor(cfg.Key)}, nil
		})})
	reg.Register(pipeline.Spec{Kind: "delay", Summary: "test: slow pass-through", Outputs: []string{"out"},
		New: pipeline.NewProcessor(func(c *delayConfig) (pipeline.Processor, error) { return &delay{cfg: *c}, nil })})
	return reg
}

// durablePlan is plan with durableRegistry's kinds.
func durablePlan(t testing.TB, dir, src string) *pipeline.Plan {
	t.Helper()
	return planWith(t, dir, src, durableRegistry())
}

// logBuffer is a run log the run's goroutines may write concurrently.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// stageByID returns the summary of one stage.
func stageByID(t testing.TB, sum *engine.Summary, id string) engine.StageSummary {
	t.Helper()
	for _, s := range sum.Stages {
		if s.ID == id {
			return s
		}
	}
	t.Fatalf("no stage %q in the summary", id)
	return engine.StageSummary{}
}

func allBalanced(t testing.TB, sum *engine.Summary) {
	t.Helper()
	for _, s := range sum.Stages {
		if !s.Balanced() {
			t.Errorf("stage %s unbalanced: in %d, out %d, rejected %d, failed %d, skipped %d (abandoned %d)",
				s.ID, s.In, s.Out, s.Rejected, s.Failed, s.Skipped, s.Abandoned)
		}
	}
}

// readRecords reads a JSONL file of records (every line must be whole).
func readRecords(t testing.TB, path string) []record.Record {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []record.Record
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<24)
	for n := 1; sc.Scan(); n++ {
		var r record.Record
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("%s:%d: %v", path, n, err)
		}
		out = append(out, r)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// idCounts counts the ids of a JSONL file of records.
func idCounts(t testing.TB, path string) map[string]int {
	t.Helper()
	m := map[string]int{}
	for _, r := range readRecords(t, path) {
		m[r.ID]++
	}
	return m
}

// doneHashes reads a run directory's done.ids (opening it creates nothing
// new when it exists).
func doneHashes(t testing.TB, path string) []uint64 {
	t.Helper()
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("done log: %v", err)
	}
	l, hashes, err := commitlog.OpenIDLog(path)
	if err != nil {
		t.Fatal(err)
	}
	l.Close()
	return hashes
}

func ids(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprint(i)
	}
	return out
}
