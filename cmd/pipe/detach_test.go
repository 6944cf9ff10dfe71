package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pipe-dev/pipe/cmd/pipe/internal/cmdline"
	"github.com/pipe-dev/pipe/pipeline/commitlog"
	"github.com/pipe-dev/pipe/pipeline/rundir"
)

// bgRig is a pipeline against a `pipe sim` process, run by real `pipe`
// processes the way a user starts them from a shell: read-prompts →
// dedupe-against-progress → generate → write-jsonl.
type bgRig struct {
	t       *testing.T
	bin     string
	dir     string // holds p.toml, prompts.jsonl, run/, out.jsonl
	prompts int
}

func (r *bgRig) write(name, data string) {
	r.t.Helper()
	if err := os.WriteFile(filepath.Join(r.dir, name), []byte(data), 0o644); err != nil {
		r.t.Fatal(err)
	}
}

func (r *bgRig) runDir() string { return filepath.Join(r.dir, "run") }

// pipe runs `pipe ARGS` in the rig's directory to its end.
func (r *bgRig) pipe(args ...string) (stdout, stderr string, code int) {
	r.t.Helper()
	cmd := exec.Command(r.bin, args...)
	cmd.Dir = r.dir
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if _, ok := err.(*exec.ExitError); err != nil && !ok {
		r.t.Fatal(err)
	}
	return out.String(), errb.String(), cmd.ProcessState.ExitCode()
}

// waitState waits until status.json says the run ended in state and its
// lock is released.
func (r *bgRig) waitState(limit time.Duration, states ...string) string {
	r.t.Helper()
	deadline := time.Now().Add(limit)
	for {
		// The lock first: once it is free, the state read after it is the
		// last one the run wrote (read before, it could predate the end).
		h, err := rundir.ReadHolder(r.runDir())
		st := writtenState(r.runDir())
		if err == nil && (h == nil || !h.Alive) {
			for _, s := range states {
				if st == s {
					return st
				}
			}
			r.t.Fatalf("the run exited in state %q, want %v; detached.log:\n%s", st, states, r.detachedLog())
		}
		if time.Now().After(deadline) {
			r.t.Fatalf("the run did not end within %s (state %q); detached.log:\n%s", limit, st, r.detachedLog())
		}
		time.Sleep(50 * time.Millisecond) // polling for a condition, not timing
	}
}

// journaled is how many completions gen's journal holds (every segment).
func (r *bgRig) journaled() int {
	n := 0
	for _, seg := range commitlog.JournalFiles(filepath.Join(r.runDir(), "journal"), "gen") {
		ids, _ := commitlog.ReadIDs(seg)
		n += len(ids)
	}
	return n
}

// stageIn is what status.json says stage id took in so far.
func (r *bgRig) stageIn(id string) int64 {
	var st struct {
		Stages []struct {
			ID string
			In int64
		}
	}
	data, _ := os.ReadFile(filepath.Join(r.runDir(), "status.json"))
	json.Unmarshal(data, &st)
	for _, s := range st.Stages {
		if s.ID == id {
			return s.In
		}
	}
	return 0
}

func (r *bgRig) detachedLog() string {
	data, _ := os.ReadFile(filepath.Join(r.runDir(), detachedLog))
	return string(data)
}

// outIDs counts each id in the committed part of out.jsonl.
func (r *bgRig) outIDs() map[string]int {
	r.t.Helper()
	ids := map[string]int{}
	for _, rec := range readJSONL(r.t, filepath.Join(r.dir, "out.jsonl")) {
		ids[rec["id"].(string)]++
	}
	return ids
}

var backgroundPID = regexp.MustCompile(`running in the background as pid (\d+)`)

// detach starts the run with `sh -c "pipe run --detach …"` in a new session
// (as a login shell over SSH is) and returns the detached run's pid once
// the shell has exited.
func (r *bgRig) detach(extra ...string) (pid, shellSession int) {
	r.t.Helper()
	args := append([]string{r.bin, "run", "--detach", "p.toml"}, extra...)
	sh := exec.Command("sh", "-c", cmdline.Join(args)+"; echo shell exits")
	sh.Dir = r.dir
	sh.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	out, err := sh.CombinedOutput()
	if err != nil {
		r.t.Fatalf("pipe run --detach: %v\n%s", err, out)
	}
	m := backgroundPID.FindStringSubmatch(string(out))
	if m == nil || !strings.HasSuffix(string(out), "shell exits\n") {
		r.t.Fatalf("pipe run --detach printed:\n%s", out)
	}
	pid, _ = strconv.Atoi(m[1])
	return pid, sh.Process.Pid // the shell led its session
}
