package engine

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pipe-dev/pipe/pipeline/rundir/layout"
	"github.com/pipe-dev/pipe/pipeline/tally"
	"github.com/pipe-dev/pipe/pipeline/view"

	"github.com/pipe-dev/pipe/pipeline"
	"github.com/pipe-dev/pipe/pipeline/commitlog"
	"github.com/pipe-dev/pipe/pipeline/figure"
	"github.com/pipe-dev/pipe/pipeline/internal/ticket"
	"github.com/pipe-dev/pipe/pipeline/record"
	"golang.org/x/sync/errgroup"
)

// Options control one run of a plan.
type Options struct {
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
	// Notice receives what a user must see at once (Env.Notice); nil means Log.
	Notice io.Writer
	// Warn receives the stages' warnings (Env.Warn) with the stage's id;
	// nil: they go to Notice.
	Warn func(stage, kind, text string)
	// Resources are shared by the stages; nil means a fresh set, closed at the end.
	Resources *pipeline.Resources
	// CommitEvery is how often sinks commit what they accepted (a Batcher:
	// what is due, see Batcher) and the run directory records the ids that
	// are finished. Zero means 1 minute. A stop request commits everything
	// at once.
	CommitEvery time.Duration
	// JournalEvery is how often the journal of each expensive stage is
	// fsynced: a completion is durable within this long of arriving. Zero
	// means 1 second.
	JournalEvery time.Duration
	// JournalSegmentBytes is the size at which a journal segment is sealed
	// (then deleted once its ids are all finished). Zero means 64 MiB.
	JournalSegmentBytes int64
	// NoJournal turns the journal of expensive stages off (for measuring its
	// cost): a crash then loses completions not yet committed by a sink.
	NoJournal bool
	// Progress, if set, is called every ProgressEvery (default 5s) with a
	// snapshot, from a goroutine of Run's; it must not block for long.
	Progress      func(*Summary)
	ProgressEvery time.Duration
	// Sample asks the sources for a spread sample of their input
	// (pipeline.Env.Sample; pipe plan).
	Sample pipeline.Sample
	// Limit, if set, is called with each ProgressEvery snapshot; an error
	// ends the run as max_rejected does: intake stops, everything
	// processed is committed, what is in flight finishes, and Run returns
	// the error ([pipeline] budget).
	Limit func(*Summary) error
	// HashCheck makes writers check the SHA-256 of what they committed
	// before they build on it (Env.HashCheck): asked for, or after a run
	// that did not end cleanly. Sizes are always checked.
	HashCheck bool
	// ReadWhole makes writers read every committed line of their outputs
	// before they build on them (Env.ReadWhole): asked for, or after a
	// start whose outputs failed verification.
	ReadWhole bool
}

// Summary is the state of a run: per-stage accounting and figures.
type Summary struct {
	Stages  []StageSummary
	Elapsed time.Duration
	// Drained is true when the run was stopped by Stop and drained.
	Drained bool
	// DeadLetters are the files in the run directory that received
	// rejected or failed records in this run.
	DeadLetters []string
	// Finished is the number of ids the run directory counts as finished
	// (committed everywhere they went); FinishedAtStart of them were
	// finished before this run.
	Finished, FinishedAtStart int
	// LastCommit is when everything processed was last committed.
	LastCommit time.Time
	// Unfinished counts records the sources read in this run that did not
	// finish: abandoned by a stop or a failure. The next run does them.
	Unfinished int64
}

// StageCounts and StageSummary are declared in package tally, which the
// run directory's readers import without the engine.
type (
	StageCounts  = tally.StageCounts
	StageSummary = tally.StageSummary
)

// Started reports whether any record moved: false when the run failed
// before doing any work (e.g. no server was ready).
func (s *Summary) Started() bool {
	for _, st := range s.Stages {
		if st.In+st.Out+st.Rejected+st.Failed+st.Skipped > 0 {
			return true
		}
	}
	return false
}

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
	ps       *pipeline.PlanStage
	stage    any // the Source or Processor, for its optional interfaces
	opened   bool
	outs     map[string]*port // connected output ports
	firstOut string
	inlet    <-chan any

	in, out, rejected, failed, skipped atomic.Int64
	abandoned, replayed                atomic.Int64
	// redone counts records whose journal entry was damaged (set aside at
	// Open, or unreadable when looked up): done again.
	redone atomic.Int64
	// landed, for a writer of verdicts, are the ids whose journal entries
	// were lost and that another such writer already holds (markLanded).
	landed map[uint64]bool
	// firstFailure is the error of the stage's first failed record;
	// saidFailures the distinct errors shown (under reasonsMu).
	firstFailure   atomic.Pointer[string]
	saidFailures   map[string]bool
	reasonsMu      sync.Mutex
	reasons, skips map[string]int64
	failedSelf     atomic.Bool
	// finishedBy, for a source, is the only stage reading its first port
	// when that stage drops finished ids (Spec.DropsFinished).
	finishedBy *node
	// journal keeps what an expensive stage emitted (nil otherwise).
	journal *commitlog.Journal
	// committer is set for sinks that commit in batches; commitMu keeps
	// Process and Commit apart, and pending holds the tickets of records
	// accepted since the last commit.
	committer pipeline.Committer
	commitMu  sync.Mutex
	pending   []*ticket.Ticket
	// batcher is the committer when it sizes its own batches; released
	// counts the accepted records whose tickets were released (its pending
	// are the rest, in the order accepted).
	batcher  pipeline.Batcher
	released int64
	// done is set, under commitMu, once the writer's last commit ran and its
	// outputs are closed: no later commit round may send on them.
	done bool
	// intake is true for expensive stages and every stage upstream of one:
	// after Stop they drop records not yet started (see Spec.Expensive).
	intake bool
	// afterExpensive is true for stages downstream of an expensive stage.
	afterExpensive bool
	// notStarted counts the abandoned records that never reached an
	// expensive stage's work.
	notStarted atomic.Int64
	// recent holds the stage's last outcomes for max_rejected (nil when off).
	recent *rejectWindow
}

// abandon counts a record dropped by a stop or a failure; started says the
// stage was working on it (an expensive stage's request in flight).
func (n *node) abandon(started bool) {
	n.abandoned.Add(1)
	if !n.afterExpensive && !(started && n.ps.Spec.Expensive) {
		n.notStarted.Add(1)
	}
}

type engine struct {
	plan      *pipeline.Plan
	opts      Options
	nodes     []*node
	dead      *deadLetters
	ledger    *ledger
	commitMu  sync.Mutex // one commit round at a time
	commitNow chan struct{}
	// sealNext makes the next commit round a full one (Commit, not a
	// Batcher's CommitDue): a batch reached MaxBatchRecords.
	sealNext atomic.Bool
	// tooMany is closed (once) when failures pass max_failed or a stage
	// calls Env.Halt: the run then drains like a stop request and ends with
	// tooManyErr (ErrTooManyFailed, or the stage's error).
	tooMany     chan struct{}
	tooManyOnce sync.Once
	tooManyErr  atomic.Pointer[error]
	lastCommit  atomic.Int64 // unix nanoseconds
	hardCtx     context.Context
	hardCancel  context.CancelCauseFunc
	intakeCtx   context.Context
	stopIntake  context.CancelFunc // cancels intakeCtx
	// spent is signalled when an expensive stage ends a record, so that
	// the limit is checked then and not only at its next tick.
	spent   chan struct{}
	start   time.Time
	drained atomic.Bool
	running atomic.Bool // nodes are wired and started; progress may read them
}

