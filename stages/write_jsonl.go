package stages

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"

	"github.com/pipe-dev/pipe/pipeline"
	"github.com/pipe-dev/pipe/pipeline/commitlog"
	"github.com/pipe-dev/pipe/pipeline/config"
	"github.com/pipe-dev/pipe/pipeline/figure"
	"github.com/pipe-dev/pipe/pipeline/record"
	"github.com/pipe-dev/pipe/pipeline/record/recordline"
	"github.com/pipe-dev/pipe/stages/trainrow"
)

func init() {
	pipeline.Register(pipeline.Spec{
		Kind:    "write-jsonl",
		Summary: "write records as JSONL, committed as it goes; a resumed run continues the file",
		Description: `Appends one record per line to path: id, messages, completion, tokens,
reject and so on. It commits every commit interval of the run (pipe run
--commit-every, default 1m), at once when the run is asked to stop, and at
the end. A commit is an fsync, then an index entry per line in the hidden
.NAME.idx beside the file. After a crash the next run keeps the whole
lines, cuts a torn last line and continues the file. Records it already
holds are skipped, counted as already_committed. So a resumed run never
writes an id twice.

A file at path that this writer did not make (no index beside it) is never
overwritten. It is renamed to PATH.prev-TIME first.

layout = "specforge" writes {"id", "input_ids", "loss_mask"} per line: the
file SpecForge's data.prompts_path takes. layout = "conversations" writes
{"id", "conversations": [..., {"role": "assistant", "content",
"reasoning_content"}]}: the file its data.train_data_path takes. It has no
other column, as SpecForge passes every extra column into the chat
template. Set max_length and trainer to the trainer's. Rows it would cut
are then cut the same way, or rejected with too_long = "reject". Rows it
would drop without a word are rejected here with a reason instead. Those
have fewer loss tokens than it needs; for DFlash, no two adjacent ones.`,
		MaxInputs: 0,
		// The specforge layout is built from tokenize-and-mask's rows, so
		// pipe check says so when the input cannot have them.
		Fields: pipeline.FieldsFor(func(c *writeJSONLConfig) (needs, produces []string) {
			if c.Layout == trainrow.SpecForge {
				return []string{record.FieldTokens}, nil
			}
			return nil, nil
		}),
		Verify: pipeline.VerifyFor(verifyJSONL),
		Output: jsonlOutput,
		KeySettings: pipeline.SettingsFor(func(cfg *writeJSONLConfig) string {
			if cfg.Layout != trainrow.Records {
				return cfg.Layout + " in " + pipeline.DisplayPath(cfg.Path)
			}
			return pipeline.DisplayPath(cfg.Path)
		}),
		Example: `[[stage]]
id   = "prompts"
kind = "read-prompts"
path = "prompts.jsonl"

[[stage]]
id    = "out"
kind  = "write-jsonl"
input = "prompts"
path  = "out/prompts.jsonl"
`,
		New: pipeline.NewProcessor(func(c *writeJSONLConfig) (pipeline.Processor, error) { return &writeJSONL{cfg: *c}, nil }),
	})
}

type writeJSONLConfig struct {
	// Path is the output file, relative to the pipeline file. Required.
	Path string `toml:"path" required:"true" path:"out" doc:"Output file, relative to the pipeline file. Its directory is created."`
	// Layout is what a line holds (trainrow.Layouts).
	Layout string `toml:"layout" default:"records" enum:"records|specforge|conversations" doc:"\"records\": pipe's records. \"specforge\": id, input_ids and loss_mask, for SpecForge's data.prompts_path. \"conversations\": id and conversations, for SpecForge's data.train_data_path."`
	// MaxLength is the trainer's max_length (SpecForge's data.max_length).
	MaxLength int `toml:"max_length" default:"0" min:"0" trainer:"max_length" doc:"With layout specforge or conversations: the trainer's max_length (SpecForge data.max_length). Longer rows are cut as it cuts them, or rejected (too_long). 0: no limit."`
	// TooLong is what a row longer than max_length does.
	TooLong string `toml:"too_long" default:"cut" enum:"cut|reject" doc:"What a row longer than max_length does. \"cut\" cuts it to max_length, as SpecForge does. \"reject\" rejects it as too_long."`
	// Trainer picks the loss-token rules rows are judged by.
	Trainer string `toml:"trainer" default:"eagle3" enum:"eagle3|dflash" trainer:"method" doc:"With layout specforge or conversations: the SpecForge algorithm. \"eagle3\" needs 1 loss token, \"dflash\" 2 adjacent ones. Rows it would drop are rejected with a reason."`
}

func (c *writeJSONLConfig) Validate() []error {
	if c.Layout != trainrow.Records {
		return nil
	}
	var errs []error
	for _, k := range []struct {
		key string
		set bool
	}{{"max_length", c.MaxLength > 0}, {"too_long", c.TooLong == "reject"}, {"trainer", c.Trainer == trainrow.TrainerDFlash}} {
		if k.set {
			errs = append(errs, &config.FieldError{Key: k.key, Msg: `judges the rows of a trainer layout: set layout = "specforge" or "conversations" (the default, "records", writes every record as it is)`})
		}
	}
	return errs
}

// UsesTrainer: [trainer] judges the rows of the trainer layouts only.
func (c *writeJSONLConfig) UsesTrainer() bool { return c.Layout != trainrow.Records }

