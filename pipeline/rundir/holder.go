package rundir

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"
)

// Holder is what a run directory's lock says about the process that runs
// it, for `pipe status` and `pipe inspect`.
type Holder struct {
	PID      int       `json:"pid"`
	Host     string    `json:"host"`
	Started  time.Time `json:"started"`
	Released time.Time `json:"released,omitzero"`
	// Alive is true while a process holds the lock (flock), which the
	// kernel drops however the process ends; false when nobody holds it.
	// Only meaningful on the host that runs it: a lock on a network file
	// system may not be seen from elsewhere.
	Alive bool `json:"alive"`
}

// ReadHolder reads dir's lock and tests whether a live process holds it
// (by trying a shared flock without waiting, released at once). It
// returns nil, nil when the directory has no lock file (never run).
func ReadHolder(dir string) (*Holder, error) {
	f, err := os.Open(filepath.Join(dir, LockFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	info, _ := readLockInfo(f)
	h := &Holder{PID: info.PID, Host: info.Host, Started: info.Started, Released: info.Released}
	switch err := flock(f, unix.LOCK_SH|unix.LOCK_NB); {
	case errors.Is(err, unix.EWOULDBLOCK):
		h.Alive = true
	case err == nil:
		_ = flock(f, unix.LOCK_UN)
	default:
		return h, err
	}
	return h, nil
}

// Fingerprint is a short hash of the settings that define a run's data (as
// Settings returns them, or as run.json holds them): two runs with one
// fingerprint make the same data from the same prompts.
func Fingerprint(settings map[string]any) string {
	b, _ := json.Marshal(settings) // map keys sorted: stable
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:6])
}