// Run executes the plan until every source is exhausted and every record has
// reached a sink, the first stage fails, Stop drains it, or ctx stops it. It
// returns the summary in every case. No goroutine it started outlives it.
//
// It goes open → wire → run → finish: build every stage and open it (a
// failure there stops the run before any record moves), connect the stages
// (fabric.go), run each on goroutines of its own until its input ends,
// then commit what was processed and judge the run.
func Run(ctx context.Context, p *pipeline.Plan, opts Options) (*Summary, error) {
	opts.setDefaults()
	if opts.Resources == nil {
		opts.Resources = pipeline.NewResources()
		defer opts.Resources.Close()
	}
	e := &engine{plan: p, opts: opts, start: time.Now(), commitNow: make(chan struct{}, 1), tooMany: make(chan struct{}), spent: make(chan struct{}, 1)}
	if err := os.MkdirAll(p.File.RunDir, 0o755); err != nil {
		return e.summary(), fmt.Errorf("run directory: %w", err)
	}
	var err error
	var warning string
	if e.ledger, warning, err = openLedger(p.File.RunDir); err != nil {
		return e.summary(), err
	}
	if warning != "" {
		fmt.Fprintf(e.opts.Notice, "pipe: warning: %s\n", warning)
	}
	defer e.ledger.close()
	e.ledger.full = e.requestCommit
	e.dead = newDeadLetters(p.File.RunDir)
	e.dead.warn = func(msg string) { fmt.Fprintf(e.opts.Notice, "pipe: warning: %s\n", msg) }
	e.hardCtx, e.hardCancel = context.WithCancelCause(context.WithoutCancel(ctx))
	defer e.hardCancel(nil)
	e.intakeCtx, e.stopIntake = context.WithCancel(e.hardCtx)
	defer e.stopIntake()

	defer e.closeJournals()
	if err := e.build(); err != nil {
		return e.summary(), err
	}
	defer e.closeStages()

	// Stop and ctx are watched from here on, so a Ctrl-C while a stage opens
	// (e.g. generate waiting for servers to warm up) is heard.
	finished := make(chan struct{})
	var watch sync.WaitGroup
	watch.Go(func() { e.watch(ctx, finished) })
	defer watch.Wait()
	defer close(finished)

	if err := e.open(); err != nil {
		return e.summary(), err
	}
	e.markLanded()
	e.wire()
	e.markIntake()
	e.running.Store(true)
	e.run()
	return e.finish()
}

// setDefaults gives every zero option its documented default.
func (o *Options) setDefaults() {
	if o.DrainTimeout == 0 {
		o.DrainTimeout = 10 * time.Minute
	}
	if o.EdgeBuffer <= 0 {
		o.EdgeBuffer = 64
	}
	if o.Log == nil {
		o.Log = io.Discard
	}
	if o.Notice == nil {
		o.Notice = o.Log
	}
	if o.ProgressEvery <= 0 {
		o.ProgressEvery = 5 * time.Second
	}
	if o.CommitEvery <= 0 {
		o.CommitEvery = time.Minute
	}
	if o.JournalEvery <= 0 {
		o.JournalEvery = time.Second
	}
}

// build constructs every stage and opens the journals of expensive ones.
func (e *engine) build() error {
	for _, ps := range e.plan.Stages {
		st, err := ps.Spec.New.Stage(ps.Config)
		if err != nil {
			return &StageError{ps.ID(), ps.Spec.Kind, err}
		}
		n := &node{ps: ps, stage: st, reasons: map[string]int64{}, skips: map[string]int64{}}
		n.committer, _ = st.(pipeline.Committer)
		// Without a journal nothing keeps a batch's records between its
		// commits: such a writer commits at every round.
		if !e.opts.NoJournal {
			n.batcher, _ = st.(pipeline.Batcher)
		}
		if l := e.plan.File.MaxRejected; l.Share > 0 {
			n.recent = newRejectWindow(l.Window)
		}
		e.nodes = append(e.nodes, n)
		if ps.Spec.Expensive && !e.opts.NoJournal {
			if n.journal, err = e.openJournal(ps); err != nil {
				return &StageError{ps.ID(), ps.Spec.Kind, err}
			}
			for _, w := range n.journal.Warnings() {
				fmt.Fprintf(e.opts.Notice, "pipe: warning: stage %q: journal: %s\n", ps.ID(), w)
			}
			if k, cut := n.journal.Recovered(), n.journal.Truncated(); k > 0 || cut > 0 {
				fmt.Fprintf(e.opts.Log, "stage %q: journal: kept %d whole entries written after the last commit, cut %d bytes of torn tail\n", ps.ID(), k, cut)
			}
		}
	}
	return nil
}

func (e *engine) closeJournals() {
	for i := len(e.nodes) - 1; i >= 0; i-- {
		if j := e.nodes[i].journal; j != nil {
			j.Close()
		}
	}
}

// open calls every stage's Open, in plan order. Opening is intake: a stop
// request ends it.
func (e *engine) open() error {
	for _, n := range e.nodes {
		if o, ok := n.stage.(pipeline.Opener); ok {
			env := &pipeline.Env{StageID: n.ps.ID(), RunDir: e.plan.File.RunDir, Log: e.opts.Log, Notice: e.opts.Notice, Done: e.ledger, Resources: e.opts.Resources,
				DuplicatesHandled: pipeline.DuplicatesHandled(n.ps), Halt: func(err error) { e.halt(&StageError{n.ps.ID(), n.ps.Spec.Kind, err}) },
				HashCheck: e.opts.HashCheck, ReadWhole: e.opts.ReadWhole, Stopping: e.intakeCtx.Done(), Unfinish: e.ledger.unfinish, Sample: e.opts.Sample}
			if e.opts.Warn != nil {
				id := n.ps.ID()
				env.Warn = func(kind, text string) { e.opts.Warn(id, kind, text) }
			}
			if err := e.guard(n, "opening", func() error { return o.Open(e.intakeCtx, env) }); err != nil {
				if herr := e.tooManyErr.Load(); herr != nil {
					return *herr
				}
				if e.intakeCtx.Err() != nil {
					return fmt.Errorf("stopped while stage %q was opening: %w", n.ps.ID(), ErrStopped)
				}
				return &StageError{n.ps.ID(), n.ps.Spec.Kind, err}
			}
		}
		n.opened = true
	}
	return nil
}

// run runs every stage, each until its input ends, with the commit rounds
// beside them. A stage's failure cancels the run's hard context with its
// StageError as the cause (fail), which is what finish reports.
func (e *engine) run() {
	committing := make(chan struct{})
	var commits sync.WaitGroup
	commits.Go(func() { e.commitLoop(committing) })
	var g errgroup.Group
	for _, n := range e.nodes {
		g.Go(func() error { return e.runNode(n) })
	}
	_ = g.Wait() // the first failure is context.Cause(e.hardCtx) too
	close(committing)
	commits.Wait()
}

