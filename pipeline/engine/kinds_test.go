package engine_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pipe-dev/pipe/pipeline"
	"github.com/pipe-dev/pipe/pipeline/config"
	"github.com/pipe-dev/pipe/pipeline/pipefile"
	"github.com/pipe-dev/pipe/pipeline/record"
	_ "github.com/pipe-dev/pipe/stages" // the real kinds; tests reuse some
)

// Test-only kinds, registered into a registry of the test's own together
// with the real read-prompts and write-jsonl.

type countConfig struct {
	N int64 `toml:"n" default:"10"`
}

// countSource emits records "0".."n-1", or forever when n < 0.
type countSource struct{ n int64 }

func (s *countSource) Read(ctx context.Context, out pipeline.Emitter) error {
	for i := int64(0); s.n < 0 || i < s.n; i++ {
		if err := out.Emit("", &record.Record{ID: fmt.Sprint(i), Meta: map[string]any{}}); err != nil {
			return err
		}
		out.Took(1)
	}
	return nil
}

type passConfig struct {
	Tag     string `toml:"tag"`
	FailAt  int64  `toml:"fail_at" default:"-1"`
	Workers int    `toml:"workers" default:"1"`
	// RejectEvery rejects every k-th record (0: none).
	RejectEvery int64 `toml:"reject_every" default:"0"`
}

// pass forwards records, optionally tagging (mutating) them, failing at the
// FailAt-th record, or rejecting some.
type pass struct {
	cfg  passConfig
	seen atomic.Int64
}

func (p *pass) Workers() int { return p.cfg.Workers }

func (p *pass) Process(ctx context.Context, rec *record.Record, out pipeline.Emitter) error {
	n := p.seen.Add(1)
	if n-1 == p.cfg.FailAt {
		return errors.New("injected failure")
	}
	if p.cfg.Tag != "" {
		rec.Meta[p.cfg.Tag] = true
	}
	if p.cfg.RejectEvery > 0 && n%p.cfg.RejectEvery == 0 {
		return out.Reject(rec, "every_k", fmt.Sprintf("record %d", n))
	}
	return out.Emit("", rec)
}

type collectConfig struct {
	Delay config.Duration `toml:"delay"`
}

// collect is a sink that keeps ids (and tags) it saw and whether it committed.
type collect struct {
	cfg       collectConfig
	mu        sync.Mutex
	ids       map[string]int
	tags      map[string]int
	committed bool
}

var sinks sync.Map // stage id -> *collect, so tests can look at them

func (c *collect) Open(_ context.Context, env *pipeline.Env) error {
	sinks.Store(env.StageID, c)
	return nil
}

func (c *collect) Process(ctx context.Context, rec *record.Record, _ pipeline.Emitter) error {
	if c.cfg.Delay.Duration > 0 {
		select {
		case <-time.After(c.cfg.Delay.Duration):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.ids[rec.ID]++
	for k := range rec.Meta {
		c.tags[k]++
	}
	return nil
}

func (c *collect) Finish(context.Context, pipeline.Emitter) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.committed = true
	return nil
}

func testRegistry() *pipeline.Registry {
	reg := pipeline.NewRegistry()
	reg.Register(*pipeline.DefaultRegistry.Lookup("read-prompts"))
	reg.Register(*pipeline.DefaultRegistry.Lookup("write-jsonl"))
	reg.Register(pipeline.Spec{Kind: "count", Summary: "test source", Outputs: []string{"out"},
		New: pipeline.NewSource(func(c *countConfig) (pipeline.Source, error) { return &countSource{n: c.N}, nil })})
	reg.Register(pipeline.Spec{Kind: "pass", Summary: "test pass-through", Outputs: []string{"out", "rejected"},
		New: pipeline.NewProcessor(func(c *passConfig) (pipeline.Processor, error) { return &pass{cfg: *c}, nil })})
	reg.Register(pipeline.Spec{Kind: "collect", Summary: "test sink", New: pipeline.NewProcessor(func(c *collectConfig) (pipeline.Processor, error) {
		return &collect{cfg: *c, ids: map[string]int{}, tags: map[string]int{}}, nil
	})})
	return reg
}

// plan builds a plan from TOML text in dir; it fails the test on any problem.
func plan(t testing.TB, dir, src string) *pipeline.Plan {
	t.Helper()
	if !strings.Contains(src, "[pipeline]") {
		src = "[pipeline]\nrun_dir = \"run\"\n" + src
	}
	f, probs := pipefile.Parse(dir+"/test.toml", []byte(src), pipefile.Options{})
	if len(probs) > 0 {
		t.Fatal(probs)
	}
	p, probs := pipeline.Build(f, testRegistry())
	if len(probs) > 0 {
		t.Fatal(probs)
	}
	return p
}

func sink(t testing.TB, id string) *collect {
	t.Helper()
	v, ok := sinks.Load(id)
	if !ok {
		t.Fatalf("sink %q never opened", id)
	}
	return v.(*collect)
}
