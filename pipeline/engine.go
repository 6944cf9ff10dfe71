package pipeline

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/reugn/go-streams"
	"github.com/reugn/go-streams/extension"
	"github.com/reugn/go-streams/flow"
)

// RunOptions control one run of a plan.
type RunOptions struct {
	// Stop, when closed, stops intake: sources stop reading, records already
	// read are processed, outputs are committed. Canceling Run's ctx instead
	// stops at once (in-flight records are abandoned and will be redone).
	Stop <-chan struct{}
	// DrainTimeout bounds the drain after Stop; then the run stops at once.
	// Zero means 10 minutes (long thinking outputs take minutes).
	DrainTimeout time.Duration
	// EdgeBuffer is the capacity of every edge. Zero means 64. Together with
	// each stage's worker count it bounds the records in memory.
	EdgeBuffer int
	// Log receives progress lines for the run log; nil discards them.
	Log io.Writer
	// Resources are shared by the stages; nil means a fresh set, closed at the end.
	Resources *Resources
	// Progress, if set, is called every ProgressEvery (default 5s) with a
	// snapshot, from a goroutine of Run's; it must not block for long.
	Progress      func(*Summary)
	ProgressEvery time.Duration
}

// Summary is the state of a run: per-stage accounting and figures.
type Summary struct {
	Stages  []StageSummary
	Elapsed time.Duration
	// Drained is true when the run was stopped by Stop and drained.
	Drained bool
	// DeadLetters are the files in the run directory that received
	// rejected or failed records.
	DeadLetters []string
}

// StageSummary is one stage's accounting: In = Out + Rejected + Failed once
// the run has finished cleanly; Abandoned counts records dropped by an
// immediate stop.
type StageSummary struct {
	ID, Kind                  string
	In, Out, Rejected, Failed int64
	Abandoned                 int64
	Reasons                   map[string]int64 // rejections by reason code
	Queued                    int              // records waiting on this stage's output edges
	Stats                     []Stat
}

// Started reports whether any record moved: false when the run failed
// before doing any work (e.g. no server was ready).
func (s *Summary) Started() bool {
	for _, st := range s.Stages {
		if st.In+st.Out+st.Rejected+st.Failed > 0 {
			return true
		}
	}
	return false
}

// Balanced reports whether every record that came in went somewhere.
func (s StageSummary) Balanced() bool { return s.In == s.Out+s.Rejected+s.Failed }

// StageError is a failure of one stage; it names the stage.
type StageError struct {
	Stage, Kind string
	Err         error
}

func (e *StageError) Error() string {
	return fmt.Sprintf("stage %q (%s): %v", e.Stage, e.Kind, e.Err)
}
func (e *StageError) Unwrap() error { return e.Err }

// ErrStopped is the cause when the run was stopped at once (ctx canceled or
// the drain timed out).
var ErrStopped = errors.New("stopped at once; records in flight were abandoned and will be redone")

// node is a running stage.
type node struct {
	ps       *PlanStage
	stage    Stage
	opened   bool
	outs     map[string]chan any // connected output ports
	firstOut string
	inlet    <-chan any

	in, out, rejected, failed, abandoned atomic.Int64
	reasonsMu                            sync.Mutex
	reasons                              map[string]int64
	failedSelf                           atomic.Bool
	// intake is true for expensive stages and every stage upstream of one:
	// after Stop they drop records not yet started (see Spec.Expensive).
	intake bool
}

type engine struct {
	plan       *Plan
	opts       RunOptions
	nodes      []*node
	dead       *deadLetters
	hardCtx    context.Context
	hardCancel context.CancelCauseFunc
	intakeCtx  context.Context
	start      time.Time
	drained    atomic.Bool
	running    atomic.Bool // nodes are wired and started; progress may read them
}