// finish commits what was processed, whatever happened, and judges the run:
// the first failure, too many failed or rejected records, the accounting,
// outputs left empty.
func (e *engine) finish() (*Summary, error) {
	e.commitAll()
	e.sweepJournals()
	paths, derr := e.dead.Close()
	sum := e.summary()
	sum.DeadLetters = paths
	if err := e.haltedBy(); err != nil {
		return sum, err
	}
	// A stopped run is judged as it goes (checkFailed(false)), not at its
	// end: the few records a short drained start took in are no base for
	// a share, and its exit must say "interrupted", which a scheduler retries.
	if !sum.Drained {
		if err := e.checkFailed(true); err != nil {
			return sum, err
		}
	}
	if derr != nil {
		return sum, fmt.Errorf("closing rejected/failed records: %w", derr)
	}
	if err := checkAccounting(sum); err != nil {
		return sum, err
	}
	if !sum.Drained {
		if err := e.checkOutputRows(sum); err != nil {
			return sum, err
		}
		if err := e.recordsFailed(); err != nil {
			return sum, err
		}
	}
	return sum, nil
}

// sweepJournals removes the journal segments whose ids are all finished;
// a failure is logged: it does not fail the run.
func (e *engine) sweepJournals() {
	for _, n := range e.nodes {
		if n.journal != nil {
			if err := n.journal.Done(); err != nil {
				fmt.Fprintf(e.opts.Log, "stage %q: journal: removing finished segments: %v\n", n.ps.ID(), err)
			}
		}
	}
}

// haltedBy is why the run stopped before its end: the first failure (a
// halt's error with it when the grace ran out on one), or a halt (a
// budget, too many failures); nil when nothing stopped it.
func (e *engine) haltedBy() error {
	if err := context.Cause(e.hardCtx); err != nil {
		if halt := e.tooManyErr.Load(); halt != nil && errors.Is(err, ErrStopped) {
			// The grace ran out on a halt (a budget, too many failures):
			// the halt is why the run stopped; the requests cut off are
			// done by the next start.
			return fmt.Errorf("%w; %w", *halt, err)
		}
		return err
	}
	if err := e.tooManyErr.Load(); err != nil {
		return *err
	}
	return nil
}

// checkAccounting fails a run some record of which is unaccounted for:
// read and not finished although the run did, or in a stage's counts
// that do not add up. Both are bugs (of the engine, of a stage).
func checkAccounting(sum *Summary) error {
	if sum.Unfinished != 0 && !sum.Drained {
		return fmt.Errorf("%d records read did not finish although the run did (a bug in the engine's commit tracking)", sum.Unfinished)
	}
	for _, s := range sum.Stages {
		if !s.Balanced() {
			return fmt.Errorf("accounting mismatch in stage %q (%s): in %d != out %d + rejected %d + failed %d + skipped %d + abandoned %d (a bug in that stage)",
				s.ID, s.Kind, s.In, s.Out, s.Rejected, s.Failed, s.Skipped, s.Abandoned)
		}
	}
	return nil
}

// recordsFailed is ErrRecordsFailed, naming each stage's count and first
// error, when records failed in this start: the run is not done.
func (e *engine) recordsFailed() error {
	var parts []string
	for _, n := range e.nodes {
		if f := n.failed.Load(); f > 0 {
			first := ""
			if p := n.firstFailure.Load(); p != nil {
				first = " (first: " + *p + ")"
			}
			parts = append(parts, fmt.Sprintf("%d in stage %q%s", f, n.ps.ID(), first))
		}
	}
	if len(parts) == 0 {
		return nil
	}
	return fmt.Errorf("%w: %s; they are in %s and not finished: the same command does them again", ErrRecordsFailed,
		strings.Join(parts, ", "), layout.DeadLetterDir(e.plan.File.RunDir, layout.Failed))
}

// checkOutputRows fails a finished run one of whose outputs of accepted
// records (see acceptedPath) holds no row while records were rejected or
// failed: what it was asked to make, it did not. (An empty input, or one
// whose every record was done already, asked for nothing.)
func (e *engine) checkOutputRows(sum *Summary) error {
	var bad int64
	for _, s := range sum.Stages {
		bad += s.Failed + s.Rejected - s.Reasons[pipeline.ReasonDuplicate]
	}
	if bad == 0 {
		return nil
	}
	var empty []string
	for _, n := range e.nodes {
		rc, ok := n.stage.(pipeline.RowCounter)
		if !ok || !n.opened || !acceptedPath(n.ps) {
			continue
		}
		if rc.CommittedRows() == 0 {
			empty = append(empty, fmt.Sprintf("%q (%s)", n.ps.ID(), n.ps.Spec.Kind))
		}
	}
	if len(empty) == 0 {
		return nil
	}
	return fmt.Errorf("%w: output %s ended with 0 rows although the input had records: every record was rejected or failed on its way (see the summary's reasons; pipe inspect %s)",
		ErrNoTrainingRows, strings.Join(empty, ", "), pipeline.DisplayPath(e.plan.File.RunDir))
}

// acceptedPath reports whether records reach ps other than through a
// rejected port: it is an output of accepted records (training data), not
// only a collection of rejects.
func acceptedPath(ps *pipeline.PlanStage) bool {
	if ps.Spec.Source {
		return true
	}
	for _, in := range ps.Inputs {
		if in.Port != pipeline.RejectedPort && acceptedPath(in.From) {
			return true
		}
	}
	return false
}

// wire connects the stages (see fabric.go): a port per connected output
// port, with one edge per input it feeds, and each stage's inlet.
func (e *engine) wire() {
	byPS := map[*pipeline.PlanStage]*node{}
	for _, n := range e.nodes {
		byPS[n.ps] = n
		n.outs = map[string]*port{}
		if len(n.ps.Spec.Outputs) > 0 {
			n.firstOut = n.ps.Spec.Outputs[0]
		}
	}
	inputs := map[*node][]chan any{}
	for _, n := range e.nodes {
		for _, name := range slices.Sorted(maps.Keys(n.ps.Outputs)) {
			size := e.opts.EdgeBuffer
			if b, ok := n.ps.Spec.PortBuffers[name]; ok {
				size = b
			}
			p := &port{}
			for _, ed := range n.ps.Outputs[name] {
				to := byPS[ed.To]
				ch := make(chan any, edgeCap(size, len(to.ps.Inputs)))
				p.edges = append(p.edges, ch)
				inputs[to] = append(inputs[to], ch)
			}
			n.outs[name] = p
		}
	}
	for _, n := range e.nodes {
		if n.ps.Spec.Source && pipeline.DuplicatesHandled(n.ps) {
			n.finishedBy = byPS[n.ps.Outputs[n.firstOut][0].To]
		}
		n.inlet = inlet(inputs[n])
	}
}

// markIntake marks expensive stages and their ancestors.
func (e *engine) markIntake() {
	byPS := map[*pipeline.PlanStage]*node{}
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
	var after func(n *node)
	after = func(n *node) {
		for _, edges := range n.ps.Outputs {
			for _, ed := range edges {
				if to := byPS[ed.To]; !to.afterExpensive {
					to.afterExpensive = true
					after(to)
				}
			}
		}
	}
	for _, n := range e.nodes {
		if n.ps.Spec.Expensive {
			after(n)
		}
	}
}

