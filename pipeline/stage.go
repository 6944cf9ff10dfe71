package pipeline

import (
	"context"
	"errors"
	"io"

	"github.com/pipe-dev/pipe/pipeline/figure"
	"github.com/pipe-dev/pipe/pipeline/record"
	"github.com/pipe-dev/pipe/pipeline/rundir/layout"
)

// A stage kind's constructor (NewSource or NewProcessor) returns a Source
// or a Processor, which may implement the optional interfaces below. Stage
// code never touches channels: the engine calls it and moves records along
// the graph.

// Source produces records, e.g. by reading a file. Read returns when the input
// is exhausted or ctx is done (the user asked to stop intake); it returns
// ctx.Err() or nil in the second case, both meaning "stopped cleanly".
type Source interface {
	Read(ctx context.Context, out Emitter) error
}

// Processor handles one record at a time. A processor with no output ports is
// a sink: a record for which Process returns nil counts as written.
//
// Process may be called from several goroutines at once when the stage
// implements Parallel. A returned error fails the whole run; a problem with
// one record is reported with out.Reject or out.Fail instead.
type Processor interface {
	Process(ctx context.Context, rec *record.Record, out Emitter) error
}

// Parallel is implemented by processors that handle several records at once,
// e.g. generate with servers × concurrency requests in flight. Records then
// leave in completion order, not input order.
type Parallel interface {
	Workers() int
}

// Opener is implemented by stages that acquire resources before the first
// record (open files, probe servers). Open is called once, before any Read or
// Process; an error stops the run before any work is done.
type Opener interface {
	Open(ctx context.Context, env *Env) error
}

// Finisher is implemented by stages with work to do at the end of their
// input, e.g. emit a last batch. Finish is called once after the
// last Process returned, whether the input ended normally, by a drain, or
// because another stage failed: what was fully processed is committed.
// It is not called if this stage itself failed.
type Finisher interface {
	Finish(ctx context.Context, out Emitter) error
}

// Committer is implemented by writers: stages that make the records they
// accept durable in batches (write-jsonl appends to a commit log,
// write-arrow commits shards). A record a writer's Process accepted (returned
// nil without sending it on) counts as written but is not done until a
// commit makes it durable: only then does the run directory count its id as
// finished, so a crash before that redoes it (from the generation journal,
// not the servers). Commit makes every record accepted so far durable. The
// engine calls it every engine.Options.CommitEvery (a Batcher gets CommitDue
// there instead), at once when a stop is requested, and when the writer's
// input ends; never concurrently with Process. A writer that was handed a
// record it already committed (a replay after a crash) reports it with
// out.Skip.
//
// What Commit sends on through out (write-arrow: one record per committed
// shard, on its "shards" port) is a side output: it is not counted in the
// writer's in = out + … accounting, and it finishes no prompt id. Sending
// blocks while downstream is full, which slows the writer and so the whole
// pipeline (an upload that falls behind holds back generation).
type Committer interface {
	Commit(ctx context.Context, out Emitter) error
}

// Batcher is a Committer that sizes its own batches instead of committing
// at every commit round: write-arrow commits a shard at max_rows, max_bytes
// or max_age, so a two-day run makes shards a trainer wants, not one a
// minute. Between its batches the records it accepted stay pending: their
// ids are not finished (not in done.ids), so a crash takes them again from
// the generation journal, which is what keeps them durable meanwhile (and
// which keeps every entry whose id is not finished).
//
// At a commit round, a stop request's included, the engine calls CommitDue
// instead of Commit: it commits what is due (a batch past its age) and
// sends on what was committed since, and may leave the open batch open.
// Commit, at the end of the input (a stopped run's too, once its requests in
// flight finished), makes everything durable: a stopped run ends with one
// partial batch, not one at the stop and another after the drain. A batch
// the writer commits on its own during Process (at max_rows) counts as soon
// as Process returns. Without a journal (engine.Options.NoJournal) the engine
// treats a Batcher as a plain Committer.
//
// Durable is how many of the records Process accepted since Open are
// durable now; the engine finishes the ids of the first Durable() accepted
// records, in the order they were accepted. It is called with the same
// exclusion as Process. The engine holds about 60 bytes for each pending
// record, so the batch size bounds the engine's memory too; past
// MaxBatchRecords pending records it commits the batch whatever its size.
type Batcher interface {
	Committer
	CommitDue(ctx context.Context, out Emitter) error
	Durable() int64
}

// MaxBatchRecords is the most records a Batcher may keep pending: the
// engine then calls Commit (about 120 MiB of bookkeeping; a training shard
// is far smaller).
const MaxBatchRecords = 1 << 21

// RowCounter is implemented by writers that can say how many records their
// output holds, committed by this run and by earlier ones. At the end of a
// finished run the engine fails it (ErrNoTrainingRows) when such a writer
// takes accepted records (not only a rejected port) and holds none: a run
// that produced no training data did not succeed.
type RowCounter interface {
	CommittedRows() int64
}

// Closer releases what Open acquired. It is always called if Open succeeded.
type Closer interface {
	Close() error
}

// Reporter is implemented by stages with figures of their own (per-server
// throughput, tokens, bytes committed) for the progress display,
// status.json, the run summary and the metrics endpoint, which all render
// them (see figure.Figure). It must be safe to call concurrently with Process.
type Reporter interface {
	Report() []figure.Figure
}

