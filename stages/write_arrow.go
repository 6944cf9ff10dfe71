package stages

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/pipe-dev/pipe/pipeline"
	"github.com/pipe-dev/pipe/pipeline/commitlog"
	"github.com/pipe-dev/pipe/pipeline/config"
	"github.com/pipe-dev/pipe/pipeline/figure"
	"github.com/pipe-dev/pipe/pipeline/filecommit"
	"github.com/pipe-dev/pipe/pipeline/record"
	"github.com/pipe-dev/pipe/stages/arrowrow"
)

func init() {
	pipeline.Register(pipeline.Spec{
		Kind:    "write-arrow",
		Summary: "write records as Parquet or Arrow IPC shards with a manifest, committed as they go",
		Description: `Writes typed columns into shards part-00000.parquet, part-00001.parquet, …
in the directory path. The columns are id, messages, reasoning, answer,
input_ids list<int32>, loss_mask list<uint8>, counts and generation
metadata; docs/training-data.md has the schema. .pipe/manifest.json lists
each committed shard: rows, tokens, bytes, sha256.

A shard is written under a hidden temporary name. It is committed when it
reaches max_rows or max_bytes or is max_age old, when the run is asked to
stop, and at the end. max_age is judged at the run's commit rounds (pipe
run --commit-every). So shards are sized for training, not one per commit
round. A commit fsyncs and renames the shard and adds it to the manifest,
which is replaced atomically. Rows between shards are kept safe by the
generation journal. Their ids are finished only once their shard is
committed, so a crash takes them from the journal again.

Parquet rows reach the open row group (row_group_rows) about a MiB at a
time. They wait there encoded and compressed. Arrow IPC rows are buffered
one batch (row_group_rows) at a time. So memory does not grow with the
shard. After a crash the next run removes what was not committed. It
continues with the next shard number. Rows the directory already holds are
skipped (already_committed).

The optional port "shards" sends one record per committed shard, e.g. to
upload-s3: its path, rows, tokens, bytes and sha256. At the first commit of
a run it also sends one for every shard committed by earlier runs. So a
shard committed but not uploaded before a crash is uploaded on resume.`,
		Outputs:         []string{"shards"},
		OptionalOutputs: []string{"shards"},
		// Committed shards wait for the next stage (an upload) in a
		// bounded backlog: an upload waiting out an outage lets generation
		// go on for this many shards, then slows the writer.
		PortBuffers: map[string]int{"shards": shardBacklog},
		Verify:      pipeline.VerifyFor(verifyShardDir),
		Output:      shardOutput,
		Produces:    []string{record.FieldShard},
		KeySettings: pipeline.SettingsFor(func(cfg *writeArrowConfig) string {
			return cfg.Format + " in " + pipeline.DisplayPath(cfg.Path)
		}),
		Example: `[[stage]]
id   = "prompts"
kind = "read-prompts"
path = "prompts.jsonl"

[[stage]]
id     = "out"
kind   = "write-arrow"
input  = "prompts"
path   = "out/prompts"
format = "parquet"
`,
		New: pipeline.NewProcessor(func(c *writeArrowConfig) (pipeline.Processor, error) { return &writeArrow{cfg: *c}, nil }),
	})
}

type writeArrowConfig struct {
	// Path is the shard directory, relative to the pipeline file. Required.
	Path string `toml:"path" required:"true" path:"dir" doc:"Directory of the shards and .pipe/manifest.json, relative to the pipeline file. It is created."`
	// Format is "parquet" or "arrow" (IPC file).
	Format string `toml:"format" default:"parquet" enum:"parquet|arrow" doc:"\"parquet\", or \"arrow\" for the Arrow IPC file format."`
	// Compression: "" is zstd for Parquet and none for Arrow.
	Compression string `toml:"compression" enum:"|zstd|snappy|lz4|none" doc:"\"zstd\", \"snappy\" (Parquet only), \"lz4\" or \"none\". \"\": zstd for Parquet, none for Arrow, which every Arrow reader reads."`
	// MaxRows rotates a shard at this many rows.
	MaxRows int64 `toml:"max_rows" op:"true" default:"100000" min:"1" doc:"Rows per shard at most."`
	// MaxBytes rotates a shard at about this many bytes.
	MaxBytes int64 `toml:"max_bytes" op:"true" default:"536870912" min:"1048576" doc:"Bytes per shard at most, about."`
	// MaxAge commits a shard this long after its first row.
	MaxAge config.Duration `toml:"max_age" op:"true" default:"30m" doc:"Commit a shard this long after its first row. It is judged at each commit round of the run."`
	// RowGroupRows is the rows of a Parquet row group or an Arrow IPC
	// batch.
	RowGroupRows int `toml:"row_group_rows" op:"true" default:"1024" min:"1" max:"1048576" doc:"Rows per Parquet row group, held compressed until written. Or rows per Arrow batch, held as columns."`
}