// Run executes the plan until every source is exhausted and every record has
// reached a sink, the first stage fails, Stop drains it, or ctx stops it. It
// returns the summary in every case. No goroutine it started outlives it.
func Run(ctx context.Context, p *Plan, opts RunOptions) (*Summary, error) {
	if opts.DrainTimeout == 0 {
		opts.DrainTimeout = 10 * time.Minute
	}
	if opts.EdgeBuffer <= 0 {
		opts.EdgeBuffer = 64
	}
	if opts.Log == nil {
		opts.Log = io.Discard
	}
	if opts.ProgressEvery <= 0 {
		opts.ProgressEvery = 5 * time.Second
	}
	if opts.Resources == nil {
		opts.Resources = NewResources()
		defer opts.Resources.Close()
	}
	e := &engine{plan: p, opts: opts, start: time.Now()}
	if err := os.MkdirAll(p.File.RunDir, 0o755); err != nil {
		return e.summary(), fmt.Errorf("run directory: %w", err)
	}
	e.dead = newDeadLetters(p.File.RunDir)
	e.hardCtx, e.hardCancel = context.WithCancelCause(context.WithoutCancel(ctx))
	defer e.hardCancel(nil)
	var intakeCancel context.CancelFunc
	e.intakeCtx, intakeCancel = context.WithCancel(e.hardCtx)
	defer intakeCancel()

	for _, ps := range p.Stages {
		st, err := ps.Spec.New(ps.Config)
		if err != nil {
			return e.summary(), &StageError{ps.ID(), ps.Spec.Kind, err}
		}
		if err := checkStageType(ps, st); err != nil {
			return e.summary(), err
		}
		e.nodes = append(e.nodes, &node{ps: ps, stage: st, reasons: map[string]int64{}})
	}
	defer e.closeStages()

	// Stop and ctx are watched from here on, so a Ctrl-C while a stage opens
	// (e.g. generate waiting for servers to warm up) is heard.
	finished := make(chan struct{})
	var watch sync.WaitGroup
	watch.Add(1)
	go func() {
		defer watch.Done()
		e.watch(ctx, finished, intakeCancel)
	}()
	defer watch.Wait()
	defer close(finished)

	for _, n := range e.nodes {
		if o, ok := n.stage.(Opener); ok {
			env := &Env{StageID: n.ps.ID(), RunDir: p.File.RunDir, Log: opts.Log, Resources: opts.Resources}
			// Opening is intake: a stop request ends it.
			if err := o.Open(e.intakeCtx, env); err != nil {
				if e.intakeCtx.Err() != nil {
					return e.summary(), fmt.Errorf("stopped while stage %q was opening: %w", n.ps.ID(), ErrStopped)
				}
				return e.summary(), &StageError{n.ps.ID(), n.ps.Spec.Kind, err}
			}
		}
		n.opened = true
	}

	e.wire()
	e.markIntake()
	e.running.Store(true)

	var wg sync.WaitGroup
	for _, n := range e.nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			e.runNode(n)
		}()
	}
	wg.Wait()

	sum := e.summary()
	paths, derr := e.dead.Close()
	sum.DeadLetters = paths
	sort.Strings(sum.DeadLetters)
	if err := context.Cause(e.hardCtx); err != nil {
		return sum, err
	}
	if derr != nil {
		return sum, fmt.Errorf("writing rejected/failed records: %w", derr)
	}
	for _, s := range sum.Stages {
		if !s.Balanced() {
			return sum, fmt.Errorf("accounting mismatch in stage %q (%s): in %d != out %d + rejected %d + failed %d (a bug in that stage)",
				s.ID, s.Kind, s.In, s.Out, s.Rejected, s.Failed)
		}
	}
	return sum, nil
}

func checkStageType(ps *PlanStage, st Stage) error {
	_, isSrc := st.(Source)
	_, isProc := st.(Processor)
	switch {
	case ps.Spec.Source && !isSrc:
		return &StageError{ps.ID(), ps.Spec.Kind, errors.New("kind is declared a source but does not implement pipeline.Source")}
	case !ps.Spec.Source && !isProc:
		return &StageError{ps.ID(), ps.Spec.Kind, errors.New("kind does not implement pipeline.Processor")}
	}
	return nil
}