// runNode runs one stage until its input is exhausted, then commits it and
// closes its outputs. It always drains its inlet, so no upstream goroutine is
// left blocked whatever happens. It returns the stage's failure, if any.
func (e *engine) runNode(n *node) error {
	defer func() {
		n.commitMu.Lock()
		n.done = true
		for _, p := range n.outs {
			p.close()
		}
		n.commitMu.Unlock()
	}()
	if src, ok := n.stage.(pipeline.Source); ok {
		em := &emitter{e: e, n: n, ctx: e.intakeCtx}
		err := e.guard(n, "reading", func() error { return src.Read(e.intakeCtx, em) })
		if e.intakeCtx.Err() != nil && errors.Is(err, context.Canceled) {
			err = nil
		}
		return e.fail(n, err)
	}
	first := e.process(n, n.stage.(pipeline.Processor))
	if fin, ok := n.stage.(pipeline.Finisher); ok && !n.failedSelf.Load() {
		em := &emitter{e: e, n: n, ctx: e.hardCtx}
		first = cmp.Or(first, e.fail(n, e.guard(n, "finishing", func() error { return fin.Finish(e.hardCtx, em) })))
	}
	// A writer's last commit happens while what it sends on can still be
	// received downstream.
	if n.committer != nil && !n.failedSelf.Load() {
		e.commitMu.Lock()
		if e.commitJournals() {
			e.commitNode(n, true)
		}
		e.commitMu.Unlock()
	}
	return first
}

// fail fails the stage n with err, unless err is nil or the run's being
// stopped at once; it returns the StageError the run now ends with.
func (e *engine) fail(n *node, err error) error {
	if err == nil || (e.hardCtx.Err() != nil && errors.Is(err, context.Canceled)) {
		return nil
	}
	n.failedSelf.Store(true)
	serr := &StageError{n.ps.ID(), n.ps.Spec.Kind, err}
	e.hardCancel(serr)
	return serr
}

// process feeds a processor its inlet on its workers (Parallel), until the
// inlet closes; it returns the first failure.
func (e *engine) process(n *node, proc pipeline.Processor) error {
	workers := 1
	if par, ok := n.stage.(pipeline.Parallel); ok && par.Workers() > 1 {
		workers = par.Workers()
	}
	// A writer's records end in it, whatever ports it has for side outputs.
	sink := n.committer != nil || (len(n.outs) == 0 && len(n.ps.Spec.Outputs) == 0)
	var g errgroup.Group
	for range workers {
		g.Go(func() error {
			var first error
			for v := range n.inlet {
				first = cmp.Or(first, e.handle(n, proc, v.(*record.Record), sink))
			}
			return first
		})
	}
	return g.Wait()
}

// handle takes one record through the stage: abandoned when the run is
// stopping, replayed from the journal when the stage did it before, else
// processed; a sink's accepted record is then pending its commit.
func (e *engine) handle(n *node, proc pipeline.Processor, rec *record.Record, sink bool) error {
	n.in.Add(1)
	if e.hardCtx.Err() != nil || n.failedSelf.Load() || (n.intake && e.intakeCtx.Err() != nil) {
		n.abandon(false)
		return nil
	}
	em := &emitter{e: e, n: n, ctx: e.hardCtx, in: rec}
	if n.journal != nil {
		if done, err := e.fromJournal(n, rec, em); done {
			return err
		}
	}
	if sink && n.landed != nil && n.landed[commitlog.Hash(rec.ID)] {
		// Its verdict landed in another output before its journal
		// entry was lost: a second one here would be the id twice.
		return em.skip(rec, "landed_elsewhere", false)
	}
	if sink && n.committer != nil {
		return e.handleWriter(n, proc, rec, em)
	}
	err := e.handleProcessor(n, proc, rec, em, sink)
	if n.ps.Spec.Expensive {
		select {
		case e.spent <- struct{}{}:
		default: // a check is already asked for
		}
	}
	return err
}

// fromJournal replays rec from the stage's journal when the stage did it
// before. done says that handle has nothing left to do: rec was replayed,
// or the replay failed (err, the stage's failure).
func (e *engine) fromJournal(n *node, rec *record.Record, em *emitter) (done bool, err error) {
	replayed, err := e.replay(n, rec, em)
	if err != nil {
		if em.unsent() {
			n.abandon(false)
		}
		return true, e.fail(n, err)
	}
	return replayed, nil
}

// handleProcessor is handle's processing for a stage other than a writer
// (a sink with a Committer): a sink's record that it neither sent on nor
// judged is done (its ticket released) once Process returns.
func (e *engine) handleProcessor(n *node, proc pipeline.Processor, rec *record.Record, em *emitter, sink bool) error {
	err := e.call(n, proc, rec, em)
	switch {
	case err != nil && errors.Is(err, pipeline.ErrNotStarted) && !em.touched.Load():
		n.abandon(false) // stopped before its work began: the next run does it
		return nil
	case err != nil:
		if em.unsent() {
			n.abandon(true)
		}
		return e.fail(n, err)
	case sink && !em.touched.Load():
		n.out.Add(1)
		e.decided(n, "")
		e.ledger.release(rec.Ticket)
	}
	return nil
}

// handleWriter is handle's processing for a writer: Process and Commit
// never run at once, and what it accepted is pending until a commit made
// it durable (its ticket then released).
func (e *engine) handleWriter(n *node, proc pipeline.Processor, rec *record.Record, em *emitter) error {
	n.commitMu.Lock()
	err := e.call(n, proc, rec, em)
	switch {
	case err != nil:
		if !em.touched.Load() {
			n.abandon(true)
		}
	case !em.touched.Load():
		n.out.Add(1)
		e.decided(n, "")
		n.pending = append(n.pending, rec.Ticket)
		switch {
		case n.batcher != nil && len(n.pending) == pipeline.MaxBatchRecords:
			e.sealNext.Store(true)
			e.requestCommit()
		case n.batcher == nil && len(n.pending) == maxPending:
			e.requestCommit() // bounds the memory tickets take
		}
	}
	var done []*ticket.Ticket
	if n.batcher != nil && err == nil {
		done = n.takeDurable()
	}
	n.commitMu.Unlock()
	e.releaseAll(done)
	return e.fail(n, err)
}

// guard runs one call into a stage and turns a panic into an error that
// fails the stage (the stack goes to the run log): the run then commits
// what it has and ends with the error, like any other failure.
func (e *engine) guard(n *node, what string, f func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			fmt.Fprintf(e.opts.Log, "stage %q: panic while %s: %v\n%s", n.ps.ID(), what, r, debug.Stack())
			err = fmt.Errorf("panic while %s: %v (stack in the run log)", what, r)
		}
	}()
	return f()
}

// call calls the stage for one record. A panic fails that record (the
// stack goes to the run log) instead of ending the run.
func (e *engine) call(n *node, proc pipeline.Processor, rec *record.Record, em *emitter) (err error) {
	defer func() {
		r := recover()
		if r == nil {
			return
		}
		fmt.Fprintf(e.opts.Log, "stage %q: panic on record %q: %v\n%s", n.ps.ID(), rec.ID, r, debug.Stack())
		if em.touched.Load() {
			err = fmt.Errorf("panic after record %q was sent on: %v", rec.ID, r)
			return
		}
		err = em.Fail(rec, fmt.Errorf("panic in stage %q: %v (stack in the run log)", n.ps.ID(), r), 1)
	}()
	return proc.Process(e.hardCtx, rec, em)
}

