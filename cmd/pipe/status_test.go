package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pipe-dev/pipe/pipeline/rundir"
)

// A status.json written by pipe run before its schema moved to
// pipeline/rundir (that package's testdata, every field set) reads with
// the generation's figures typed, writes back to the same bytes, and
// shows in pipe status: the process gone (no lock here), the fleet's
// servers, the warning.
func TestStatusFixtureReadsTyped(t *testing.T) {
	st, want := readFixture(t, "status.json")
	f := st.Doc.Fleet
	if f == nil || f.Stage != "gen" || f.Capacity != 48 || len(f.Servers) != 2 || f.Servers[0].Errors["timeout"] != 2 || f.Tokens1m != 100.5 {
		t.Fatalf("generation: %+v", f)
	}
	if st.State != stateGone || st.Alive {
		t.Errorf("state %q, alive %v; want %q (no process holds the directory)", st.State, st.Alive, stateGone)
	}
	writesAgain(t, st, want)
	var b strings.Builder
	printStatus(&b, st)
	for _, s := range []string{"process gone", "pid 4242 on gpu-node-7", "h2:30000", "server h2:30000 ejected", "900 ids (100 before this run)"} {
		if !strings.Contains(b.String(), s) {
			t.Errorf("pipe status shows no %q:\n%s", s, b.String())
		}
	}
	b.Reset()
	if err := printStatusJSON(&b, st); err != nil {
		t.Fatal(err)
	}
	var raw map[string]any
	if err := json.Unmarshal([]byte(b.String()), &raw); err != nil {
		t.Fatal(err)
	}
	if raw["state"] != stateGone || raw["state_written"] != stateDraining || raw["alive"] != false || raw["generation"] == nil {
		t.Errorf("pipe status --json: %s", b.String())
	}
}

// A whole run's status.json from before (a sim run of 21f06c7): the
// generation's servers typed, the same bytes written again, and pipe
// status shows the stages and the fleet.
func TestStatusOfAnEarlierRunReadsTyped(t *testing.T) {
	st, want := readFixture(t, "status-sim-run.json")
	if f := st.Doc.Fleet; f == nil || f.Stage != "gen" || len(f.Servers) != 2 || f.Tokens == 0 || f.Servers[0].Completions == 0 {
		t.Fatalf("generation: %+v", f)
	}
	if st.State != stateFinished || len(st.Doc.Stages) != 5 || st.Doc.Stages[3].Kind != "validate-thinking" || st.Doc.Input == nil || !st.Doc.Input.Complete {
		t.Errorf("status: %+v", st.Doc)
	}
	writesAgain(t, st, want)
	var b strings.Builder
	printStatus(&b, st)
	for _, s := range []string{"state      finished", "finished   40 ids", "check    validate-thinking", "servers 2 of 2"} {
		if !strings.Contains(b.String(), s) {
			t.Errorf("pipe status shows no %q:\n%s", s, b.String())
		}
	}
}

// readFixture reads pipeline/rundir/testdata/NAME as a run directory's
// status.json.
func readFixture(t *testing.T, name string) (*runStatus, []byte) {
	t.Helper()
	want, err := os.ReadFile(filepath.Join("..", "..", "pipeline", "rundir", "testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, rundir.StatusFile), want, 0o644); err != nil {
		t.Fatal(err)
	}
	st, err := readStatus(dir)
	if err != nil {
		t.Fatal(err)
	}
	return st, want
}

// writesAgain: the status read, written by pipe run's type, is the bytes
// read.
func writesAgain(t *testing.T, st *runStatus, want []byte) {
	t.Helper()
	out := t.TempDir()
	doc := st.Doc
	doc.Raw = nil
	if err := doc.Write(out); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(filepath.Join(out, rundir.StatusFile)); !bytes.Equal(got, want) {
		t.Errorf("written again:\n%s\nwant:\n%s", got, want)
	}
}

// pipe inspect reads the lock through rundir.ReadHolder: held by this
// process, running; a lock file naming a live pid that holds no lock (a
// pid reused after a crash), gone; released, free.
func TestInspectLockThroughHolder(t *testing.T) {
	dir := t.TempDir()
	l, err := rundir.Lock(dir)
	if err != nil {
		t.Fatal(err)
	}
	if r := readLock(dir); r == nil || r.PID != os.Getpid() || r.Alive == nil || !*r.Alive {
		t.Errorf("held: %+v", r)
	}
	var b strings.Builder
	printRunLock(&b, readLock(dir))
	if !strings.Contains(b.String(), "running") {
		t.Errorf("held: %s", b.String())
	}
	if err := l.Release(); err != nil {
		t.Fatal(err)
	}
	if r := readLock(dir); r == nil || r.Released.IsZero() || r.Alive != nil {
		t.Errorf("released: %+v", r)
	}
	host, _ := os.Hostname()
	other := t.TempDir()
	lock := fmt.Sprintf(`{"pid":%d,"host":%q,"started":"2026-11-30T08:00:00Z"}`, os.Getpid(), host)
	if err := os.WriteFile(filepath.Join(other, rundir.LockFile), []byte(lock), 0o644); err != nil {
		t.Fatal(err)
	}
	b.Reset()
	printRunLock(&b, readLock(other))
	if !strings.Contains(b.String(), "is gone without releasing it") {
		t.Errorf("a live pid that holds no lock: %s", b.String())
	}
	if readLock(t.TempDir()) != nil {
		t.Error("no lock file: want nil")
	}
}