func (c *writeArrowConfig) Validate() []error {
	var errs []error
	if c.Format == arrowrow.FormatArrow && c.Compression == "snappy" {
		errs = append(errs, &config.FieldError{Key: "compression", Msg: `"snappy" is for Parquet; Arrow IPC takes "zstd", "lz4" or "none"`})
	}
	if c.MaxAge.Duration <= 0 {
		errs = append(errs, &config.FieldError{Key: "max_age", Msg: fmt.Sprintf("must be positive, got %v", c.MaxAge.Duration)})
	}
	return errs
}

type writeArrow struct {
	cfg writeArrowConfig
	// mu keeps Report (called from the progress goroutine) apart from
	// Process and Commit.
	mu     sync.Mutex
	mem    memory.Allocator
	shards *filecommit.Set
	b      *arrowrow.Builder
	log    io.Writer

	cur            *filecommit.Pending
	fw             arrowrow.FileWriter
	rows, tokens   int64 // in cur, written and buffered
	ids            []uint64
	committedShard int
	// started is when cur got its first row, for max_age; durable counts
	// the rows appended since Open that are in committed shards
	// (pipeline.Batcher).
	started time.Time
	durable int64
	// toSend are committed shards not yet sent on the shards port.
	toSend []record.ShardRef
}

var (
	_ pipeline.Processor  = (*writeArrow)(nil)
	_ pipeline.Opener     = (*writeArrow)(nil)
	_ pipeline.Committer  = (*writeArrow)(nil)
	_ pipeline.Batcher    = (*writeArrow)(nil)
	_ pipeline.Closer     = (*writeArrow)(nil)
	_ pipeline.Reporter   = (*writeArrow)(nil)
	_ pipeline.RowCounter = (*writeArrow)(nil)
	_ pipeline.Holder     = (*writeArrow)(nil)
)

// shardIDs reads the id hashes of a committed shard's rows, in order (to
// rebuild a damaged id log).
func (w *writeArrow) shardIDs(path string) ([]uint64, error) {
	var out []uint64
	err := arrowrow.EachID(context.Background(), path, w.mem, func(id string) { out = append(out, commitlog.Hash(id)) })
	return out, err
}

func (w *writeArrow) Open(_ context.Context, env *pipeline.Env) error {
	w.log = io.Discard
	if env != nil && env.Log != nil {
		w.log = env.Log
	}
	if w.mem == nil { // tests set their own
		w.mem = memory.DefaultAllocator
	}
	s, removed, err := filecommit.OpenRebuilding(w.cfg.Path, w.cfg.Format, arrowrow.Ext(w.cfg.Format), arrowrow.Version, w.shardIDs)
	if err != nil {
		return err
	}
	w.shards = s
	if msg := s.Recovered(); msg != "" && env != nil && env.Notice != nil {
		fmt.Fprintf(env.Notice, "pipe: warning: stage %q: %s\n", env.StageID, msg)
	}
	if len(removed) > 0 {
		fmt.Fprintf(w.log, "%s: removed %v, left by a run that stopped before committing them (their rows are written again)\n", w.cfg.Path, removed)
	}
	if err := w.checkCommitted(env); err != nil {
		return err
	}
	m := s.Manifest()
	if m.Rows > 0 {
		fmt.Fprintf(w.log, "%s: continuing after %d committed rows in %d shards\n", w.cfg.Path, m.Rows, len(m.Shards))
	}
	if m.Schema != arrowrow.Version && len(m.Shards) > 0 {
		// Readers that take the directory as one table want one schema.
		fmt.Fprintf(w.log, "%s: its %d shards are of schema %s, the next ones of %s; datasets and DuckDB read D/* as one table of one schema: give this run another path to keep them apart\n",
			w.cfg.Path, len(m.Shards), m.Schema, arrowrow.Version)
	}
	for _, sh := range m.Shards {
		w.toSend = append(w.toSend, w.ref(sh))
	}
	w.b = arrowrow.NewBuilder(w.mem)
	return nil
}

// shardBacklog is how many committed shards may wait for an upload.
const shardBacklog = 32