// openJournal opens the journal of an expensive stage: segments in
// RUN_DIR/journal/STAGE/, an earlier pipe's RUN_DIR/journal/STAGE.jsonl
// read as the oldest, the listing in RUN_DIR/journal-STAGE.json, outside
// the directory so that removing it is noticed. Segments
// whose ids are all finished are deleted, unless keep_journal, or unless a
// record could reach the stage without passing a stage that drops finished
// ids (then the journal is what spares a finished id its regeneration).
func (e *engine) openJournal(ps *pipeline.PlanStage) (*commitlog.Journal, error) {
	runDir := e.plan.File.RunDir
	j, err := commitlog.OpenJournal(commitlog.JournalOptions{
		Dir:          layout.Journal(runDir, ps.ID()),
		Legacy:       layout.LegacyJournal(runDir, ps.ID()),
		Listing:      layout.JournalListing(runDir, ps.ID()),
		IDOf:         commitlog.JournalEntryID,
		Done:         e.ledger.set.Has,
		SegmentBytes: e.opts.JournalSegmentBytes,
		Keep:         e.plan.File.KeepJournal || !finishedDropped(ps),
	})
	if err != nil {
		return nil, fmt.Errorf("journal: %w", err)
	}
	return j, nil
}

// finishedDropped reports whether every record reaching ps passed a stage
// that drops finished ids (Spec.DropsFinished) on its way.
func finishedDropped(ps *pipeline.PlanStage) bool {
	if ps.Spec.DropsFinished {
		return true
	}
	if len(ps.Inputs) == 0 {
		return false
	}
	for _, in := range ps.Inputs {
		if !finishedDropped(in.From) {
			return false
		}
	}
	return true
}

// replay sends rec on as the journal recorded it, if the stage already did
// the work for its id in an earlier run (which stopped before every output
// committed it).
func (e *engine) replay(n *node, rec *record.Record, em *emitter) (bool, error) {
	line, ok, err := n.journal.Lookup(rec.ID)
	if err != nil {
		// A segment that cannot be read loses its entries, not the run.
		e.journalDamaged(n, rec.ID, err)
		return false, nil
	}
	if !ok {
		if n.journal.Lost(rec.ID) {
			n.redone.Add(1)
		}
		return false, nil
	}
	je, err := commitlog.ParseJournalEntry(line)
	if err != nil {
		e.journalDamaged(n, rec.ID, err)
		return false, nil
	}
	em.replaying = true
	n.replayed.Add(1)
	out := je.Record
	if je.Port == pipeline.RejectedPort && out.Reject != nil {
		return true, em.Reject(out, out.Reject.Reason, out.Reject.Detail)
	}
	return true, em.Emit(je.Port, out)
}

// journalDamaged notes an entry found damaged when it was to be replayed
// (Open reads whole only the segments holding unfinished ids; a kept
// segment, or one damaged while the run goes, is found here): the record
// is done again. The first few are named on the terminal, every one in the
// run log.
func (e *engine) journalDamaged(n *node, id string, err error) {
	k := n.redone.Add(1)
	msg := fmt.Sprintf("journal %s: the entry of %q is damaged (%v): it is done again (generated again, at full cost)", n.journal.Path(), id, err)
	fmt.Fprintf(e.opts.Log, "stage %q: %s\n", n.ps.ID(), msg)
	if k <= 3 {
		fmt.Fprintf(e.opts.Notice, "pipe: warning: stage %q: %s\n", n.ps.ID(), msg)
	}
}

// maxPending is how many records a sink that commits at every round may
// hold uncommitted before a commit round is started early (a Batcher's own
// batches bound its pending records instead, see MaxBatchRecords). Each
// uncommitted record holds its ticket, its journal entry and its place in
// the logs' pending lists: in the 913,786-prompt rehearsal (3,400 records
// a second) they took about 10 MB of live heap at 1<<16 and 5 MB at 1<<14,
// twice that in RSS. 1<<14 is a commit round every few seconds at that
// rate, and none before the minute's round at a GPU fleet's tens a second.
const maxPending = 1 << 14

// requestCommit starts a commit round soon, without waiting for it.
func (e *engine) requestCommit() {
	select {
	case e.commitNow <- struct{}{}:
	default:
	}
}

// commitLoop fsyncs journals every JournalEvery (on a goroutine of its own,
// so a commit round held up by a slow downstream never delays it) and
// commits everything every CommitEvery or when asked (a stop request), until
// done is closed.
func (e *engine) commitLoop(done <-chan struct{}) {
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		jt := time.NewTicker(e.opts.JournalEvery)
		defer jt.Stop()
		for {
			select {
			case <-done:
				return
			case <-jt.C:
				e.commitJournals()
			}
		}
	}()
	defer wg.Wait()
	ct := time.NewTicker(e.opts.CommitEvery)
	defer ct.Stop()
	for {
		select {
		case <-done:
			return
		case <-ct.C:
			e.commitAll()
		case <-e.commitNow:
			e.commitAll()
		}
	}
}

// commitJournals makes every completion received so far durable. A journal
// that cannot be written fails the run: completions would be at risk.
func (e *engine) commitJournals() bool {
	ok := true
	for _, n := range e.nodes {
		if n.journal == nil {
			continue
		}
		if err := n.journal.Commit(); err != nil {
			n.failedSelf.Store(true)
			e.hardCancel(&StageError{n.ps.ID(), n.ps.Spec.Kind, fmt.Errorf("journal: %w", err)})
			ok = false
		}
	}
	return ok
}

// commitAll is one commit round. Journals first, so nothing is committed
// downstream whose completion is not durable; then the rejected/failed files
// and every sink; then the ids whose every copy is now committed go into the
// done log.
func (e *engine) commitAll() {
	e.commitMu.Lock()
	defer e.commitMu.Unlock()
	if !e.commitJournals() {
		return
	}
	tickets, err := e.dead.commit()
	if err != nil {
		e.hardCancel(fmt.Errorf("writing rejected/failed records: %w", err))
		return
	}
	for _, t := range tickets {
		e.ledger.release(t)
	}
	full := e.sealNext.Swap(false)
	for _, n := range e.nodes {
		e.commitNode(n, full)
	}
	finished, err := e.ledger.commit()
	if err != nil {
		e.hardCancel(fmt.Errorf("recording finished ids: %w", err))
		return
	}
	for _, n := range e.nodes {
		if n.journal == nil {
			continue
		}
		// Deleting finished segments bounds the journal; a failure to
		// delete loses nothing, so it is said, not fatal.
		if err := n.journal.Finished(finished); err != nil {
			fmt.Fprintf(e.opts.Log, "stage %q: journal: removing finished segments: %v\n", n.ps.ID(), err)
		}
	}
	e.lastCommit.Store(time.Now().UnixNano())
}

