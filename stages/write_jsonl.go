package stages

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/pipe-dev/pipe/pipeline"
	"github.com/pipe-dev/pipe/pipeline/commitlog"
)

func init() {
	pipeline.Register(pipeline.Spec{
		Kind:    "write-jsonl",
		Summary: "write records as JSONL, committed as it goes; a resumed run continues the file",
		Description: `Appends one record per line (id, messages, completion, tokens, reject...)
to path, and commits (fsync, then an index entry per line in the hidden
.NAME.idx beside it) every commit interval of the run (pipe run
--commit-every, default 1m), at once when the run is asked to stop, and at
the end. After a crash the next run keeps the whole lines, cuts a torn last
line and continues the file; records it already holds are skipped (counted
as already_committed), so a resumed run never writes an id twice.

A file at path that this writer did not make (no index beside it) is never
overwritten: it is renamed to PATH.prev-TIME first.`,
		Config:    writeJSONLConfig{},
		MaxInputs: 0,
		KeySettings: func(c any) string {
			return pipeline.DisplayPath(c.(*writeJSONLConfig).Path)
		},
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
		New: func(c any) (pipeline.Stage, error) { return &writeJSONL{cfg: *c.(*writeJSONLConfig)}, nil },
	})
}

type writeJSONLConfig struct {
	// Path is the output file, relative to the pipeline file. Required.
	Path string `toml:"path" required:"true" path:"out" doc:"output file, relative to the pipeline file; its directory is created"`
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
)

func (w *writeJSONL) Open(_ context.Context, env *pipeline.Env) error {
	if err := os.MkdirAll(filepath.Dir(w.cfg.Path), 0o755); err != nil {
		return err
	}
	log := io.Discard
	if env != nil && env.Log != nil {
		log = env.Log
	}
	l, err := commitlog.Open(w.cfg.Path, pipeline.RecordLineID)
	if errors.Is(err, commitlog.ErrNotALog) {
		// Outputs can hold days of GPU work: keep what is there.
		if w.prev, err = pipeline.KeepAside(w.cfg.Path); err != nil {
			return fmt.Errorf("keeping the existing %s: %w", w.cfg.Path, err)
		}
		fmt.Fprintf(log, "%s existed and was not written by this writer: kept as %s\n", w.cfg.Path, w.prev)
		l, err = commitlog.Open(w.cfg.Path, pipeline.RecordLineID)
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

func (w *writeJSONL) Process(_ context.Context, rec *pipeline.Record, out pipeline.Emitter) error {
	if w.log.Has(rec.ID) {
		return out.Skip(rec, "already_committed")
	}
	line, err := json.Marshal(rec)
	if err != nil {
		return out.Fail(rec, fmt.Errorf("cannot encode the record as JSON: %w", err), 1)
	}
	return w.log.Append(rec.ID, line)
}

// Commit makes every record appended so far durable.
func (w *writeJSONL) Commit(context.Context, pipeline.Emitter) error { return w.log.Commit() }

// Close leaves anything not committed to be cut by the next run.
func (w *writeJSONL) Close() error {
	if w.log == nil {
		return nil
	}
	return w.log.Close()
}

func (w *writeJSONL) Report() []pipeline.Figure {
	if w.log == nil {
		return nil
	}
	st := w.log.Stats()
	stats := []pipeline.Figure{
		pipeline.NewState("path", pipeline.DisplayPath(w.cfg.Path), ""),
		pipeline.NewCounter("committed_records", st.Rows),
		pipeline.NewCounter("committed_bytes", st.Bytes).In(pipeline.UnitBytes),
		pipeline.NewGauge("uncommitted_records", float64(st.PendingRows)),
	}
	if w.prev != "" {
		stats = append(stats, pipeline.NewState("previous_file_kept_as", pipeline.DisplayPath(w.prev), ""))
	}
	return stats
}

// CommittedRows is the records the file holds, earlier runs' included.
func (w *writeJSONL) CommittedRows() int64 { return w.log.Stats().Rows }
