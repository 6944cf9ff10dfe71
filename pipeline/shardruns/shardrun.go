// Package shardruns reads the run directories of a sharded run (one per
// shard, see pipefile.Shard) as a set: pipe merge joins their committed
// outputs into one manifest, and their status sums their progress.
package shardruns

import (
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/pipe-dev/pipe/pipeline/pipefile"
	"github.com/pipe-dev/pipe/pipeline/rundir"
)

// Run is one shard's run directory as found on disk.
type Run struct {
	Dir   string // absolute
	Run   *rundir.Run
	Shard pipefile.Shard // 0/1 for an unsharded run
	// Status is status.json (nil before the first progress report).
	Status *Status
	// Live is true while a pipe run holds the directory's lock.
	Live bool
}

// Status is a shard's RUN_DIR/status.json (written by pipe run), which a
// set of shards is summed from; the generation's figures are left as read.
type Status = rundir.Status[json.RawMessage]

// Open reads the run directory dir (or the run.json path inside it).
func Open(dir string) (*Run, error) {
	if filepath.Base(dir) == rundir.RunFile {
		dir = filepath.Dir(dir)
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	r, err := rundir.ReadRun(abs)
	if err != nil {
		return nil, err
	}
	if r == nil {
		return nil, fmt.Errorf("%s: not a run directory (no %s)", dir, rundir.RunFile)
	}
	run := &Run{Dir: abs, Run: r, Shard: pipefile.Shard{Index: 0, Count: 1}}
	if r.Shard != nil {
		if r.Shard.Hash != pipefile.ShardHash {
			return nil, fmt.Errorf("%s: its shards were chosen by %q; this pipe chooses by %q", dir, r.Shard.Hash, pipefile.ShardHash)
		}
		run.Shard = pipefile.Shard{Index: r.Shard.Index, Count: r.Shard.Count}
	}
	if run.Status, err = rundir.ReadStatus[json.RawMessage](abs); err != nil {
		return nil, err
	}
	h, err := rundir.ReadHolder(abs)
	if err != nil {
		return nil, fmt.Errorf("%s: lock: %v", dir, err)
	}
	var updated time.Time
	if run.Status != nil {
		updated = run.Status.UpdatedAt()
	}
	run.Live = h.Running(updated)
	return run, nil
}

// State is the run's state as status.json says, except "process gone"
// when it says running or draining and no process holds the run directory,
// and "not started" without a status.json.
func (r *Run) State() string {
	switch {
	case r.Status == nil && r.Live:
		return rundir.StateRunning
	case r.Status == nil:
		return "not started"
	}
	return rundir.ShownState(r.Status.State, r.Live)
}

// Done reports whether the shard's run finished all its input ("done" in
// status.json before pipe status existed).
func (r *Run) Done() bool {
	return !r.Live && r.Status != nil && (r.Status.State == rundir.StateFinished || r.Status.State == "done")
}

// OpenAll opens every directory; errors name each one that failed.
func OpenAll(dirs []string) ([]*Run, error) {
	var runs []*Run
	var errs []string
	for _, d := range dirs {
		r, err := Open(d)
		if err != nil {
			errs = append(errs, err.Error())
			continue
		}
		runs = append(runs, r)
	}
	if len(errs) > 0 {
		return nil, errors.New(strings.Join(errs, "\n"))
	}
	sort.SliceStable(runs, func(i, j int) bool { return runs[i].Shard.Index < runs[j].Shard.Index })
	return runs, nil
}