// commitNode commits one writer and releases the tickets of what that made
// durable: everything it had accepted, or for a Batcher at a routine round
// (full false) what its batches hold. The caller holds e.commitMu, after
// committing the journals.
func (e *engine) commitNode(n *node, full bool) {
	if n.committer == nil || !n.opened || n.failedSelf.Load() {
		return
	}
	n.commitMu.Lock()
	if n.done {
		n.commitMu.Unlock()
		return
	}
	em := &emitter{e: e, n: n, ctx: e.hardCtx, side: true}
	ctx := context.WithoutCancel(e.hardCtx)
	err := e.guard(n, "committing", func() error {
		if n.batcher != nil && !full {
			return n.batcher.CommitDue(ctx, em)
		}
		return n.committer.Commit(ctx, em)
	})
	var tickets []*ticket.Ticket
	if err == nil {
		if n.batcher != nil {
			tickets = n.takeDurable()
		} else {
			tickets, n.pending = n.pending, nil
		}
	}
	n.commitMu.Unlock()
	if err != nil {
		n.failedSelf.Store(true)
		e.hardCancel(&StageError{n.ps.ID(), n.ps.Spec.Kind, fmt.Errorf("commit: %w", err)})
		return
	}
	e.releaseAll(tickets)
}

// takeDurable takes the tickets of the records a Batcher made durable since
// the last call. The caller holds n.commitMu.
func (n *node) takeDurable() []*ticket.Ticket {
	k := int(n.batcher.Durable() - n.released)
	if k <= 0 {
		return nil
	}
	k = min(k, len(n.pending)) // a writer counting more than it accepted
	done := n.pending[:k:k]
	// A copy, so the released part's backing array goes with it.
	n.pending = append([]*ticket.Ticket(nil), n.pending[k:]...)
	n.released += int64(k)
	return done
}

func (e *engine) releaseAll(tickets []*ticket.Ticket) {
	for _, t := range tickets {
		e.ledger.release(t)
	}
}

// limitEvery is how often Options.Limit is checked.
const limitEvery = 100 * time.Millisecond

// watch turns Stop and ctx into the intake and hard cancellations and calls
// Progress periodically, until finished is closed.
func (e *engine) watch(ctx context.Context, finished <-chan struct{}) {
	tick := time.NewTicker(e.opts.ProgressEvery)
	defer tick.Stop()
	// The limit (a budget) is checked often, and as soon as an expensive
	// stage has ended a record: what is sent between its being reached
	// and its check is spent past it.
	var limitC <-chan time.Time
	var spent <-chan struct{}
	if e.opts.Limit != nil {
		lt := time.NewTicker(limitEvery)
		defer lt.Stop()
		limitC, spent = lt.C, e.spent
	}
	stop := e.opts.Stop
	tooMany := e.tooMany
	var drainTimer <-chan time.Time
	draining := false
	for {
		select {
		case <-finished:
			return
		case <-ctx.Done():
			e.hardCancel(ErrStopped)
			ctx = context.Background()
		case <-tooMany:
			tooMany = nil
			if draining {
				continue
			}
			draining, stop = true, nil
			t := e.startDrain(fmt.Sprint(*e.tooManyErr.Load()))
			defer t.Stop()
			drainTimer = t.C
		case <-stop:
			stop = nil
			if draining || e.tooManyErr.Load() != nil {
				continue // a halt came first: its drain says why
			}
			draining = true
			t := e.startDrain("stop requested")
			defer t.Stop()
			drainTimer = t.C
		case <-drainTimer:
			e.hardCancel(fmt.Errorf("drain did not finish within %s: %w", e.opts.DrainTimeout, ErrStopped))
		case <-tick.C:
			e.progress()
		case <-limitC:
			if e.limitReached() {
				limitC, spent = nil, nil
			}
		case <-spent:
			if e.limitReached() {
				limitC, spent = nil, nil
			}
		}
	}
}

// startDrain begins a drain, saying why: the intake stops, what was
// processed is committed, and the records in flight have DrainTimeout to
// finish, on the timer it returns.
func (e *engine) startDrain(why string) *time.Timer {
	e.drained.Store(true)
	fmt.Fprintf(e.opts.Log, "%s: committing, then draining in-flight records (up to %s)\n", why, e.opts.DrainTimeout)
	e.stopIntake()
	e.requestCommit()
	return time.NewTimer(e.opts.DrainTimeout)
}

// progress calls Options.Progress, if set, while the run is running.
func (e *engine) progress() {
	if e.opts.Progress != nil && e.running.Load() {
		e.opts.Progress(e.summary())
	}
}

// limitReached checks Options.Limit while the run is running and halts
// the run when it is reached, saying so (true).
func (e *engine) limitReached() bool {
	if !e.running.Load() {
		return false
	}
	err := e.opts.Limit(e.summary())
	if err == nil {
		return false
	}
	e.halt(err)
	return true
}

func (e *engine) closeStages() {
	for i := len(e.nodes) - 1; i >= 0; i-- {
		n := e.nodes[i]
		if c, ok := n.stage.(pipeline.Closer); ok && n.opened {
			if err := e.guard(n, "closing", c.Close); err != nil {
				fmt.Fprintf(e.opts.Log, "stage %q: close: %v\n", n.ps.ID(), err)
			}
		}
	}
}

func (e *engine) summary() *Summary {
	s := &Summary{Elapsed: time.Since(e.start), Drained: e.drained.Load()}
	if e.ledger != nil {
		s.Finished, s.FinishedAtStart = e.ledger.finished(), e.ledger.atStart
		s.Unfinished = e.ledger.unfinished()
	}
	if t := e.lastCommit.Load(); t > 0 {
		s.LastCommit = time.Unix(0, t)
	}
	for _, n := range e.nodes {
		ss := StageSummary{
			StageCounts: StageCounts{ID: n.ps.ID(), Kind: n.ps.Spec.Kind,
				In: n.in.Load(), Out: n.out.Load(), Rejected: n.rejected.Load(), Failed: n.failed.Load(),
				Skipped: n.skipped.Load(), Redone: n.redone.Load()},
			Abandoned: n.abandoned.Load(), NotStarted: n.notStarted.Load(), Replayed: n.replayed.Load(),
		}
		n.reasonsMu.Lock()
		ss.Reasons = copyCounts(n.reasons)
		ss.Skips = copyCounts(n.skips)
		n.reasonsMu.Unlock()
		for name, p := range n.outs {
			q := p.queued()
			ss.Queued += q
			if ss.QueuedByPort == nil {
				ss.QueuedByPort = map[string]int{}
			}
			ss.QueuedByPort[name] = q
		}
		if r, ok := n.stage.(pipeline.Reporter); ok && n.opened {
			e.guard(n, "reporting", func() error { ss.Figures = r.Report(); return nil })
		}
		if v, ok := n.stage.(view.FleetViewer); ok && n.opened {
			e.guard(n, "reporting", func() error { ss.Fleet = v.FleetView(); return nil })
		}
		if v, ok := n.stage.(view.InputViewer); ok && n.opened {
			e.guard(n, "reporting", func() error { ss.Input = v.InputView(); return nil })
		}
		if n.journal != nil {
			// What the outputs have not committed yet (finished segments go).
			ss.Figures = append(ss.Figures, figure.NewGauge("journal_bytes", float64(n.journal.Bytes())).In(figure.UnitBytes))
		}
		s.Stages = append(s.Stages, ss)
	}
	return s
}

