package engine

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/pipe-dev/pipe/pipeline"
	"github.com/pipe-dev/pipe/pipeline/commitlog"
	"github.com/pipe-dev/pipe/pipeline/internal/ticket"
	"github.com/pipe-dev/pipe/pipeline/record"
	"github.com/pipe-dev/pipe/pipeline/rundir/layout"
)

func (l *ledger) newTicket(id string) *ticket.Ticket {
	l.made.Add(1)
	t := &ticket.Ticket{ID: id}
	t.N.Store(1)
	return t
}

// unmake takes back the ticket a source's record got for a send that a
// stop cut short: the record was not read (the next run reads it).
func (l *ledger) unmake(rec *record.Record) {
	if rec.Ticket != nil {
		l.made.Add(-1)
		rec.Ticket = nil
	}
}

// unfinished is how many records the sources read this run that did not
// finish (abandoned by a stop, or still on their way).
func (l *ledger) unfinished() int64 {
	return l.made.Load() - l.added.Load() - l.alreadyDone.Load() - l.voided.Load()
}

// ledger is the run directory's record of what is finished: the done log,
// and in memory the set it held when the run started (8 bytes an id). Ids
// finished during the run are only appended to the log, so memory does not
// grow with the input.
type ledger struct {
	log     *commitlog.IDLog
	set     *commitlog.Set // read-only after open
	atStart int
	added   atomic.Int64
	// Tickets: made for records the sources read, and how they ended.
	made, alreadyDone, voided atomic.Int64
	// full is called when many finished ids wait for a commit.
	full func()
	// fresh are the hashes finished since the last commit (those done at
	// start too), for the journals: a segment goes once all its ids did.
	freshMu sync.Mutex
	fresh   []uint64
	// failedBefore are the ids failed/ held at the start; recovered those
	// of them finished since the last commit (layout.Recovered).
	runDir       string
	failedBefore *commitlog.Set
	recovered    []uint64
}

// openLedger opens done.ids, checked against its checksums; warning says
// what damage it found and set aside ("" for none).
func openLedger(runDir string) (l *ledger, warning string, err error) {
	log, hashes, warning, err := commitlog.OpenCheckedIDLog(filepath.Join(runDir, pipeline.DoneFile))
	if err != nil {
		return nil, "", fmt.Errorf("run directory state: %w", err)
	}
	set := commitlog.NewSet(hashes)
	l = &ledger{log: log, set: set, atStart: set.Len(), runDir: runDir}
	// The ids that failed in earlier starts (not finished: this start
	// does them again); one that finishes now is recorded as recovered.
	var failed []uint64
	files, _ := filepath.Glob(layout.DeadLetters(runDir, layout.Failed, "*"))
	for _, f := range files {
		hs, err := commitlog.ReadIDs(f)
		if err != nil {
			log.Close()
			return nil, "", fmt.Errorf("run directory state: %w", err)
		}
		failed = append(failed, hs...)
	}
	l.failedBefore = commitlog.NewSet(failed)
	return l, warning, nil
}

// Has reports whether id was finished when the run started (DoneSet).
func (l *ledger) Has(id string) bool { return l.set.Has(commitlog.Hash(id)) }

// Len is the number of ids finished when the run started (DoneSet).
func (l *ledger) Len() int { return l.atStart }

// finished is the number of finished ids, this run's included.
func (l *ledger) finished() int { return l.atStart + int(l.added.Load()) }

// release drops one of t's pending places; the last one finishes its id.
func (l *ledger) release(t *ticket.Ticket) {
	if t == nil || t.N.Add(-1) != 0 {
		return
	}
	if t.Void.Load() {
		l.voided.Add(1)
		return
	}
	h := commitlog.Hash(t.ID)
	if l.set.Has(h) {
		l.alreadyDone.Add(1)
	} else {
		if l.log.Add(h) == maxPending && l.full != nil {
			l.full()
		}
		l.added.Add(1)
	}
	l.freshMu.Lock()
	l.fresh = append(l.fresh, h)
	if l.failedBefore != nil && l.failedBefore.Has(h) {
		l.recovered = append(l.recovered, h)
	}
	l.freshMu.Unlock()
}

// unfinish takes hashes out of the finished set and done.ids (Env.Unfinish).
// Only while the stages open: nothing reads the set or adds to the log yet.
func (l *ledger) unfinish(hashes []uint64) error {
	if len(hashes) == 0 {
		return nil
	}
	drop := make(map[uint64]bool, len(hashes))
	for _, h := range hashes {
		drop[h] = true
	}
	path := l.log.Path()
	if err := l.log.Close(); err != nil {
		return err
	}
	if err := rewriteIDLog(path, func(h uint64) bool { return drop[h] }); err != nil {
		return fmt.Errorf("run directory state: %w", err)
	}
	log, kept, _, err := commitlog.OpenCheckedIDLog(path)
	if err != nil {
		return fmt.Errorf("run directory state: %w", err)
	}
	l.log, l.set = log, commitlog.NewSet(kept)
	l.atStart = l.set.Len()
	return nil
}

// rewriteIDLog replaces the id log at path with the hashes it holds that
// drop does not take, in their order, atomically; when drop takes none it
// is left as it is. The log must not be open for writing.
func rewriteIDLog(path string, drop func(uint64) bool) error {
	l, hashes, err := commitlog.OpenIDLog(path)
	if err != nil {
		return err
	}
	l.Close()
	kept := slices.DeleteFunc(hashes, drop)
	if len(kept) == len(hashes) {
		return nil
	}
	return commitlog.WriteIDLog(path, kept)
}

// commit makes the finished ids durable and returns the hashes that this
// made (or that were) finished for good since the last commit. One taken
// after the commit began waits for the next.
func (l *ledger) commit() ([]uint64, error) {
	l.freshMu.Lock()
	fresh, recovered := l.fresh, l.recovered
	l.fresh, l.recovered = nil, nil
	l.freshMu.Unlock()
	if err := l.log.Commit(); err != nil {
		return nil, err
	}
	if len(recovered) > 0 {
		if err := appendIDs(layout.Recovered(l.runDir), recovered); err != nil {
			return nil, fmt.Errorf("run directory state: %w", err)
		}
	}
	return fresh, nil
}
func (l *ledger) close() error { return l.log.Close() }

// appendIDs appends hashes to the id log at path and commits them.
func appendIDs(path string, hashes []uint64) error {
	l, _, err := commitlog.OpenIDLog(path)
	if err != nil {
		return err
	}
	for _, h := range hashes {
		l.Add(h)
	}
	return errors.Join(l.Commit(), l.Close())
}
