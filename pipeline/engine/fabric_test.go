package engine_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"

	"github.com/pipe-dev/pipe/pipeline"
	"github.com/pipe-dev/pipe/pipeline/engine"
	"github.com/pipe-dev/pipe/pipeline/internal/testkinds"
	"github.com/pipe-dev/pipe/pipeline/pipefile"
	"github.com/pipe-dev/pipe/pipeline/record"
)

// burst emits n records as fast as its output takes them and counts those
// sent (Emit returned).
type burst struct {
	n    int64
	sent atomic.Int64
}

var bursts sync.Map // stage id -> *burst

func (b *burst) Open(_ context.Context, env *pipeline.Env) error {
	bursts.Store(env.StageID, b)
	return nil
}

func (b *burst) Read(ctx context.Context, out pipeline.Emitter) error {
	for i := range b.n {
		if err := out.Emit("", &record.Record{ID: fmt.Sprintf("%p-%d", b, i)}); err != nil {
			return err
		}
		out.Took(1)
		b.sent.Add(1)
	}
	return nil
}

// gate is a sink whose one worker holds the first record it gets until the
// test opens the gate.
type gate struct{ open <-chan struct{} }

var gateOpen chan struct{}

func (g *gate) Process(ctx context.Context, _ *record.Record, _ pipeline.Emitter) error {
	select {
	case <-g.open:
	case <-ctx.Done():
	}
	return nil
}

func fabricRegistry() *pipeline.Registry {
	reg := pipeline.NewRegistry()
	reg.Register(pipeline.Spec{Kind: "burst", Summary: "test: emits n records", Outputs: []string{"out"},
		New: pipeline.NewSource(func(c *testkinds.CountConfig) (pipeline.Source, error) { return &burst{n: c.N}, nil })})
	reg.Register(pipeline.Spec{Kind: "burst-1", Summary: "test: emits n records through a port of buffer 1", Outputs: []string{"out"},
		PortBuffers: map[string]int{"out": 1},
		New:         pipeline.NewSource(func(c *testkinds.CountConfig) (pipeline.Source, error) { return &burst{n: c.N}, nil })})
	reg.Register(pipeline.Spec{Kind: "gate", Summary: "test: holds a record until the test opens it",
		New: pipeline.NewProcessor(func(*struct{}) (pipeline.Processor, error) { return &gate{open: gateOpen}, nil })})
	return reg
}

// TestPortBufferHoldsWhatItSays: a port of buffer N lets its stage send N
// records past what the reading stage holds (its one worker: one record),
// and no more, whether the port feeds one input, several (each reader gets
// its own copy), or one input of a stage that merges several.
func TestPortBufferHoldsWhatItSays(t *testing.T) {
	const records = 1000
	for _, tc := range []struct {
		name   string
		buffer int
		graph  string
		want   map[string]int64 // records each source sent while the gates were shut
	}{
		{"one edge, buffer 1", 1, `
[[stage]]
id = "a"
kind = "burst"
n = 1000
[[stage]]
id = "g"
kind = "gate"
input = "a"
`, map[string]int64{"a": 1 + 1}},
		{"one edge, buffer 5", 5, `
[[stage]]
id = "a"
kind = "burst"
n = 1000
[[stage]]
id = "g"
kind = "gate"
input = "a"
`, map[string]int64{"a": 5 + 1}},
		{"the kind's port buffer", 64, `
[[stage]]
id = "a"
kind = "burst-1"
n = 1000
[[stage]]
id = "g"
kind = "gate"
input = "a"
`, map[string]int64{"a": 1 + 1}},
		{"fan-out to two", 3, `
[[stage]]
id = "a"
kind = "burst"
n = 1000
[[stage]]
id = "g1"
kind = "gate"
input = "a"
[[stage]]
id = "g2"
kind = "gate"
input = "a"
`, map[string]int64{"a": 3 + 1}},
		{"merged inputs, buffer 1", 1, `
[[stage]]
id = "a"
kind = "burst"
n = 1000
[[stage]]
id = "b"
kind = "burst"
n = 1000
[[stage]]
id = "g"
kind = "gate"
input = ["a", "b"]
`, map[string]int64{"a+b": 2*1 + 1}},
		{"merged inputs, buffer 4", 4, `
[[stage]]
id = "a"
kind = "burst"
n = 1000
[[stage]]
id = "b"
kind = "burst"
n = 1000
[[stage]]
id = "g"
kind = "gate"
input = ["a", "b"]
`, map[string]int64{"a+b": 2*4 + 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				dir := t.TempDir()
				f, probs := pipefile.Parse(dir+"/test.toml", []byte("[pipeline]\nrun_dir = \"run\"\n"+tc.graph), pipefile.Options{})
				if len(probs) > 0 {
					t.Fatal(probs)
				}
				gateOpen = make(chan struct{})
				p, probs := pipeline.Build(f, fabricRegistry())
				if len(probs) > 0 {
					t.Fatal(probs)
				}
				done := make(chan error)
				var sum *engine.Summary
				go func() {
					var err error
					sum, err = engine.Run(context.Background(), p, engine.Options{EdgeBuffer: tc.buffer})
					done <- err
				}()
				synctest.Wait() // every source is blocked on a full port
				sent := func(id string) int64 {
					v, ok := bursts.Load(id)
					if !ok {
						t.Fatalf("source %q never opened", id)
					}
					return v.(*burst).sent.Load()
				}
				for id, want := range tc.want {
					var got int64
					if id == "a+b" {
						got = sent("a") + sent("b")
					} else {
						got = sent(id)
					}
					if got != want {
						t.Errorf("%s sent %d records while the reader held one, want %d", id, got, want)
					}
				}
				close(gateOpen)
				if err := <-done; err != nil {
					t.Fatal(err)
				}
				for _, s := range sum.Stages {
					if s.Kind == "gate" && s.Out != records*int64(len(p.Lookup(s.ID).Inputs)) {
						t.Errorf("gate %s took %d records, want %d per input", s.ID, s.Out, records)
					}
				}
			})
		})
	}
}
