package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/pipe-dev/pipe/pipeline"
	"github.com/pipe-dev/pipe/pipeline/commitlog"
	"github.com/pipe-dev/pipe/pipeline/engine"
	"github.com/pipe-dev/pipe/pipeline/rundir"
	"github.com/pipe-dev/pipe/pipeline/rundir/layout"
)

// pipe inspect: run directories.

type runReport struct {
	Dir      string         `json:"dir"`
	Pipeline string         `json:"pipeline,omitempty"`
	Created  time.Time      `json:"created,omitzero"`
	Starts   []rundir.Start `json:"starts,omitempty"`
	// From status.json (absent when the run never wrote one).
	State      string        `json:"state,omitempty"`
	Updated    string        `json:"updated,omitempty"`
	PID        int           `json:"pid,omitempty"`
	Error      string        `json:"error,omitempty"`
	Unfinished *int64        `json:"unfinished,omitempty"`
	Stages     []stageCounts `json:"stages,omitempty"`
	Lock       *lockReport   `json:"lock,omitempty"`
	// Finished is the ids in done.ids.
	Finished int64          `json:"finished"`
	Journal  []fileCount    `json:"journal,omitempty"`
	Rejected []*jsonlReport `json:"rejected,omitempty"`
	Failed   []*jsonlReport `json:"failed,omitempty"`
	Outputs  []outputReport `json:"outputs,omitempty"`
	Log      string         `json:"log,omitempty"`
}

// stageCounts are status.json's counts of a stage (declared once, in
// package pipeline).
type stageCounts = engine.StageCounts

// lockReport is the run directory's lock as pipe inspect shows it (read
// by rundir.ReadHolder, the lock file's one reader).
type lockReport struct {
	PID      int       `json:"pid"`
	Host     string    `json:"host"`
	Started  time.Time `json:"started"`
	Released time.Time `json:"released,omitzero"`
	// Alive: the process is running, holding the lock (checked only on
	// the same host).
	Alive *bool `json:"alive,omitempty"`
}

type fileCount struct {
	Stage     string `json:"stage"`
	Path      string `json:"path"`
	Committed int64  `json:"committed"`
	Bytes     int64  `json:"bytes"`
}

type outputReport struct {
	Stage  string `json:"stage"`
	Kind   string `json:"kind"`
	Path   string `json:"path"`
	Exists bool   `json:"exists"`
	// Format and Unit are as the kind says (output.Committed): "parquet"
	// in "shards", "jsonl" in "lines"; "" while nothing is committed.
	Format string `json:"format,omitempty"`
	Unit   string `json:"unit,omitempty"`
	// Rows committed: the manifest's rows, or the commit index's lines.
	Rows int64 `json:"rows"`
	// Files are the committed files (its shards; "shards" in JSON, as
	// before other kinds had outputs).
	Files  int   `json:"shards,omitempty"`
	Tokens int64 `json:"tokens,omitempty"`
	Bytes  int64 `json:"bytes,omitempty"`
}

func (ins *inspector) runDir(doc *inspectDoc, dir string) error {
	rr := &runReport{Dir: dir}
	doc.Run = rr
	run, err := rundir.ReadRun(dir)
	if err != nil {
		return fmt.Errorf("pipe inspect: %w", err)
	}
	if run != nil {
		rr.Pipeline, rr.Created, rr.Starts = run.Pipeline, run.Created, run.History
		rr.Outputs = runOutputs(run)
	}
	if err := rr.readStatus(dir); err != nil {
		return err
	}
	rr.Lock = readLock(dir)
	if n, err := commitlog.CountIDs(filepath.Join(dir, pipeline.DoneFile)); err != nil {
		return fmt.Errorf("pipe inspect: %w", err)
	} else {
		rr.Finished = n
	}
	if rr.Journal, err = readJournals(dir); err != nil {
		return err
	}
	for _, class := range layout.DeadLetterClasses {
		for _, p := range jsonlIn(layout.DeadLetterDir(dir, class)) {
			jr, _, err := ins.jsonlFile(p, 0)
			if err != nil {
				return err
			}
			if class == layout.Rejected {
				rr.Rejected = append(rr.Rejected, jr)
			} else {
				rr.Failed = append(rr.Failed, jr)
			}
		}
	}
	if _, err := os.Stat(filepath.Join(dir, runLogFile)); err == nil {
		rr.Log = filepath.Join(dir, runLogFile)
	}
	return nil
}