// checkCommitted checks the shards this run builds on: sizes always, the
// SHA-256 too when asked or after a crash (env.HashCheck). A damaged shard
// is taken out of the directory and its rows leave the run's finished set,
// so they are written again (from the journal, which has the completions).
// A shard file that is missing is damage too, unless its removal was noted
// (filecommit.MarkMoved: an upload with delete_local_after_upload removed
// it after verifying its copy); verifying says whether the copy is whole.
func (w *writeArrow) checkCommitted(env *pipeline.Env) error {
	m := w.shards.Manifest()
	hash := env != nil && env.HashCheck
	res, err := filecommit.Check(w.shards.Dir(), &m, hash)
	if err != nil {
		return err
	}
	var damaged []string
	for _, p := range res.Problems {
		if p.MovedTo != "" { // removed on purpose, a verified copy there
			continue
		}
		damaged = append(damaged, p.Shard.Name)
		fmt.Fprintf(w.log, "%s: committed shard %s; its %d rows are written again\n", w.cfg.Path, p.Error(), p.Shard.Rows)
	}
	how := "sizes"
	if hash {
		how = "sizes and SHA-256"
	}
	if len(m.Shards) > 0 && len(damaged) == 0 {
		fmt.Fprintf(w.log, "%s: %d committed shards checked (%s)\n", w.cfg.Path, len(m.Shards), how)
	}
	var ids []uint64
	if len(damaged) > 0 {
		if ids, err = w.shards.Drop(damaged); err != nil {
			return fmt.Errorf("taking out the damaged shards %v: %w", damaged, err)
		}
	}
	if err := w.unfinishRedo(env); err != nil {
		return err
	}
	if len(damaged) == 0 {
		return nil
	}
	notice := env.Notice
	if notice == nil {
		notice = w.log
	}
	fmt.Fprintf(notice, "%s: %d damaged committed shards (%v, checked by %s) moved aside as %s/NAME%s; their %d rows are written again from the journal (or generated again where its segments are gone: [pipeline] keep_journal = true keeps them)\n",
		pipeline.DisplayPath(w.cfg.Path), len(damaged), damaged, how, filecommit.MetaDir, filecommit.DamagedSuffix, len(ids))
	return nil
}

// unfinishRedo takes every row still to be written again out of the
// finished set, at each start: a crash between a Drop and this left them
// in done.ids.
func (w *writeArrow) unfinishRedo(env *pipeline.Env) error {
	redo := w.shards.Redo()
	if len(redo) == 0 {
		return nil
	}
	if env == nil || env.Unfinish == nil {
		return fmt.Errorf("%s: %d rows of damaged shards need a run to be written again", w.cfg.Path, len(redo))
	}
	return env.Unfinish(redo)
}

// Holds reports whether the directory held id's row when it was opened.
func (w *writeArrow) Holds(h uint64) bool { return w.shards.HasHash(h) }

func (w *writeArrow) Process(_ context.Context, rec *record.Record, out pipeline.Emitter) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.shards.Has(rec.ID) {
		return out.Skip(rec, "already_committed")
	}
	if err := w.b.Append(rec); err != nil {
		return out.Fail(rec, fmt.Errorf("cannot write the record as a row: %w", err), 1)
	}
	if w.rows == 0 {
		w.started = time.Now()
	}
	w.rows++
	if rec.Tokens != nil {
		w.tokens += int64(rec.Tokens.NumTokens)
	}
	w.ids = append(w.ids, commitlog.Hash(rec.ID))
	if w.b.Len() >= w.cfg.RowGroupRows || (w.cfg.Format == arrowrow.FormatParquet && w.b.Bytes() >= parquetBatchBytes) {
		if err := w.flush(); err != nil {
			return err
		}
	}
	var written int64
	if w.cur != nil {
		written = w.cur.Size() + w.fw.Buffered()
	}
	// Buffered rows count too: a row group larger than max_bytes does not
	// make a shard larger than max_bytes.
	if w.rows >= w.cfg.MaxRows || written+w.b.Bytes() >= w.cfg.MaxBytes {
		return w.seal()
	}
	return nil
}

// parquetBatchBytes is how much of a Parquet row group is buffered as rows
// before it goes to the shard's open row group, where it is kept encoded
// and compressed. Handing a row group over whole made pqarrow's levels and
// encodings a second copy of it at once (1024 rows of 3,000 tokens are
// ~40 MB of columns), which the Go heap's goal then doubled.
const parquetBatchBytes = 1 << 20

