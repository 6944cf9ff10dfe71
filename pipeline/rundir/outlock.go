package rundir

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"
)

// The run directory's lock keeps two runs out of one run directory; the
// output locks keep two runs with different run directories out of one
// output: without them the second run's commits rename the first one's
// part files away under it. Each output path has a lock file beside it,
// dirname/.basename.lock (hidden, so readers of the directory such as HF
// datasets skip it), flocked while a run writes the output and naming
// that run's directory and process.

// OutputLockPath is the lock file of the output at path.
func OutputLockPath(path string) string {
	return filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+".lock")
}

// outputLockInfo is what an output's lock file holds, as JSON.
type outputLockInfo struct {
	RunDir  string    `json:"run_dir"`
	PID     int       `json:"pid"`
	Host    string    `json:"host"`
	Started time.Time `json:"started"`
}

// OutputBusyError is returned by LockOutputs when another live process
// writes one of the outputs. PID is 0 when its lock file could not be read.
type OutputBusyError struct {
	Output  string
	RunDir  string // the other run's directory
	PID     int
	Host    string
	Started time.Time
}

func (e *OutputBusyError) Error() string {
	if e.PID == 0 {
		return fmt.Sprintf("output %s is being written by another run (its lock %s does not say which); two runs must not write one output: wait for it to end, or give this run other outputs",
			e.Output, OutputLockPath(e.Output))
	}
	return fmt.Sprintf("output %s is being written by the run in %s (pid %d on host %s, started %s); two runs must not write one output: wait for it to end, or stop it with pipe stop %s",
		e.Output, e.RunDir, e.PID, e.Host, e.Started.UTC().Format(time.RFC3339), e.RunDir)
}

// OutputLocks are the outputs this process writes.
type OutputLocks struct {
	files []*os.File
}

// LockOutputs takes the lock of every output in outputs for the run in
// runDir, without waiting: all or none. If another live process holds one,
// the error is an *OutputBusyError naming its run directory and pid.
// Missing parent directories are created (the writers create them anyway).
// The locks are held until Release or the process's death; two LockOutputs
// of one output in one process also exclude each other.
func LockOutputs(runDir string, outputs []string) (*OutputLocks, error) {
	abs, err := filepath.Abs(runDir)
	if err != nil {
		abs = runDir
	}
	host, _ := os.Hostname()
	info := outputLockInfo{RunDir: abs, PID: os.Getpid(), Host: host, Started: time.Now().UTC().Truncate(time.Second)}
	b, _ := json.Marshal(info)
	l := &OutputLocks{}
	for _, out := range outputs {
		if out == "" {
			continue
		}
		path := OutputLockPath(out)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			l.Release()
			return nil, fmt.Errorf("output %s: %w", out, err)
		}
		f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
		if err != nil {
			l.Release()
			return nil, fmt.Errorf("output lock: %w", err)
		}
		if err := flock(f, unix.LOCK_EX|unix.LOCK_NB); err != nil {
			f.Close()
			l.Release()
			if errors.Is(err, unix.EWOULDBLOCK) {
				return nil, outputBusy(out, path)
			}
			return nil, fmt.Errorf("output lock %s: %w", path, err)
		}
		l.files = append(l.files, f)
		err = f.Truncate(0)
		if err == nil {
			_, err = f.WriteAt(append(b, '\n'), 0)
		}
		if err != nil {
			l.Release()
			return nil, fmt.Errorf("output lock %s: %w", path, err)
		}
	}
	return l, nil
}

// Release unlocks the outputs; the lock files stay. Calling it again does
// nothing.
func (l *OutputLocks) Release() {
	if l == nil {
		return
	}
	for _, f := range l.files {
		_ = flock(f, unix.LOCK_UN)
		f.Close()
	}
	l.files = nil
}

// outputBusy reads the holder's lock file for the error; it is written
// just after the lock is taken, so an empty one is read again briefly.
func outputBusy(out, path string) error {
	e := &OutputBusyError{Output: out}
	for range 20 {
		if b, err := os.ReadFile(path); err == nil {
			var info outputLockInfo
			if json.Unmarshal(b, &info) == nil && info.PID != 0 {
				e.RunDir, e.PID, e.Host, e.Started = info.RunDir, info.PID, info.Host, info.Started
				return e
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	return e
}

// OutputWriter is the run that writes the output at path now, or nil:
// read from /proc/locks without touching the lock (so a run starting at
// that moment is never refused), for pipe run --dry-run.
func OutputWriter(path string) *OutputBusyError {
	f, err := os.Open(OutputLockPath(path))
	if err != nil {
		return nil
	}
	defer f.Close()
	b := make([]byte, 4096)
	n, _ := f.ReadAt(b, 0)
	var info outputLockInfo
	json.Unmarshal(b[:n], &info)
	if held, ok := heldInProcLocks(f, info.PID); !ok || !held {
		return nil
	}
	return &OutputBusyError{Output: path, RunDir: info.RunDir, PID: info.PID, Host: info.Host, Started: info.Started}
}
