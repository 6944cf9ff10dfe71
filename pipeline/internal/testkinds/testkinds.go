// Package testkinds holds the kinds the tests of pipeline and
// pipeline/engine build their graphs from: count (a source of records
// "0".."n-1"), pass (forwards, tags, fails or rejects on request) and
// collect (a sink that keeps what it saw, for Sink).
package testkinds

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pipe-dev/pipe/pipeline"
	"github.com/pipe-dev/pipe/pipeline/config"
	"github.com/pipe-dev/pipe/pipeline/record"
)

// Register adds count, pass, spend (pass marked expensive, as generate is)
// and collect to reg.
func Register(reg *pipeline.Registry) {
	reg.Register(pipeline.Spec{Kind: "count", Summary: "test source", Outputs: []string{"out"},
		New: pipeline.NewSource(func(c *CountConfig) (pipeline.Source, error) { return &countSource{n: c.N}, nil })})
	reg.Register(pipeline.Spec{Kind: "pass", Summary: "test pass-through", Outputs: []string{"out", "rejected"},
		New: pipeline.NewProcessor(func(c *PassConfig) (pipeline.Processor, error) { return &Pass{cfg: *c}, nil })})
	reg.Register(pipeline.Spec{Kind: "spend", Summary: "test expensive pass-through", Outputs: []string{"out", "rejected"}, Expensive: true,
		New: pipeline.NewProcessor(func(c *PassConfig) (pipeline.Processor, error) { return &Pass{cfg: *c}, nil })})
	reg.Register(pipeline.Spec{Kind: "collect", Summary: "test sink", New: pipeline.NewProcessor(func(c *collectConfig) (pipeline.Processor, error) {
		return &Collect{cfg: *c, IDs: map[string]int{}, Tags: map[string]int{}}, nil
	})})
}

// Sink is the collect stage of that id, once it opened.
func Sink(id string) (*Collect, bool) {
	v, ok := sinks.Load(id)
	if !ok {
		return nil, false
	}
	return v.(*Collect), true
}

// CountConfig is count's configuration.
type CountConfig struct {
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

// PassConfig is pass's configuration.
type PassConfig struct {
	Tag     string `toml:"tag"`
	FailAt  int64  `toml:"fail_at" default:"-1"`
	Workers int    `toml:"workers" default:"1"`
	// RejectEvery rejects every k-th record (0: none).
	RejectEvery int64 `toml:"reject_every" default:"0"`
	// HaltAt halts the run (Env.Halt) at the HaltAt-th record (0: never).
	HaltAt int64 `toml:"halt_at" default:"0"`
	// Delay is each record's time in Process, as a request's.
	Delay config.Duration `toml:"delay"`
}

// Pass forwards records, optionally tagging (mutating) them, failing at the
// FailAt-th record, rejecting some, or halting the run.
type Pass struct {
	cfg  PassConfig
	seen atomic.Int64
	halt func(error)
	id   string
}

func (p *Pass) Open(_ context.Context, env *pipeline.Env) error {
	p.halt, p.id = env.Halt, env.StageID
	return nil
}

var halts sync.Map // stage id -> records begun when its halt returned

// BegunAtHalt is how many records the pass stage of that id had begun
// (its Process called) when its halt (halt_at) returned.
func BegunAtHalt(id string) (int64, bool) {
	v, ok := halts.Load(id)
	if !ok {
		return 0, false
	}
	return v.(int64), true
}

func (p *Pass) Workers() int { return p.cfg.Workers }

func (p *Pass) Process(ctx context.Context, rec *record.Record, out pipeline.Emitter) error {
	n := p.seen.Add(1)
	if n-1 == p.cfg.FailAt {
		return errors.New("injected failure")
	}
	if p.cfg.Delay.Duration > 0 {
		time.Sleep(p.cfg.Delay.Duration)
	}
	if n == p.cfg.HaltAt {
		p.halt(fmt.Errorf("halted at record %d", n))
		halts.Store(p.id, p.seen.Load())
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

// Collect is a sink that keeps ids (and tags) it saw and whether it committed.
type Collect struct {
	cfg       collectConfig
	mu        sync.Mutex
	IDs       map[string]int // each id seen, and how often
	Tags      map[string]int // each Meta key seen, and how often
	Committed bool
}

var sinks sync.Map // stage id -> *Collect, so tests can look at them (Sink)

func (c *Collect) Open(_ context.Context, env *pipeline.Env) error {
	sinks.Store(env.StageID, c)
	return nil
}

func (c *Collect) Process(ctx context.Context, rec *record.Record, _ pipeline.Emitter) error {
	if c.cfg.Delay.Duration > 0 {
		select {
		case <-time.After(c.cfg.Delay.Duration):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.IDs[rec.ID]++
	for k := range rec.Meta {
		c.Tags[k]++
	}
	return nil
}

func (c *Collect) Finish(context.Context, pipeline.Emitter) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.Committed = true
	return nil
}