// wire builds the go-streams fabric: one bounded channel per connected output
// port, FanOut where a port feeds several inputs (each branch gets its own
// copy of the record), Merge where a stage has several inputs.
func (e *engine) wire() {
	byPS := map[*PlanStage]*node{}
	for _, n := range e.nodes {
		byPS[n.ps] = n
		n.outs = map[string]chan any{}
		if len(n.ps.Spec.Outputs) > 0 {
			n.firstOut = n.ps.Spec.Outputs[0]
		}
	}
	inputs := map[*node][]streams.Flow{}
	for _, n := range e.nodes {
		for _, port := range sortedKeys(n.ps.Outputs) {
			edges := n.ps.Outputs[port]
			ch := make(chan any, e.opts.EdgeBuffer)
			n.outs[port] = ch
			src := extension.NewChanSource(ch)
			if len(edges) == 1 {
				to := byPS[edges[0].To]
				inputs[to] = append(inputs[to], src.Via(flow.NewPassThrough()))
				continue
			}
			for i, branch := range flow.FanOut(src, len(edges)) {
				to := byPS[edges[i].To]
				inputs[to] = append(inputs[to], branch.Via(flow.NewMap(cloneRecord, 1)))
			}
		}
	}
	for _, n := range e.nodes {
		switch ins := inputs[n]; len(ins) {
		case 0:
		case 1:
			n.inlet = ins[0].Out()
		default:
			n.inlet = flow.Merge(ins...).Out()
		}
	}
}

func cloneRecord(r *Record) *Record { return r.Clone() }

// markIntake marks expensive stages and their ancestors.
func (e *engine) markIntake() {
	byPS := map[*PlanStage]*node{}
	for _, n := range e.nodes {
		byPS[n.ps] = n
	}
	var mark func(n *node)
	mark = func(n *node) {
		if n.intake {
			return
		}
		n.intake = true
		for _, in := range n.ps.Inputs {
			mark(byPS[in.From])
		}
	}
	for _, n := range e.nodes {
		if n.ps.Spec.Expensive {
			mark(n)
		}
	}
}

