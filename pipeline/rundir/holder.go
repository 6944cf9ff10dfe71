package rundir

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
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
	// Remote says the lock was taken on another host (a Slurm or
	// Kubernetes node seen from a login node): Alive then comes from a
	// flock probe, which a network file system may not share between
	// hosts, so callers also ask Running with the run's last status time.
	Remote bool `json:"remote,omitzero"`
}

// remoteFresh is how recent a remote run's status.json (rewritten every
// few seconds while it runs) must be for the run to count as running.
const remoteFresh = 30 * time.Second

// Running reports whether the run goes on: a live holder, or, for a run on
// another host whose lock cannot be seen from here, a status written within
// the last 30 s.
func (h *Holder) Running(statusUpdated time.Time) bool {
	if h == nil {
		return false
	}
	return h.Alive || (h.Remote && h.Released.IsZero() && time.Since(statusUpdated) < remoteFresh)
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
	fill := func() bool {
		info, ok := readLockInfo(f)
		if ok && info.PID != 0 {
			h.PID, h.Host, h.Started, h.Released = info.PID, info.Host, info.Started, info.Released
			return true
		}
		return false
	}
	filled := fill()
	host, _ := os.Hostname()
	h.Remote = h.Host != "" && host != "" && h.Host != host
	held, ok := false, false
	if !h.Remote {
		held, ok = heldInProcLocks(f, h.PID)
	}
	if ok {
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
	for i := 0; !filled && h.Alive && i < 20; i++ {
		time.Sleep(10 * time.Millisecond)
		filled = fill()
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
// ok is false when that cannot be read. The file is matched by inode and
// either its device or the holder's pid: the kernel prints the superblock's
// device, which fstat does not give on btrfs subvolumes or overlays.
func heldInProcLocks(f *os.File, pid int) (held, ok bool) {
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
		file := fields[5]
		if !strings.HasSuffix(file, want) {
			continue
		}
		if strings.EqualFold(strings.TrimSuffix(file, want), dev) || (pid != 0 && fields[4] == strconv.Itoa(pid)) {
			return true, true
		}
	}
	return false, true
}
