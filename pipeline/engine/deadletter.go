package engine

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"sync"

	"github.com/pipe-dev/pipe/pipeline"
	"github.com/pipe-dev/pipe/pipeline/commitlog"
	"github.com/pipe-dev/pipe/pipeline/internal/ticket"
	"github.com/pipe-dev/pipe/pipeline/record"
	"github.com/pipe-dev/pipe/pipeline/record/recordline"
	"github.com/pipe-dev/pipe/pipeline/rundir/layout"
)

// deadLetters keeps records that leave a stage without a connected port —
// rejections with no "rejected" edge, and failures — in
// RUN_DIR/{rejected,failed}/STAGE.jsonl, so no record ends nowhere. Each file
// is a commit log, continued across runs of the run directory; a record whose
// id a file already holds is not written again, so a resumed run never counts
// a record twice.
type deadLetters struct {
	dir     string
	mu      sync.Mutex
	logs    map[string]*commitlog.Log
	pending []*ticket.Ticket
	written map[string]bool // files this run wrote to
	// warn shows what a damaged file lost when it was opened.
	warn func(msg string)
}

func newDeadLetters(runDir string) *deadLetters {
	return &deadLetters{dir: runDir, logs: map[string]*commitlog.Log{}, written: map[string]bool{}}
}

// Path is where records of the given class ("rejected", "failed") from stage go.
func (d *deadLetters) Path(class, stage string) string {
	return layout.DeadLetters(d.dir, class, stage)
}

// write appends rec; its ticket is released at the next commit.
func (d *deadLetters) write(class, stage string, rec *record.Record) error {
	line, err := json.Marshal(rec)
	if err != nil {
		return fmt.Errorf("encoding record %q: %w", rec.ID, err)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	p := d.Path(class, stage)
	l := d.logs[p]
	if l == nil {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		var rep *commitlog.Repaired
		l, rep, err = commitlog.OpenRepaired(p, recordline.ID, false, false)
		if rep != nil && d.warn != nil {
			// Their ids stay finished: the records were rejected or
			// failed for good; only their lines are gone.
			d.warn(rep.String(p) + " (their ids stay finished: these records are not done again)")
		}
		if errors.Is(err, commitlog.ErrNotALog) {
			// Written by a version of pipe without commit logs: keep it.
			if _, err = pipeline.KeepAside(p); err == nil {
				l, err = commitlog.Open(p, recordline.ID)
			}
		}
		if err != nil {
			return err
		}
		d.logs[p] = l
	}
	d.pending = append(d.pending, rec.Ticket)
	if l.Has(rec.ID) {
		return nil // committed by an earlier run (or earlier in this one)
	}
	d.written[p] = true
	return l.Append(rec.ID, line)
}

// commit makes every file durable and returns the tickets it released.
func (d *deadLetters) commit() ([]*ticket.Ticket, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, l := range d.logs {
		if err := l.Commit(); err != nil {
			return nil, err
		}
	}
	t := d.pending
	d.pending = nil
	return t, nil
}

// Close closes every file (commit first) and returns the paths this run wrote to.
func (d *deadLetters) Close() ([]string, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	var paths []string
	var errs []error
	for p, l := range d.logs {
		if d.written[p] {
			paths = append(paths, p)
		}
		errs = append(errs, l.Close())
	}
	sort.Strings(paths)
	d.logs = map[string]*commitlog.Log{}
	return paths, errors.Join(errs...)
}
