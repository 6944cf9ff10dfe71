package rundir

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
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

// ReadHolder reads dir's lock and tells whether a live process holds it:
// from /proc/locks where there is one (without touching the lock, so a
// `pipe run` starting at that instant is never refused), else by trying a
// shared flock without waiting, released at once. It returns nil, nil
// when the directory has no lock file (never run).
func ReadHolder(dir string) (*Holder, error) {
	f, err := os.Open(filepath.Join(dir, LockFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	h := &Holder{}
	if held, ok := heldInProcLocks(f); ok {
		h.Alive = held
	} else {
		switch err := flock(f, unix.LOCK_SH|unix.LOCK_NB); {
		case errors.Is(err, unix.EWOULDBLOCK):
			h.Alive = true
		case err == nil:
			_ = flock(f, unix.LOCK_UN)
		default:
			return nil, err
		}
	}
	// A holder writes the file just after taking the lock: read it again
	// briefly while it is empty.
	for range 20 {
		if info, ok := readLockInfo(f); ok && info.PID != 0 {
			h.PID, h.Host, h.Started, h.Released = info.PID, info.Host, info.Started, info.Released
			break
		}
		if !h.Alive {
			break
		}
		time.Sleep(10 * time.Millisecond)
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

// heldInProcLocks looks for a flock on f's file in /proc/locks (Linux);
// ok is false when that cannot be read.
func heldInProcLocks(f *os.File) (held, ok bool) {
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return false, false
	}
	data, err := os.ReadFile("/proc/locks")
	if err != nil {
		return false, false
	}
	// "1: FLOCK  ADVISORY  WRITE 4242 fd:01:1234567 0 EOF": the file is
	// MAJOR:MINOR:INODE, major and minor in hex.
	want := fmt.Sprintf(":%d", st.Ino)
	dev := fmt.Sprintf("%02x:%02x", unix.Major(uint64(st.Dev)), unix.Minor(uint64(st.Dev)))
	for _, line := range strings.Split(string(data), "\n") {
		fields := strings.Fields(line)
		if len(fields) < 6 || fields[1] != "FLOCK" { // "1: -> FLOCK …" waits, holds nothing
			continue
		}
		if file := fields[5]; strings.HasSuffix(file, want) && strings.EqualFold(strings.TrimSuffix(file, want), dev) {
			return true, true
		}
	}
	return false, true
}