// Emitter moves records out of a stage. Every method blocks while downstream is
// full (backpressure) and returns an error only when the run is stopping; the
// stage should then return that error.
type Emitter interface {
	// Emit sends rec out of the named output port ("" means the stage's first port).
	Emit(port string, rec *record.Record) error
	// Reject sends rec out of the "rejected" port with a reason code, or, when
	// that port is not connected, into the run directory's rejected/STAGE.jsonl.
	Reject(rec *record.Record, reason, detail string) error
	// Fail records that rec could not be processed (e.g. retries exhausted);
	// it is counted and written to the run directory's failed/STAGE.jsonl.
	Fail(rec *record.Record, err error, attempts int) error
	// Skip says rec needs no work: its id is already finished in this run
	// directory or in another output (dedupe-against-progress), or this
	// sink already committed it. It is counted as skipped (in = out +
	// rejected + failed + skipped) and goes nowhere. A sink's skip counts
	// as delivered (the record is in its output); any other stage's skip
	// leaves the id's state as it was: it does not finish it here.
	Skip(rec *record.Record, reason string) error
	// SkipFinished is for sources: it reports whether the record with id
	// needs no work because the run directory had finished it and the stage
	// reading this output drops finished records. It is then counted there
	// as skipped ("done"); the source moves on (and counts it with Took).
	// Always false where no such stage reads the output.
	SkipFinished(id string) bool
	// Took counts records a source consumed from its input, including ones
	// it rejected, for the in = out + rejected + failed accounting. Call it
	// after the Emit or Reject succeeded: a record whose Emit failed because
	// the run is stopping was not taken, and will be read again on resume.
	Took(n int)
}

// Env is what the engine gives a stage at Open.
type Env struct {
	// StageID is the stage's id in the pipeline file.
	StageID string
	// RunDir is the run directory (absolute); it exists.
	RunDir string
	// Log receives human-readable progress lines; it is the run's log.
	Log io.Writer
	// Notice receives the lines a user must see now — e.g. that no server
	// is ready, and why — on the terminal as well as in the run log. Never
	// nil: without a terminal it is the log.
	Notice io.Writer
	// Warn, when not nil, takes a warning the user must act on while the
	// run goes on (e.g. a server that stalled or was never ready), with a
	// kind naming it ("server_stalled"): the run's warner shows it on the
	// terminal, in the run log, in status.json and in notifications
	// (engine.Options.Warn). Nil: write it to Notice.
	Warn func(kind, text string)
	// Done is the set of ids this run directory had finished (committed in
	// every output they reached, or rejected; a failed record is not
	// finished) when the run started.
	Done DoneSet
	// Resources are shared across stages of one run (e.g. one simulator
	// fleet); see Resource.
	Resources *Resources
	// DuplicatesHandled is set when the stage reading this source's output
	// rejects repeated ids itself (see the function of that name); a
	// source that can tell rejects them as duplicate_id otherwise.
	DuplicatesHandled bool
	// Halt, from Open on, ends the run the way a stop request does —
	// intake stops, everything processed is committed, records in flight
	// finish (up to the drain timeout) — and then fails it with err. It is
	// for a problem found ahead of the records it concerns, e.g. a bad line
	// the reader has not reached yet. Nil outside a run.
	Halt func(err error)
	// Sample, when set, asks a source for a spread sample of its input
	// (pipe plan): every Every-th record not finished yet, at most Max.
	Sample Sample
	// HashCheck asks a writer to check its committed outputs at Open by
	// their SHA-256, not only their sizes (engine.Options.HashCheck).
	HashCheck bool
	// ReadWhole asks a writer of lines to read every committed line of its
	// output at Open, repairing a damaged one (commitlog.OpenRepaired), not
	// only to trust its index (engine.Options.ReadWhole).
	ReadWhole bool
	// Unfinish, during Open only, takes ids (commitlog.Hash) out of the
	// run directory's finished set, in memory and in done.ids: a writer
	// that found committed rows damaged has them written again (from the
	// journal where it holds them). Nil outside a run.
	Unfinish func(hashes []uint64) error
	// Stopping is closed when the run stops taking work: a stop request,
	// SIGTERM, a budget reached, too many failures. A stage whose work
	// costs (generate) then starts none: for a record it holds but has not
	// started, Process returns ErrNotStarted, and the next run does the
	// record. Nil outside a run.
	Stopping <-chan struct{}
}

// Holder is a writer that can tell whether its committed output holds an
// id (by its commitlog.Hash). The engine asks about the ids whose journal
// entries were lost to damage: a record done again for one lands only
// where a verdict was not already committed (see engine's landed).
type Holder interface {
	Holds(h uint64) bool
}

// ErrNotStarted, returned (wrapped) by Process, says the stage did not
// start the record's work because the run is stopping (Env.Stopping): the
// record is abandoned, not failed, and the next run does it.
var ErrNotStarted = errors.New("not started: the run is stopping")

// DoneSet is a run directory's set of finished ids.
type DoneSet interface {
	Has(id string) bool
	Len() int
}

// DoneFile is the run directory's log of finished ids (see
// commitlog.IDLog); Env.Done is what it held when the run started.
const DoneFile = layout.Done

// Rejected records: the port they go out of, and the reason code of a
// duplicate id.
const (
	// RejectedPort is the output port whose records count as rejected; it
	// may be left unconnected (rejections then go to the run directory).
	RejectedPort = "rejected"
	// ReasonDuplicate is the reason code for a record whose id an earlier
	// record of the same input already has. Rejecting a record with it
	// never finishes the id: the first record with that id decides.
	ReasonDuplicate = "duplicate_id"
)

// DryRunner is implemented by stages that can show their readiness without
// doing any work, for `pipe run --dry-run` (e.g. generate probes its servers
// and prints a table of them). Open has not been called.
type DryRunner interface {
	DryRun(ctx context.Context, env *Env) (string, error)
}

// Sample is a spread sample of a source's input: every Every-th record
// (of those not finished yet), at most Max of them. The zero Sample is
// the whole input. A sample spread over the file sees its whole range of
// prompts, however the file is sorted.
type Sample struct {
	Every, Max int64
}
