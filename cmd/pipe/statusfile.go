package main

import (
	"os"
	"time"

	"github.com/pipe-dev/pipe/pipeline"
	"github.com/pipe-dev/pipe/pipeline/rundir"
)

// Run states in status.json (see rundir.ShownState).
const (
	stateRunning  = rundir.StateRunning
	stateDraining = rundir.StateDraining
	stateFinished = rundir.StateFinished
	stateStopped  = rundir.StateStopped
	stateFailed   = rundir.StateFailed
	stateGone     = rundir.StateGone
)

// statusDoc is RUN_DIR/status.json (rundir.Status) with the generation's
// figures as pipe run keeps them.
type statusDoc = rundir.Status[liveFleet]

// statusWriter writes status.json.
type statusWriter struct {
	dir  string
	base statusDoc
}

func newStatusWriter(plan *pipeline.Plan, fingerprint string) *statusWriter {
	host, _ := os.Hostname()
	return &statusWriter{
		dir: plan.File.RunDir,
		base: statusDoc{PID: os.Getpid(), Host: host, Started: time.Now().UTC().Format(time.RFC3339),
			Pipeline: plan.File.Path, Name: plan.File.Name, RunDir: plan.File.RunDir, Fingerprint: fingerprint},
	}
}

// write replaces status.json. A failure is returned for the log: status is
// for watching, it never stops a run.
func (w *statusWriter) write(state string, ls *liveStatus, runErr error) error {
	doc := w.base
	doc.State, doc.Updated = state, time.Now().UTC().Format(time.RFC3339)
	if ls != nil {
		doc.Live = *ls
	}
	if runErr != nil {
		doc.Error = runErr.Error()
	}
	return doc.Write(w.dir)
}