func copyCounts(m map[string]int64) map[string]int64 {
	if len(m) == 0 {
		return nil
	}
	out := make(map[string]int64, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// emitter is the Emitter a stage gets for one record (or for Read/Finish).
type emitter struct {
	e   *engine
	n   *node
	ctx context.Context
	// in is the record being processed (nil for a source's Read or a
	// Finish): what the stage sends on inherits its ticket.
	in      *record.Record
	uses    atomic.Int32
	touched atomic.Bool // a record was emitted, rejected, failed or skipped through it
	// lost is set when a record sent on never got there (the run was
	// stopping): the input it came from is abandoned, not sent on.
	lost atomic.Bool
	// replaying is set when the record comes from the stage's journal, so
	// it is not journaled again.
	replaying bool
	// side is set for a writer's Commit: what it sends is a side output.
	side bool
}

// claim gives rec the ticket it travels with: the processed record's (one
// more place to commit for each further record sent on), or a new one for
// what a source reads.
func (em *emitter) claim(rec *record.Record) {
	switch {
	case em.in != nil:
		t := em.in.Ticket
		if em.uses.Add(1) > 1 && t != nil {
			t.N.Add(1)
		}
		rec.Ticket = t
	case rec.Ticket == nil:
		rec.Ticket = em.e.ledger.newTicket(rec.ID)
	}
}

// journal appends what an expensive stage sends on to its journal, before
// anything downstream can see it.
func (em *emitter) journal(port string, rec *record.Record) error {
	if em.n.journal == nil || em.replaying {
		return nil
	}
	// json.Marshal's bytes in a reused buffer: Append copies the line, so
	// the buffer is free after it.
	buf := journalBufs.Get().(*[]byte)
	defer journalBufs.Put(buf)
	line, err := commitlog.AppendJournalEntry((*buf)[:0], commitlog.JournalEntry{Port: port, Record: rec})
	if err != nil {
		return fmt.Errorf("journal: encoding record %q: %w", rec.ID, err)
	}
	if cap(line) <= 1<<20 {
		*buf = line // kept for the next line (a huge one is not)
	}
	return em.n.journal.Append(rec.ID, line)
}

var journalBufs = sync.Pool{New: func() any { return new([]byte) }}

func (em *emitter) Emit(port string, rec *record.Record) error {
	if em.otherShard(rec) {
		return nil
	}
	em.touched.Store(true)
	if port == "" {
		port = em.n.firstOut
	}
	if port == pipeline.RejectedPort {
		return em.Reject(rec, "rejected", "")
	}
	p, ok := em.n.outs[port]
	if !ok {
		if slices.Contains(em.n.ps.Spec.OptionalOutputs, port) {
			return nil // not connected: nobody wants it
		}
		return fmt.Errorf("emit to port %q: the kind declares ports %v", port, em.n.ps.Spec.Outputs)
	}
	fresh := em.in == nil && rec.Ticket == nil
	em.claim(rec)
	if em.side && rec.Ticket != nil {
		rec.Ticket.Void.Store(true) // a side output finishes no prompt id
	}
	if err := em.journal(port, rec); err != nil {
		return err
	}
	em.fanOut(p, rec)
	if err := em.sendPort(p, rec); err != nil {
		if fresh {
			em.e.ledger.unmake(rec)
		}
		if em.in != nil && !em.side {
			em.lost.Store(true)
		}
		return err
	}
	if !em.side {
		em.n.out.Add(1)
		em.e.decided(em.n, "")
	}
	return nil
}

// unsent reports whether the record being processed went nowhere: nothing
// sent on, or what was sent never got there.
func (em *emitter) unsent() bool { return !em.touched.Load() || em.lost.Load() }

// fanOut counts the copies a port's fan-out will make: each is one more
// place the record must be committed.
func (em *emitter) fanOut(p *port, rec *record.Record) {
	if k := len(p.edges); k > 1 && rec.Ticket != nil {
		rec.Ticket.N.Add(int32(k - 1))
	}
}

// sendPort sends rec on every edge of p: rec itself on the first, a copy
// on each other one, made before rec is sent (its reader may change it).
// Once the first edge took it the others are sent with the run's hard
// context: a stop request never gives a record to only some of a port's
// readers.
func (em *emitter) sendPort(p *port, rec *record.Record) error {
	if len(p.edges) == 1 {
		return send(em.ctx, p.edges[0], rec)
	}
	copies := make([]*record.Record, len(p.edges))
	for i := 1; i < len(copies); i++ {
		copies[i] = rec.Clone()
	}
	if err := send(em.ctx, p.edges[0], rec); err != nil {
		return err
	}
	for i := 1; i < len(copies); i++ {
		if err := send(em.e.hardCtx, p.edges[i], copies[i]); err != nil {
			return err
		}
	}
	return nil
}

// send blocks while ch is full, until ctx is done.
func send(ctx context.Context, ch chan any, rec *record.Record) error {
	select {
	case ch <- rec:
		return nil
	default:
	}
	select {
	case ch <- rec:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (em *emitter) Reject(rec *record.Record, reason, detail string) error {
	if em.otherShard(rec) {
		return nil
	}
	em.touched.Store(true)
	fresh := em.in == nil && rec.Ticket == nil
	em.claim(rec)
	if reason == pipeline.ReasonDuplicate && rec.Ticket != nil {
		rec.Ticket.Void.Store(true)
	}
	rec.Reject = &record.Rejection{Stage: em.n.ps.ID(), Reason: reason, Detail: detail}
	if err := em.journal(pipeline.RejectedPort, rec); err != nil {
		return err
	}
	if p, ok := em.n.outs[pipeline.RejectedPort]; ok {
		em.fanOut(p, rec)
		if err := em.sendPort(p, rec); err != nil {
			if fresh {
				em.e.ledger.unmake(rec)
			}
			return err
		}
	} else if err := em.e.dead.write(layout.Rejected, em.n.ps.ID(), rec); err != nil {
		return err
	}
	em.n.rejected.Add(1)
	em.n.reasonsMu.Lock()
	em.n.reasons[reason]++
	em.n.reasonsMu.Unlock()
	if reason != pipeline.ReasonDuplicate {
		em.e.decided(em.n, reason)
	}
	return nil
}

// decided records one outcome of n (reason "" for a record sent on) for
// max_rejected, and halts the run when the stage's recent rejections pass
// it: intake stops, everything processed is committed, what is in flight
// finishes, and the run ends with ErrTooManyRejected.
func (e *engine) decided(n *node, reason string) {
	if n.recent == nil {
		return
	}
	full, share := n.recent.add(reason)
	l := e.plan.File.MaxRejected
	if !full || share <= l.Share {
		return
	}
	e.halt(fmt.Errorf("%w: stage %q rejected %.0f%% of its last %d records (max_rejected = %s); top reasons: %s. "+
		"Retrying regenerates the same: fix the cause (the servers' model and settings, the prompts, the stage's rules; pipe inspect %s shows the rejects) "+
		"or raise [pipeline] max_rejected (e.g. --set pipeline.max_rejected=90%%, or off)",
		ErrTooManyRejected, n.ps.ID(), 100*share, l.Window, l.Text, strings.Join(n.recent.top(3), ", "), pipeline.DisplayPath(e.plan.File.RunDir)))
}

func (em *emitter) Fail(rec *record.Record, err error, attempts int) error {
	if em.otherShard(rec) {
		return nil
	}
	em.touched.Store(true)
	em.claim(rec)
	if rec.Ticket != nil {
		// A fault (a server's, a rule's, a program's) finishes nothing:
		// the id stays unfinished and the next start does it again.
		rec.Ticket.Void.Store(true)
	}
	rec.Failure = &record.Failure{Stage: em.n.ps.ID(), Error: err.Error(), Attempts: attempts}
	if werr := em.e.dead.write(layout.Failed, em.n.ps.ID(), rec); werr != nil {
		return werr
	}
	em.n.failed.Add(1)
	em.e.sayFailure(em.n, rec.ID, err)
	if err := em.e.checkFailed(false); err != nil {
		em.e.halt(err)
	}
	return nil
}

// markLanded finds, for the ids whose journal entries were lost to damage
// (done again this start), the writers of verdicts that already hold them:
// a record done again may get another verdict (accepted where it was
// rejected), and must not land in a second output of verdicts. A writer fed
// straight by an expensive stage (every completion) takes its copy as
// usual; the others skip the id where another one holds it.
func (e *engine) markLanded() {
	lost := e.lostHashes()
	if len(lost) == 0 {
		return
	}
	held := map[uint64]*node{}
	var verdicts []*node
	for _, n := range e.nodes {
		h, ok := n.stage.(pipeline.Holder)
		if !ok || !n.opened || n.committer == nil || fedByExpensive(n.ps) {
			continue
		}
		verdicts = append(verdicts, n)
		for _, id := range lost {
			if h.Holds(id) {
				held[id] = n
			}
		}
	}
	for _, n := range verdicts {
		n.markLandedElsewhere(held)
	}
}

// lostHashes are the ids whose entries the journals lost to damage.
func (e *engine) lostHashes() []uint64 {
	var lost []uint64
	for _, n := range e.nodes {
		if n.journal != nil {
			lost = append(lost, n.journal.LostHashes()...)
		}
	}
	return lost
}

// markLandedElsewhere marks in n.landed each id of held (by the writer of
// verdicts holding it) that another writer holds and n does not.
func (n *node) markLandedElsewhere(held map[uint64]*node) {
	h := n.stage.(pipeline.Holder)
	for id, by := range held {
		if by != n && !h.Holds(id) {
			if n.landed == nil {
				n.landed = map[uint64]bool{}
			}
			n.landed[id] = true
		}
	}
}

// fedByExpensive reports whether every input of ps is an expensive
// stage's output (not its rejected port): a writer of every completion.
func fedByExpensive(ps *pipeline.PlanStage) bool {
	for _, in := range ps.Inputs {
		if !in.From.Spec.Expensive || in.Port == pipeline.RejectedPort {
			return false
		}
	}
	return len(ps.Inputs) > 0
}

// maxSaidFailures is how many distinct errors of one stage's failed
// records are shown as they happen; the rest are in failed/ only.
const maxSaidFailures = 5

// maxFailureText bounds a failure's text as shown (the terminal's writer
// makes it safe; this keeps it short).
const maxFailureText = 2000

// sayFailure shows the first occurrence of each distinct error of a
// stage's failed records (a rule's, a program's, a server's), whole, on
// the terminal and in the run log: failed/ is not where people look.
func (e *engine) sayFailure(n *node, id string, err error) {
	text := err.Error()
	if len(text) > maxFailureText { // a server's or a program's words
		text = strings.ToValidUTF8(text[:maxFailureText], "") + "…"
	}
	n.firstFailure.CompareAndSwap(nil, &text)
	n.reasonsMu.Lock()
	if n.saidFailures == nil {
		n.saidFailures = map[string]bool{}
	}
	say := !n.saidFailures[text] && len(n.saidFailures) < maxSaidFailures
	if say {
		n.saidFailures[text] = true
	}
	n.reasonsMu.Unlock()
	if say {
		fmt.Fprintf(e.opts.Notice, "pipe: stage %q: record %q failed: %s\n", n.ps.ID(), id, text)
	}
}

// halt ends the run like a stop request (commit, drain) and then fails it
// with err; the first call wins. The intake stops here, before halt
// returns: a record taken between the halt and the watcher's turn would
// be a request sent past it (a budget spent twice, a server known bad).
func (e *engine) halt(err error) {
	e.tooManyOnce.Do(func() {
		e.tooManyErr.Store(&err)
		e.drained.Store(true)
		e.stopIntake()
		close(e.tooMany)
	})
}

// checkFailed returns ErrTooManyFailed (with the figures) when a stage's
// failed records pass [pipeline] max_failed; final judges a share however
// few records came in.
func (e *engine) checkFailed(final bool) error {
	limit := e.plan.File.MaxFailed
	var total int64
	var worst *node
	for _, n := range e.nodes {
		f := n.failed.Load()
		total += f
		if f > 0 && (worst == nil || f > worst.failed.Load()) {
			worst = n
		}
	}
	if worst == nil {
		return nil
	}
	tooMany := func(n *node) error {
		first := ""
		if p := n.firstFailure.Load(); p != nil {
			first = "; the first: " + *p
		}
		return fmt.Errorf("%w: %d failed of %d records taken by stage %q (%s; max_failed = %s; [pipeline] max_failed or --set pipeline.max_failed=… allows more)%s; they are in %s",
			ErrTooManyFailed, n.failed.Load(), n.in.Load(), n.ps.ID(), n.ps.Spec.Kind, limit.Text, first, layout.DeadLetterDir(e.plan.File.RunDir, layout.Failed))
	}
	if limit.Share == 0 { // a count is over the whole run
		if limit.Exceeded(total, total, final) {
			return tooMany(worst)
		}
		return nil
	}
	for _, n := range e.nodes {
		if limit.Exceeded(n.failed.Load(), n.in.Load(), final) {
			return tooMany(n)
		}
	}
	return nil
}

func (em *emitter) Skip(rec *record.Record, reason string) error {
	// A stage that sends records on and skips one ends that copy's way (a
	// duplicate, a finished id): it finishes nothing. A writer's skip
	// (already committed) is that copy's commit, side ports or not.
	return em.skip(rec, reason, len(em.n.ps.Spec.Outputs) > 0 && em.n.committer == nil)
}

// skip counts rec as skipped and releases its place; void, its id is not
// finished by it.
func (em *emitter) skip(rec *record.Record, reason string, void bool) error {
	em.touched.Store(true)
	em.claim(rec)
	if void && rec.Ticket != nil {
		rec.Ticket.Void.Store(true)
	}
	em.e.ledger.release(rec.Ticket)
	em.n.skipped.Add(1)
	em.n.reasonsMu.Lock()
	em.n.skips[reason]++
	em.n.reasonsMu.Unlock()
	return nil
}

func (em *emitter) SkipFinished(id string) bool {
	to := em.n.finishedBy
	if to == nil || !em.e.ledger.Has(id) {
		return false
	}
	// As if sent on and skipped there: the accounting of both stages holds.
	em.n.out.Add(1)
	to.in.Add(1)
	to.skipped.Add(1)
	to.reasonsMu.Lock()
	to.skips["done"]++
	to.reasonsMu.Unlock()
	return true
}

func (em *emitter) Took(n int) { em.n.in.Add(int64(n)) }