func (c *writeJSONLConfig) rules() trainrow.Rules {
	return trainrow.Rules{MaxLength: c.MaxLength, TooLong: c.TooLong, Trainer: c.Trainer}
}

type writeJSONL struct {
	cfg  writeJSONLConfig
	log  *commitlog.Log
	prev string // where a file that was not ours was kept, if there was one
}

var (
	_ pipeline.Processor  = (*writeJSONL)(nil)
	_ pipeline.Opener     = (*writeJSONL)(nil)
	_ pipeline.Committer  = (*writeJSONL)(nil)
	_ pipeline.Closer     = (*writeJSONL)(nil)
	_ pipeline.Reporter   = (*writeJSONL)(nil)
	_ pipeline.RowCounter = (*writeJSONL)(nil)
	_ pipeline.Holder     = (*writeJSONL)(nil)
)

func (w *writeJSONL) Open(_ context.Context, env *pipeline.Env) error {
	if err := os.MkdirAll(filepath.Dir(w.cfg.Path), 0o755); err != nil {
		return err
	}
	log := io.Discard
	if env != nil && env.Log != nil {
		log = env.Log
	}
	check := env != nil && env.ReadWhole
	l, rep, err := commitlog.OpenRepaired(w.cfg.Path, recordline.ID, false, check)
	if rep != nil {
		if err := w.repaired(env, rep); err != nil {
			return err
		}
	}
	if errors.Is(err, commitlog.ErrNotALog) {
		// Outputs can hold days of GPU work: keep what is there.
		if w.prev, err = pipeline.KeepAside(w.cfg.Path); err != nil {
			return fmt.Errorf("keeping the existing %s: %w", w.cfg.Path, err)
		}
		fmt.Fprintf(log, "%s existed and was not written by this writer: kept as %s\n", w.cfg.Path, w.prev)
		l, err = commitlog.Open(w.cfg.Path, recordline.ID)
	}
	if err != nil {
		return err
	}
	w.log = l
	if st := l.Stats(); st.Rows > 0 {
		msg := fmt.Sprintf("%s: continuing after %d committed records", w.cfg.Path, st.Rows)
		if k, cut := l.Recovered(), l.Truncated(); k > 0 || cut > 0 {
			msg += fmt.Sprintf(" (%d whole records written after the last commit kept, %d bytes of torn tail cut)", k, cut)
		}
		fmt.Fprintln(log, msg) // one write: the run log stamps each
	}
	return nil
}

// repaired says what a damaged output lost when it was opened, and has
// the lost rows' ids done again: they are finished in done.ids, but their
// rows are gone from the file.
func (w *writeJSONL) repaired(env *pipeline.Env, rep *commitlog.Repaired) error {
	msg := rep.String(w.cfg.Path)
	if len(rep.Lost) > 0 && env.Unfinish != nil {
		if err := env.Unfinish(rep.Lost); err != nil {
			return fmt.Errorf("%s: %w", msg, err)
		}
		msg += " (their records are done again: from the journal where it still holds them, else generated again)"
	}
	if env.Warn != nil {
		env.Warn("output_damaged", msg)
	} else if env.Notice != nil {
		fmt.Fprintf(env.Notice, "pipe: warning: stage %q: %s\n", env.StageID, msg)
	}
	return nil
}

// Holds reports whether the output held id's line when it was opened.
func (w *writeJSONL) Holds(h uint64) bool { return w.log.HasHash(h) }

func (w *writeJSONL) Process(_ context.Context, rec *record.Record, out pipeline.Emitter) error {
	if w.log.Has(rec.ID) {
		return out.Skip(rec, "already_committed")
	}
	buf := lineBufs.Get().(*[]byte)
	defer lineBufs.Put(buf)
	line, prob, err := trainrow.AppendEncode(*buf, w.cfg.Layout, w.cfg.rules(), rec)
	if err != nil {
		return out.Fail(rec, fmt.Errorf("cannot encode the record as JSON: %w", err), 1)
	}
	if prob != nil {
		return out.Reject(rec, prob.Reason, prob.Detail)
	}
	if cap(line) <= 1<<20 {
		*buf = line // kept for the next line (a huge one is not)
	}
	return w.log.Append(rec.ID, line)
}

// lineBufs hold encoded lines, reused: Append copies a line, so its
// buffer is free again once Append returns.
var lineBufs = sync.Pool{New: func() any { return new([]byte) }}

// Commit makes every record appended so far durable.
func (w *writeJSONL) Commit(context.Context, pipeline.Emitter) error { return w.log.Commit() }

// Close leaves anything not committed to be cut by the next run.
func (w *writeJSONL) Close() error {
	if w.log == nil {
		return nil
	}
	return w.log.Close()
}

func (w *writeJSONL) Report() []figure.Figure {
	if w.log == nil {
		return nil
	}
	st := w.log.Stats()
	stats := []figure.Figure{
		figure.NewState("path", pipeline.DisplayPath(w.cfg.Path), ""),
		figure.NewCounter("committed_records", st.Rows),
		figure.NewCounter("committed_bytes", st.Bytes).In(figure.UnitBytes),
		figure.NewGauge("uncommitted_records", float64(st.PendingRows)),
	}
	if w.prev != "" {
		stats = append(stats, figure.NewState("previous_file_kept_as", pipeline.DisplayPath(w.prev), ""))
	}
	return stats
}

// CommittedRows is the records the file holds, earlier runs' included.
func (w *writeJSONL) CommittedRows() int64 { return w.log.Stats().Rows }
