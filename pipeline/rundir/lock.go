// Package rundir keeps the run directory's own bookkeeping: the lock that
// allows one live `pipe run` per run directory, run.json with the settings
// that define the data (a resume with other settings is refused), and moving
// a previous run aside for --fresh. It declares the run directory's
// documents once, for every command that writes or reads them: run.json
// (package runfile), status.json (Status), timeline.jsonl (Point) and the
// lock (Holder).
package rundir

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"

	"github.com/pipe-dev/pipe/pipeline/commitlog"
	"github.com/pipe-dev/pipe/pipeline/rundir/layout"
)

// LockFile is the lock's name inside the run directory.
const LockFile = layout.Lock

// lockInfo is what the lock file holds, as JSON.
type lockInfo struct {
	PID      int       `json:"pid"`
	Host     string    `json:"host"`
	Started  time.Time `json:"started"`
	Released time.Time `json:"released,omitzero"`
}

// Locked is a run directory this process holds. The lock is an flock(2) on
// DIR/lock, which the kernel drops when the process dies however it dies, so
// a lock that can be taken is never held by a live process.
type Locked struct {
	Dir string // the run directory
	// TookOver is non-empty when the lock file named a process that never
	// released it (killed, crashed, machine rebooted): a line for the user,
	// e.g. "previous run (pid 99, started …) did not finish cleanly;
	// resuming from its committed state".
	TookOver string

	f    *os.File
	info lockInfo
}

// BusyError is returned by Lock when another live process holds the lock.
// PID is 0 when its lock file could not be read (it was just being written).
type BusyError struct {
	Dir     string
	PID     int
	Host    string
	Started time.Time
}

func (e *BusyError) Error() string {
	if e.PID == 0 {
		return fmt.Sprintf("run directory %s is in use by another process (its lock file %s does not say which); stop it with pipe stop %s, or wait for it to end",
			e.Dir, filepath.Join(e.Dir, LockFile), e.Dir)
	}
	return fmt.Sprintf("run directory %s is in use by pid %d on host %s (started %s); stop it with pipe stop %s (or Ctrl-C in its terminal), or wait for it to end",
		e.Dir, e.PID, e.Host, e.Started.UTC().Format(time.RFC3339), e.Dir)
}

// Lock creates dir if needed and takes the exclusive lock on dir/lock
// without waiting. If another live process holds it, the error is a
// *BusyError naming that process. The lock is held until Release or the
// process's death. Two Locks of one directory in one process also exclude
// each other.
func Lock(dir string) (*Locked, error) {
	if err := CheckDir(dir); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("run directory: %w", err)
	}
	path := filepath.Join(dir, LockFile)
	f, err := commitlog.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644) // close-on-exec: children do not inherit it
	if err != nil {
		return nil, fmt.Errorf("run directory lock: %w", err)
	}
	if err := flock(f, unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, busy(dir, path)
		}
		return nil, fmt.Errorf("run directory lock %s: %w", path, err)
	}
	l := &Locked{Dir: dir, f: f}
	prev, ok := readLockInfo(f)
	switch {
	case ok && prev.PID != 0 && prev.Released.IsZero():
		l.TookOver = tookOver(prev)
	case !ok && lockHasBytes(f):
		// Damaged: whether the last run ended cleanly cannot be told, so
		// it is taken as one that did not (its outputs are checked whole).
		l.TookOver = "the lock file of the previous run is damaged, so whether it finished cleanly is unknown; resuming from its committed state, checked whole"
	}
	host, _ := os.Hostname()
	l.info = lockInfo{PID: os.Getpid(), Host: host, Started: time.Now().UTC().Truncate(time.Second)}
	if err := l.write(); err != nil {
		_ = flock(f, unix.LOCK_UN)
		f.Close()
		return nil, fmt.Errorf("run directory lock %s: %w", path, err)
	}
	return l, nil
}

// Release writes "released" into the lock file (which stays) and unlocks.
// Calling it again does nothing.
func (l *Locked) Release() error {
	if l == nil || l.f == nil {
		return nil
	}
	f := l.f
	l.f = nil
	l.info.Released = time.Now().UTC().Truncate(time.Second)
	werr := l.writeTo(f)
	uerr := flock(f, unix.LOCK_UN)
	cerr := f.Close()
	if err := errors.Join(werr, uerr, cerr); err != nil {
		return fmt.Errorf("run directory lock %s: %w", filepath.Join(l.Dir, LockFile), err)
	}
	return nil
}

func (l *Locked) write() error { return l.writeTo(l.f) }

func (l *Locked) writeTo(f *os.File) error {
	b, _ := json.Marshal(l.info)
	b = append(b, '\n')
	if err := f.Truncate(0); err != nil {
		return err
	}
	if _, err := f.WriteAt(b, 0); err != nil {
		return err
	}
	return f.Sync()
}

func tookOver(prev lockInfo) string {
	who := fmt.Sprintf("pid %d", prev.PID)
	if host, _ := os.Hostname(); prev.Host != "" && prev.Host != host {
		who += " on host " + prev.Host
	}
	if !prev.Started.IsZero() {
		who += ", started " + prev.Started.UTC().Format(time.RFC3339)
	}
	return fmt.Sprintf("previous run (%s) did not finish cleanly; resuming from its committed state", who)
}

// busy reads the holder's lock file for the error. The holder writes it just
// after taking the lock, so an empty or partial file is read again briefly.
func busy(dir, path string) error {
	e := &BusyError{Dir: dir}
	for i := 0; i < 20; i++ {
		if f, err := os.Open(path); err == nil {
			info, ok := readLockInfo(f)
			f.Close()
			if ok && info.PID != 0 && info.Released.IsZero() {
				e.PID, e.Host, e.Started = info.PID, info.Host, info.Started
				return e
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	return e
}

func lockHasBytes(f *os.File) bool {
	st, err := f.Stat()
	return err == nil && st.Size() > 0
}

func readLockInfo(f *os.File) (lockInfo, bool) {
	var info lockInfo
	b := make([]byte, 4096)
	n, _ := f.ReadAt(b, 0)
	if n == 0 || json.Unmarshal(b[:n], &info) != nil {
		return lockInfo{}, false
	}
	return info, true
}

func flock(f *os.File, how int) error {
	for {
		err := unix.Flock(int(f.Fd()), how)
		if err != unix.EINTR {
			return err
		}
	}
}
