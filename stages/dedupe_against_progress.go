package stages

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/pipe-dev/pipe/pipeline"
	"github.com/pipe-dev/pipe/pipeline/commitlog"
	"github.com/pipe-dev/pipe/pipeline/figure"
	"github.com/pipe-dev/pipe/pipeline/record"
)

func init() {
	pipeline.Register(pipeline.Spec{
		Kind:    "dedupe-against-progress",
		Summary: "drop prompts this run directory already finished, and repeated ids in the input",
		Description: `Placed right after the reader, it makes a resumed run skip what is done.
At open it loads the ids the run directory has finished. An id is finished
when it is committed in every output it reached, or rejected. The ids are in
RUN_DIR/done.ids, 8 bytes an id. The stage drops those prompts while
streaming, counted as skipped: done. A prompt whose completion was generated
but not yet committed everywhere passes. The generate stage then takes it
from its journal instead of asking a server again.

An id seen earlier in this run's input is rejected as duplicate_id. The
first one wins. against lists other outputs whose ids are skipped too,
counted as skipped: against. Each is a JSONL file or another run
directory's done.ids. The JSONL file is a write-jsonl output or any file
with an "id" per line.`,
		Outputs:       []string{"out", pipeline.RejectedPort},
		DropsFinished: true,
		KeySettings: pipeline.SettingsFor(func(c *dedupeConfig) string {
			if n := len(c.Against); n > 0 {
				return fmt.Sprintf("and %d other outputs", n)
			}
			return ""
		}),
		Example: `[[stage]]
id   = "prompts"
kind = "read-prompts"
path = "prompts.jsonl"

[[stage]]
id    = "todo"
kind  = "dedupe-against-progress"
input = "prompts"

[[stage]]
id    = "out"
kind  = "write-jsonl"
input = "todo"
path  = "out/prompts.jsonl"
`,
		New: pipeline.NewProcessor(func(c *dedupeConfig) (pipeline.Processor, error) { return &dedupe{cfg: *c}, nil }),
	})
}

type dedupeConfig struct {
	// Against lists files whose ids are skipped too.
	Against []string `toml:"against" path:"in" doc:"Other outputs whose ids count as done. Each is a JSONL file with an \"id\" per line, or another run directory's done.ids. Empty: only this run directory counts."`
}

type dedupe struct {
	cfg     dedupeConfig
	done    pipeline.DoneSet
	against *commitlog.Set
	seen    commitlog.SeenSet
}

var (
	_ pipeline.Processor = (*dedupe)(nil)
	_ pipeline.Opener    = (*dedupe)(nil)
	_ pipeline.Reporter  = (*dedupe)(nil)
)

func (d *dedupe) Open(_ context.Context, env *pipeline.Env) error {
	d.done = env.Done
	d.seen = commitlog.SeenSet{}
	var all []uint64
	for _, p := range d.cfg.Against {
		ids, err := idsOf(p)
		if err != nil {
			return fmt.Errorf("against %s: %w", p, err)
		}
		all = append(all, ids...)
	}
	d.against = commitlog.NewSet(all)
	return nil
}

func (d *dedupe) Process(_ context.Context, rec *record.Record, out pipeline.Emitter) error {
	h := commitlog.Hash(rec.ID)
	if !d.seen.Add(h) {
		return out.Reject(rec, pipeline.ReasonDuplicate, fmt.Sprintf("id %q was already read earlier in this input; the first one is kept", rec.ID))
	}
	switch {
	case d.done != nil && d.done.Has(rec.ID):
		return out.Skip(rec, "done")
	case d.against.Has(h):
		return out.Skip(rec, "against")
	}
	return out.Emit("out", rec)
}

// FigureFinishedBefore is dedupe-against-progress's gauge of the ids the
// run directory had finished when this start began; its skips of them are
// counted under the reason "done".
const FigureFinishedBefore = "finished_before_this_run"

func (d *dedupe) Report() []figure.Figure {
	var st []figure.Figure
	if d.done != nil {
		st = append(st, figure.NewGauge(FigureFinishedBefore, float64(d.done.Len())))
	}
	if len(d.cfg.Against) > 0 {
		st = append(st, figure.NewGauge("ids_in_other_outputs", float64(d.against.Len())))
	}
	return st
}

// idsOf reads the id hashes of another output: a done.ids log, a commit
// log's index, or else every line's "id".
func idsOf(path string) ([]uint64, error) {
	if filepath.Base(path) == pipeline.DoneFile {
		l, ids, err := commitlog.OpenIDLog(path)
		if err != nil {
			return nil, err
		}
		l.Close()
		return ids, nil
	}
	if _, err := os.Stat(commitlog.IndexPath(path)); err == nil {
		return commitlog.ReadIDs(path)
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	br := bufio.NewReaderSize(f, 1<<20)
	var ids []uint64
	for lineNo := 1; ; lineNo++ {
		line, err := readLine(br)
		if len(line) > 0 {
			var row struct {
				ID json.RawMessage `json:"id"`
			}
			if jerr := json.Unmarshal(line, &row); jerr != nil || len(row.ID) == 0 {
				return nil, fmt.Errorf("%s:%d: want a JSON object with an \"id\"", path, lineNo)
			}
			id := string(row.ID)
			var s string
			if json.Unmarshal(row.ID, &s) == nil {
				id = s
			}
			ids = append(ids, commitlog.Hash(id))
		}
		switch {
		case errors.Is(err, io.EOF):
			return ids, nil
		case err != nil:
			return nil, fmt.Errorf("%s:%d: %w", path, lineNo, err)
		}
	}
}
