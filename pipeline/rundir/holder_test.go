package rundir

import (
	"os"
	"testing"
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
		held, ok := heldInProcLocks(f)
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
