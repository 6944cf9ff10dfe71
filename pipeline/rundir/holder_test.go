package rundir

import (
	"os"
	"testing"
	"time"
)

// A run directory's holder is alive while its lock is held, not after.
func TestReadHolder(t *testing.T) {
	dir := t.TempDir()
	if h, err := ReadHolder(dir); h != nil || err != nil {
		t.Fatalf("never run: %+v, %v", h, err)
	}
	l, err := Lock(dir)
	if err != nil {
		t.Fatal(err)
	}
	h, err := ReadHolder(dir)
	if err != nil || h == nil || !h.Alive || h.PID != os.Getpid() || !h.Released.IsZero() {
		t.Fatalf("while held: %+v, %v", h, err)
	}
	if f, err := os.Open(dir + "/" + LockFile); err == nil {
		held, ok := heldInProcLocks(f, 0) // matched by device and inode alone
		f.Close()
		if _, err := os.Stat("/proc/locks"); err == nil && (!ok || !held) {
			t.Errorf("/proc/locks: held %v, read %v", held, ok)
		}
	}
	// Reading does not take the lock from a run starting at that moment.
	if _, err := Lock(dir); err == nil {
		t.Fatal("a second Lock succeeded while the first holds it")
	}
	if err := l.Release(); err != nil {
		t.Fatal(err)
	}
	h, err = ReadHolder(dir)
	if err != nil || h == nil || h.Alive || h.Released.IsZero() {
		t.Fatalf("after release: %+v, %v", h, err)
	}
	l2, err := Lock(dir)
	if err != nil {
		t.Fatalf("lock after reading the holder: %v", err)
	}
	l2.Release()
}

func TestFingerprint(t *testing.T) {
	a := Fingerprint(map[string]any{"gen": map[string]any{"temperature": 0.6, "kind": "generate"}})
	b := Fingerprint(map[string]any{"gen": map[string]any{"kind": "generate", "temperature": 0.6}})
	c := Fingerprint(map[string]any{"gen": map[string]any{"kind": "generate", "temperature": 0.7}})
	if a != b || a == c || len(a) != 12 {
		t.Errorf("fingerprints %s %s %s", a, b, c)
	}
}

// A run on another host (a Slurm node seen from the login node), whose lock
// cannot be seen from here, runs while its status is fresh.
func TestRemoteHolderRunsWhileItsStatusIsFresh(t *testing.T) {
	h := &Holder{PID: 7, Host: "node-17", Remote: true}
	if !h.Running(time.Now().Add(-5 * time.Second)) {
		t.Error("a remote run whose status is 5 s old is not running")
	}
	if h.Running(time.Now().Add(-time.Minute)) {
		t.Error("a remote run whose status is a minute old is running")
	}
	h.Released = time.Now()
	if h.Running(time.Now()) {
		t.Error("a remote run that released its lock is running")
	}
	var none *Holder
	if none.Running(time.Now()) {
		t.Error("no lock is running")
	}
}
