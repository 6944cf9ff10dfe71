package rundir

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"
)

// Holder is what a run directory's lock says about the process that took it
// last, and whether that process holds it now.
type Holder struct {
	PID      int
	Host     string
	Started  time.Time
	Released time.Time // zero unless the process released it at its end
	// Live is true when a process holds the lock now: the kernel's flock,
	// not the file's text, decides, so a killed run never looks live.
	Live bool
}

// ErrNoLock is returned by ReadHolder when dir has no lock file: no run has
// ever used it (or it is not a run directory).
var ErrNoLock = errors.New("no lock file")

// ReadHolder reads dir/lock and tests, without waiting and without holding
// it, whether a live process holds the lock. Testing takes the lock for an
// instant when it is free; a `pipe run` starting in that instant is refused
// as busy, which the user sees and retries.
func ReadHolder(dir string) (*Holder, error) {
	path := filepath.Join(dir, LockFile)
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, ErrNoLock
	}
	if err != nil {
		return nil, fmt.Errorf("run directory lock: %w", err)
	}
	defer f.Close()
	h := &Holder{}
	switch err := flock(f, unix.LOCK_SH|unix.LOCK_NB); {
	case err == nil:
		_ = flock(f, unix.LOCK_UN)
	case errors.Is(err, unix.EWOULDBLOCK):
		h.Live = true
	default:
		return nil, fmt.Errorf("run directory lock %s: %w", path, err)
	}
	// A holder writes the file just after taking the lock: read it again
	// briefly while it is empty.
	for i := 0; i < 20; i++ {
		if info, ok := readLockInfo(f); ok && info.PID != 0 {
			h.PID, h.Host, h.Started, h.Released = info.PID, info.Host, info.Started, info.Released
			return h, nil
		}
		if !h.Live {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	return h, nil
}