// flush writes the buffered rows into the current shard: for Parquet into
// its open row group, for Arrow IPC as one record batch.
func (w *writeArrow) flush() error {
	if w.b.Len() == 0 {
		return nil
	}
	if w.cur == nil {
		p, err := w.shards.Create()
		if err != nil {
			return err
		}
		fw, err := arrowrow.NewFileWriter(p, w.cfg.Format, w.cfg.Compression, w.cfg.RowGroupRows, w.mem)
		if err != nil {
			p.Abort()
			return err
		}
		w.cur, w.fw = p, fw
	}
	batch := w.b.NewBatch()
	defer batch.Release()
	return w.fw.Write(batch)
}

// seal finishes the current shard and commits it.
func (w *writeArrow) seal() error {
	if err := w.flush(); err != nil {
		return err
	}
	if w.cur == nil {
		return nil
	}
	if err := w.fw.Close(); err != nil {
		return err
	}
	p := w.cur
	w.cur, w.fw = nil, nil
	info, err := p.Commit(w.rows, w.tokens, w.ids)
	if err != nil {
		return err
	}
	w.toSend = append(w.toSend, w.ref(info))
	w.durable += w.rows
	w.rows, w.tokens, w.ids = 0, 0, w.ids[:0]
	w.committedShard++
	return nil
}

func (w *writeArrow) ref(sh filecommit.ShardInfo) record.ShardRef {
	dir := w.shards.Dir()
	return record.ShardRef{Path: filepath.Join(dir, sh.Name), Dir: dir, Name: sh.Name,
		Rows: sh.Rows, Tokens: sh.Tokens, Bytes: sh.Bytes, SHA256: sh.SHA256}
}

// Commit seals the shard being written, however small (everything
// accepted is then committed: a stop, or the end of the input), and sends
// the committed shards on the shards port.
func (w *writeArrow) Commit(_ context.Context, out pipeline.Emitter) error {
	return w.commit(out, true)
}

// CommitDue seals the shard being written only once it is max_age old, and
// sends the committed shards on: a commit round does not cut shards short.
func (w *writeArrow) CommitDue(_ context.Context, out pipeline.Emitter) error {
	return w.commit(out, false)
}

// Durable is the rows appended since Open that are in committed shards.
func (w *writeArrow) Durable() int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.durable
}

func (w *writeArrow) commit(out pipeline.Emitter, all bool) error {
	w.mu.Lock()
	if all || (w.rows > 0 && time.Since(w.started) >= w.cfg.MaxAge.Duration) {
		if err := w.seal(); err != nil {
			w.mu.Unlock()
			return err
		}
	}
	send := slices.Clone(w.toSend)
	w.mu.Unlock()
	// Sent without the lock: a slow upload downstream holds this send, and
	// must not hold Process and Report (the progress display) with it.
	sent := 0
	for _, ref := range send {
		if err := out.Emit("shards", &record.Record{ID: "shard:" + ref.Path, Shard: &ref}); err != nil {
			break // the run is stopping: the next run sends every committed shard
		}
		sent++
	}
	w.mu.Lock()
	w.toSend = w.toSend[sent:] // Process only appends (a rotation's seal)
	w.mu.Unlock()
	return nil
}

// Close drops a shard that was not committed (its rows are redone).
func (w *writeArrow) Close() error {
	if w.cur != nil {
		w.fw.Close() // frees the open row group; the file is removed
		w.cur.Abort()
		w.cur, w.fw = nil, nil
	}
	if w.b != nil {
		w.b.Release()
	}
	if w.shards != nil {
		return w.shards.Close()
	}
	return nil
}

func (w *writeArrow) Report() []figure.Figure {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.shards == nil {
		return nil
	}
	m := w.shards.Manifest()
	return []figure.Figure{
		figure.NewState("path", pipeline.DisplayPath(w.cfg.Path), w.cfg.Format+" shards"),
		figure.NewCounter("committed_rows", m.Rows),
		figure.NewCounter("committed_tokens", m.Tokens).In(figure.UnitTokens),
		figure.NewCounter("committed_bytes", m.Bytes).In(figure.UnitBytes),
		figure.NewCounter("committed_shards", int64(len(m.Shards))),
		figure.NewGauge("uncommitted_rows", float64(w.rows)),
		figure.NewGauge("rows_to_write_again", float64(w.shards.ToRedo())),
	}
}

// CommittedRows is the rows of the committed shards, earlier runs' included.
func (w *writeArrow) CommittedRows() int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.shards.Manifest().Rows
}
