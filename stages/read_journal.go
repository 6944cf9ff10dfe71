package stages

import (
	"context"
	"fmt"
	"io"

	"github.com/pipe-dev/pipe/pipeline"
	"github.com/pipe-dev/pipe/pipeline/commitlog"
	"github.com/pipe-dev/pipe/pipeline/output"
	"github.com/pipe-dev/pipe/pipeline/record"
	"github.com/pipe-dev/pipe/pipeline/rundir/layout"
)

func init() {
	pipeline.Register(pipeline.Spec{
		Kind:    "read-journal",
		Summary: "replay what a stage of another run sent on, from that run's journal (pipe run --from STAGE=RUN_DIR)",
		Description: `Reads the journal an expensive stage (generate) kept in run_dir. It reads
every record the stage sent on, on the port it sent it. It reads committed
lines only. A torn or pending tail a killed run left is not read, and
nothing there is changed. pipe run --from STAGE=RUN_DIR puts this stage in
place of STAGE and everything upstream of it. A finished run's completions
then go through today's downstream stages without a server. It may also be
written by hand.

An id the journal holds twice (a retried batch) is sent once, the first
time. An id this run directory already finished is skipped, counted as
skipped: done. So a stopped replay continues where it was committed.`,
		DropsFinished: true,
		Replay: &output.ReplaySpec{Reads: output.ReplaysJournal, Config: func(runDir, stage, _, _ string) map[string]any {
			return map[string]any{"run_dir": runDir, "stage": stage}
		}},
		Outputs:  []string{"out", pipeline.RejectedPort},
		Produces: []string{record.FieldMessages, record.FieldCompletion},
		KeySettings: pipeline.SettingsFor(func(cfg *readJournalConfig) string {
			return fmt.Sprintf("%s of %s", cfg.Stage, pipeline.DisplayPath(cfg.RunDir))
		}),
		Example: `[[stage]]
id      = "gen"
kind    = "read-journal"
run_dir = "runs/regenerate"
stage   = "gen"

[[stage]]
id    = "check"
kind  = "validate-thinking"
input = "gen"

[[stage]]
id    = "good"
kind  = "write-jsonl"
input = "check.accepted"
path  = "out/good.jsonl"
`,
		New: pipeline.NewSource(func(c *readJournalConfig) (pipeline.Source, error) { return &readJournal{cfg: *c}, nil }),
	})
}

// readJournalConfig configures read-journal.
type readJournalConfig struct {
	// RunDir is the run directory whose journal is read. Required.
	RunDir string `toml:"run_dir" op:"true" required:"true" path:"rundir" doc:"The run directory whose journal is read, relative to the pipeline file."`
	// Stage is the id of the journaled stage in that run. Required.
	Stage string `toml:"stage" required:"true" doc:"The id of the stage in that run whose journal is read, e.g. gen."`
}

type readJournal struct {
	cfg    readJournalConfig
	done   pipeline.DoneSet
	notice io.Writer
	id     string
}

var (
	_ pipeline.Source = (*readJournal)(nil)
	_ pipeline.Opener = (*readJournal)(nil)
)

func (r *readJournal) Open(_ context.Context, env *pipeline.Env) error {
	r.done, r.notice, r.id = env.Done, env.Notice, env.StageID
	if r.notice == nil {
		r.notice = io.Discard
	}
	files, err := commitlog.StageJournalFiles(r.cfg.RunDir, r.cfg.Stage)
	if err != nil {
		return err
	}
	if len(files) == 0 {
		return fmt.Errorf("%s: no journal of stage %q (want %s)", r.cfg.RunDir, r.cfg.Stage, layout.LegacyJournal(r.cfg.RunDir, r.cfg.Stage))
	}
	return nil
}

func (r *readJournal) Read(ctx context.Context, out pipeline.Emitter) error {
	files, err := commitlog.StageJournalFiles(r.cfg.RunDir, r.cfg.Stage)
	if err != nil {
		return err
	}
	var seen commitlog.SeenSet
	for _, path := range files {
		damaged := 0
		err := commitlog.EachCommitted(path, func(n int, line []byte) error {
			if err := ctx.Err(); err != nil {
				return err
			}
			jl, err := commitlog.ParseJournalEntry(line)
			if err != nil {
				// Committed lines are whole records: this one was changed
				// on disk. Its record is lost to the replay, not the rest.
				if damaged++; damaged <= 3 {
					fmt.Fprintf(r.notice, "pipe: warning: stage %q: %s:%d is damaged (%v): its record is not replayed\n", r.id, path, n, err)
				}
				return nil
			}
			rec := jl.Record
			if !seen.Add(commitlog.Hash(rec.ID)) {
				return nil
			}
			if err := r.send(jl, out); err != nil {
				return err
			}
			out.Took(1)
			return nil
		})
		if damaged > 3 {
			fmt.Fprintf(r.notice, "pipe: warning: stage %q: %s: %d damaged entries in all, not replayed\n", r.id, path, damaged)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// send passes on the record of one journal entry: skipped when its id is
// finished; rejected again when the replaced stage rejected it (its own
// verdict stands: it is what it produced); else out.
func (r *readJournal) send(jl *commitlog.JournalEntry, out pipeline.Emitter) error {
	rec := jl.Record
	if r.done != nil && r.done.Has(rec.ID) {
		return out.Skip(rec, "done")
	}
	if jl.Port == pipeline.RejectedPort && rec.Reject != nil {
		return out.Reject(rec, rec.Reject.Reason, rec.Reject.Detail)
	}
	rec.Reject = nil
	return out.Emit("out", rec)
}