// runNode runs one stage until its input is exhausted, then commits it and
// closes its outputs. It always drains its inlet, so no upstream goroutine is
// left blocked whatever happens.
func (e *engine) runNode(n *node) {
	defer func() {
		for _, ch := range n.outs {
			close(ch)
		}
	}()
	fail := func(err error) {
		if err == nil || (e.hardCtx.Err() != nil && errors.Is(err, context.Canceled)) {
			return
		}
		n.failedSelf.Store(true)
		e.hardCancel(&StageError{n.ps.ID(), n.ps.Spec.Kind, err})
	}
	if src, ok := n.stage.(Source); ok {
		err := src.Read(e.intakeCtx, &emitter{e: e, n: n, ctx: e.intakeCtx})
		if e.intakeCtx.Err() != nil && errors.Is(err, context.Canceled) {
			err = nil
		}
		fail(err)
		return
	}
	proc := n.stage.(Processor)
	workers := 1
	if par, ok := n.stage.(Parallel); ok && par.Workers() > 1 {
		workers = par.Workers()
	}
	sink := len(n.outs) == 0 && len(n.ps.Spec.Outputs) == 0
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for v := range n.inlet {
				rec := v.(*Record)
				if e.hardCtx.Err() != nil || n.failedSelf.Load() || (n.intake && e.intakeCtx.Err() != nil) {
					n.abandoned.Add(1)
					continue
				}
				n.in.Add(1)
				em := &emitter{e: e, n: n, ctx: e.hardCtx}
				err := proc.Process(e.hardCtx, rec, em)
				switch {
				case err != nil:
					if !em.touched.Load() {
						n.abandoned.Add(1)
					}
					fail(err)
				case sink && !em.touched.Load():
					n.out.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	if fin, ok := n.stage.(Finisher); ok && !n.failedSelf.Load() {
		fail(fin.Finish(e.hardCtx, &emitter{e: e, n: n, ctx: e.hardCtx}))
	}
}

// watch turns Stop and ctx into the intake and hard cancellations and calls
// Progress periodically, until finished is closed.
func (e *engine) watch(ctx context.Context, finished <-chan struct{}, stopIntake func()) {
	tick := time.NewTicker(e.opts.ProgressEvery)
	defer tick.Stop()
	stop := e.opts.Stop
	var drainTimer <-chan time.Time
	for {
		select {
		case <-finished:
			return
		case <-ctx.Done():
			e.hardCancel(ErrStopped)
			ctx = context.Background()
		case <-stop:
			stop = nil
			e.drained.Store(true)
			fmt.Fprintf(e.opts.Log, "stop requested: intake stopped, draining in-flight records (up to %s)\n", e.opts.DrainTimeout)
			stopIntake()
			t := time.NewTimer(e.opts.DrainTimeout)
			defer t.Stop()
			drainTimer = t.C
		case <-drainTimer:
			e.hardCancel(fmt.Errorf("drain did not finish within %s: %w", e.opts.DrainTimeout, ErrStopped))
		case <-tick.C:
			if e.opts.Progress != nil && e.running.Load() {
				e.opts.Progress(e.summary())
			}
		}
	}
}

func (e *engine) closeStages() {
	for i := len(e.nodes) - 1; i >= 0; i-- {
		n := e.nodes[i]
		if c, ok := n.stage.(Closer); ok && n.opened {
			if err := c.Close(); err != nil {
				fmt.Fprintf(e.opts.Log, "stage %q: close: %v\n", n.ps.ID(), err)
			}
		}
	}
}

func (e *engine) summary() *Summary {
	s := &Summary{Elapsed: time.Since(e.start), Drained: e.drained.Load()}
	for _, n := range e.nodes {
		ss := StageSummary{
			ID: n.ps.ID(), Kind: n.ps.Spec.Kind,
			In: n.in.Load(), Out: n.out.Load(), Rejected: n.rejected.Load(), Failed: n.failed.Load(),
			Abandoned: n.abandoned.Load(),
		}
		n.reasonsMu.Lock()
		if len(n.reasons) > 0 {
			ss.Reasons = make(map[string]int64, len(n.reasons))
			for k, v := range n.reasons {
				ss.Reasons[k] = v
			}
		}
		n.reasonsMu.Unlock()
		for _, ch := range n.outs {
			ss.Queued += len(ch)
		}
		if r, ok := n.stage.(Reporter); ok && n.opened {
			ss.Stats = r.Report()
		}
		s.Stages = append(s.Stages, ss)
	}
	return s
}

// emitter is the Emitter a stage gets for one record (or for Read/Finish).
type emitter struct {
	e       *engine
	n       *node
	ctx     context.Context
	touched atomic.Bool // a record was emitted, rejected or failed through it
}

func (em *emitter) Emit(port string, rec *Record) error {
	em.touched.Store(true)
	if port == "" {
		port = em.n.firstOut
	}
	if port == RejectedPort {
		return em.Reject(rec, "rejected", "")
	}
	ch, ok := em.n.outs[port]
	if !ok {
		return fmt.Errorf("emit to port %q: the kind declares ports %v", port, em.n.ps.Spec.Outputs)
	}
	if err := em.send(ch, rec); err != nil {
		return err
	}
	em.n.out.Add(1)
	return nil
}

func (em *emitter) send(ch chan any, rec *Record) error {
	select {
	case ch <- rec:
		return nil
	default:
	}
	select {
	case ch <- rec:
		return nil
	case <-em.ctx.Done():
		return em.ctx.Err()
	}
}

func (em *emitter) Reject(rec *Record, reason, detail string) error {
	em.touched.Store(true)
	rec.Reject = &Rejection{Stage: em.n.ps.ID(), Reason: reason, Detail: detail}
	if ch, ok := em.n.outs[RejectedPort]; ok {
		if err := em.send(ch, rec); err != nil {
			return err
		}
	} else if err := em.e.dead.write("rejected", em.n.ps.ID(), rec); err != nil {
		return err
	}
	em.n.rejected.Add(1)
	em.n.reasonsMu.Lock()
	em.n.reasons[reason]++
	em.n.reasonsMu.Unlock()
	return nil
}

func (em *emitter) Fail(rec *Record, err error, attempts int) error {
	em.touched.Store(true)
	rec.Failure = &Failure{Stage: em.n.ps.ID(), Error: err.Error(), Attempts: attempts}
	if werr := em.e.dead.write("failed", em.n.ps.ID(), rec); werr != nil {
		return werr
	}
	em.n.failed.Add(1)
	return nil
}

func (em *emitter) Took(n int) { em.n.in.Add(int64(n)) }
