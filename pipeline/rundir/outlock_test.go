package rundir_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pipe-dev/pipe/pipeline/rundir"
)

// Two runs with different run directories and one output: the second is
// refused, naming the first's run directory and pid, and holds none of
// the outputs it did get; once the first releases, the output is free.
func TestLockOutputs(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "out", "a.jsonl"), filepath.Join(dir, "out", "train")
	first, err := rundir.LockOutputs(filepath.Join(dir, "run1"), []string{b})
	if err != nil {
		t.Fatal(err)
	}
	_, err = rundir.LockOutputs(filepath.Join(dir, "run2"), []string{a, b})
	var busy *rundir.OutputBusyError
	if !errors.As(err, &busy) || busy.PID != os.Getpid() || busy.RunDir != filepath.Join(dir, "run1") || busy.Output != b {
		t.Fatalf("second LockOutputs: %v (%+v), want an OutputBusyError naming run1", err, busy)
	}
	want := "output " + b + " is being written by the run in " + filepath.Join(dir, "run1") + " (pid "
	if !strings.HasPrefix(err.Error(), want) || !strings.HasSuffix(err.Error(), "wait for it to end, or stop it with pipe stop "+filepath.Join(dir, "run1")) {
		t.Errorf("message: %s", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "out", ".train.lock")); err != nil {
		t.Errorf("no lock file beside the output: %v", err)
	}
	// All or none: a, locked before b was refused, is free again.
	third, err := rundir.LockOutputs(filepath.Join(dir, "run3"), []string{a})
	if err != nil {
		t.Fatalf("a is still held after a refused LockOutputs: %v", err)
	}
	third.Release()
	first.Release()
	second, err := rundir.LockOutputs(filepath.Join(dir, "run2"), []string{a, b})
	if err != nil {
		t.Fatalf("after Release: %v", err)
	}
	second.Release()
	second.Release() // again: nothing
}