// readStatus takes the state and counts of the last run from dir's
// status.json, if it has one.
func (rr *runReport) readStatus(dir string) error {
	st, err := rundir.ReadStatus[json.RawMessage](dir)
	var unreadable *fs.PathError
	switch {
	case errors.As(err, &unreadable):
		return nil // left out, as when there is none
	case err != nil:
		return fmt.Errorf("pipe inspect: %v", err)
	case st == nil:
		return nil
	}
	rr.State, rr.Updated, rr.PID, rr.Error, rr.Unfinished = st.State, st.Updated, st.PID, st.Error, &st.Unfin
	for _, s := range st.Stages {
		rr.Stages = append(rr.Stages, s.StageCounts)
	}
	return nil
}

// readLock is what dir's lock says (rundir.ReadHolder): on this host, an
// unreleased lock also says whether its process is alive (holds it). nil
// when there is none (or it is unreadable).
func readLock(dir string) *lockReport {
	h, err := rundir.ReadHolder(dir)
	if err != nil || h == nil || h.PID <= 0 {
		return nil
	}
	l := &lockReport{PID: h.PID, Host: h.Host, Started: h.Started, Released: h.Released}
	if !h.Remote && l.Released.IsZero() {
		alive := h.Alive
		l.Alive = &alive
	}
	return l
}

// readJournals counts the entries and bytes of each stage's journal in
// dir: segments journal/STAGE/NNNNN.jsonl (those whose ids are all
// finished are deleted), after an earlier pipe's single journal/STAGE.jsonl.
func readJournals(dir string) ([]fileCount, error) {
	journalDir := layout.JournalDir(dir)
	var out []fileCount
	byStage := map[string]int{}
	for _, p := range commitlog.JournalFiles(journalDir, "") {
		ids, err := commitlog.ReadIDs(p)
		if err != nil {
			return out, fmt.Errorf("pipe inspect: %w", err) // what was read is shown
		}
		stage, at := strings.TrimSuffix(filepath.Base(p), ".jsonl"), p
		if filepath.Dir(p) != journalDir {
			stage, at = filepath.Base(filepath.Dir(p)), filepath.Dir(p)
		}
		i, ok := byStage[stage]
		if !ok {
			i = len(out)
			byStage[stage] = i
			out = append(out, fileCount{Stage: stage, Path: at})
		}
		out[i].Committed += int64(len(ids))
		if st, err := os.Stat(p); err == nil {
			out[i].Bytes += st.Size()
		}
	}
	return out, nil
}

// jsonlIn lists dir's *.jsonl files (not the hidden indexes), sorted.
func jsonlIn(dir string) []string {
	entries, _ := os.ReadDir(dir)
	var out []string
	for _, e := range entries {
		if n := e.Name(); !e.IsDir() && !strings.HasPrefix(n, ".") && strings.HasSuffix(n, ".jsonl") {
			out = append(out, filepath.Join(dir, n))
		}
	}
	return out
}

// runOutputs reads what each output of the run committed, as its kind
// reads it (output.Spec): a manifest's shards, a commit index's
// lines. The outputs are run.json's; one written before it recorded them
// has its writers found in its settings (their "path").
func runOutputs(run *rundir.Run) []outputReport {
	outs := run.Outputs
	if len(outs) == 0 {
		outs = settingsOutputs(run.Settings)
	}
	var out []outputReport
	for _, ro := range outs {
		spec := pipeline.OutputOf(ro.Kind)
		if spec == nil || spec.Committed == nil {
			continue // not data of its own (an upload)
		}
		o := outputReport{Stage: ro.Stage, Kind: ro.Kind, Path: ro.Path}
		if _, err := os.Stat(ro.Path); err == nil {
			o.Exists = true
			if c, err := spec.Committed(ro.Path); err == nil && c != nil {
				o.Format, o.Unit = c.Format, c.Unit
				o.Rows, o.Tokens, o.Bytes = c.Rows, c.Tokens, c.Bytes
				o.Files = len(c.Files)
			}
		}
		out = append(out, o)
	}
	return out
}

// settingsOutputs are the outputs of an older run.json, by stage id: the
// stages whose kind keeps an output, at their "path".
func settingsOutputs(settings map[string]any) []rundir.Output {
	var out []rundir.Output
	for _, s := range rundir.RecordedStages(settings) {
		path := s.Str("path")
		if spec := pipeline.OutputOf(s.Kind); path != "" && spec != nil && spec.Committed != nil {
			out = append(out, rundir.Output{Stage: s.ID, Kind: s.Kind, Path: path})
		}
	}
	return out
}
