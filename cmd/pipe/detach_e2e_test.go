//go:build e2e

package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pipe-dev/pipe/internal/testrig/testenv"
	"github.com/pipe-dev/pipe/pipeline/commitlog"
	"github.com/pipe-dev/pipe/pipeline/rundir"
)

func newBGRig(t *testing.T, prompts, concurrency int, simArgs ...string) *bgRig {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: skipping detach and stop tests (real processes)")
	}
	r := &bgRig{t: t, bin: testenv.PipeBinary(t), dir: t.TempDir(), prompts: prompts}
	sim := testenv.StartSim(t, r.bin, 2, simArgs...)
	var b strings.Builder
	for i := range prompts {
		fmt.Fprintf(&b, `{"id":"p%d","prompt":"Question %d: explain topic %d briefly."}`+"\n", i, i, i*7)
	}
	r.write("prompts.jsonl", b.String())
	servers, _ := json.Marshal(sim.URLs)
	r.write("p.toml", fmt.Sprintf(`[pipeline]
run_dir = "run"

[[stage]]
id   = "prompts"
kind = "read-prompts"
path = "prompts.jsonl"

[[stage]]
id    = "todo"
kind  = "dedupe-against-progress"
input = "prompts"

[[stage]]
id                = "gen"
kind              = "generate"
input             = "todo"
servers           = %s
api               = "chat"
concurrency       = %d
max_output_tokens = 2048

[[stage]]
id    = "out"
kind  = "write-jsonl"
input = ["gen", "gen.rejected"]
path  = "out.jsonl"
`, servers, concurrency))
	return r
}

// session is the session id of pid (field 6 of /proc/PID/stat).
func session(t *testing.T, pid int) int {
	t.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(data[strings.LastIndexByte(string(data), ')')+1:]))
	sid, _ := strconv.Atoi(f[3]) // state ppid pgrp session
	return sid
}

// A detached run outlives the shell that started it, even when everything
// left in that shell's session is hung up and killed (a closed SSH
// session), and finishes the work.
func TestDetachSurvivesItsShell(t *testing.T) {
	r := newBGRig(t, 16, 2, "--speed", "20", "--think-mean", "60", "--answer-mean", "30")
	pid, shellSID := r.detach("--progress", "1s")
	if sid := session(t, pid); sid != pid || sid == shellSID {
		t.Fatalf("detached run pid %d is in session %d (the shell's was %d); want its own", pid, sid, shellSID)
	}
	// What a hang-up does to the shell's session: SIGHUP, then SIGKILL.
	syscall.Kill(-shellSID, syscall.SIGHUP)
	syscall.Kill(-shellSID, syscall.SIGKILL)
	if h, err := rundir.ReadHolder(r.runDir()); err != nil || h == nil || !h.Alive || h.PID != pid {
		t.Fatalf("right after the hang-up the run is not running (holder %+v, %v); the test needs a run that lasts longer", h, err)
	}
	r.waitState(2*time.Minute, stateFinished)
	ids := r.outIDs()
	if len(ids) != r.prompts {
		t.Fatalf("out.jsonl holds %d ids, want %d", len(ids), r.prompts)
	}
	for id, n := range ids {
		if n != 1 {
			t.Fatalf("id %s written %d times", id, n)
		}
	}
	log := r.detachedLog()
	for _, want := range []string{"pipe: running p.toml", "  out      write-jsonl", fmt.Sprintf("finished ids in %s: %d", "run", r.prompts)} {
		if !strings.Contains(log, want) {
			t.Fatalf("detached.log lacks %q:\n%s", want, log)
		}
	}
}

// pipe stop makes a detached run commit and drain: the finished ids it
// reports are in done.ids and in the output exactly once, and the same
// command continues with the rest, never redoing them.
func TestStopDrainsThenResume(t *testing.T) {
	r := newBGRig(t, 60, 2, "--speed", "10", "--think-mean", "60", "--answer-mean", "30")
	pid, _ := r.detach("--commit-every", "1h")
	deadline := time.Now().Add(time.Minute)
	for {
		// --commit-every 1h: what is committed below was committed by the stop.
		if r.journaled() >= 4 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no completions journaled within a minute:\n%s", r.detachedLog())
		}
		time.Sleep(20 * time.Millisecond) // polling for a condition, not timing
	}
	stdout, stderr, code := r.pipe("stop", "run")
	if code != 0 {
		t.Fatalf("pipe stop: exit %d\n%s%s", code, stdout, stderr)
	}
	if want := fmt.Sprintf("pipe stop: the run in run (pid %d) has exited (state stopped)\n", pid); !strings.HasPrefix(stdout, want) {
		t.Fatalf("pipe stop printed:\n%s\nwant first %q", stdout, want)
	}
	m := regexp.MustCompile(`committed: (\d+) ids finished in run/done.ids \((\d+) in this start\)`).FindStringSubmatch(stdout)
	// As it was started: --detach too.
	if m == nil || !strings.Contains(stdout, "continue with: pipe run --detach p.toml --commit-every 1h\n") {
		t.Fatalf("pipe stop printed:\n%s", stdout)
	}
	finished, _ := strconv.Atoi(m[1])
	if finished < 4 || finished >= r.prompts {
		t.Fatalf("stop committed %d ids; want the journaled ones and fewer than all %d", finished, r.prompts)
	}
	if n, err := commitlog.CountIDs(filepath.Join(r.runDir(), "done.ids")); err != nil || int(n) != finished {
		t.Fatalf("done.ids holds %d ids (%v); pipe stop said %d", n, err, finished)
	}
	ids := r.outIDs()
	if len(ids) != finished {
		t.Fatalf("out.jsonl holds %d ids; %d finished", len(ids), finished)
	}
	log := r.detachedLog()
	if !strings.Contains(log, "interrupted (in-flight requests finished and everything was committed). To continue where it stopped: pipe run --detach p.toml --commit-every 1h") ||
		!strings.Contains(log, "stopping intake and draining in-flight work; pipe stop --now run stops at once") || strings.Contains(log, "Ctrl-C") {
		t.Fatalf("detached.log:\n%s", log)
	}

	// The same command continues: the rest is done, nothing twice.
	_, stderr, code = r.pipe("run", "p.toml", "--commit-every", "1h")
	if code != 0 {
		t.Fatalf("resume: exit %d\n%s", code, stderr)
	}
	if want := fmt.Sprintf("skipped by todo: done %d", finished); !strings.Contains(stderr, want) {
		t.Fatalf("resume's summary lacks %q:\n%s", want, stderr)
	}
	ids = r.outIDs()
	if len(ids) != r.prompts {
		t.Fatalf("after the resume out.jsonl holds %d ids, want %d", len(ids), r.prompts)
	}
	for id, n := range ids {
		if n != 1 {
			t.Fatalf("id %s written %d times", id, n)
		}
	}
}

// pipe stop --now does not wait for requests in flight: with every request
// taking many seconds, the run exits at once, what was processed committed —
// also after an earlier pipe stop whose waiting was given up.
func TestStopNow(t *testing.T) {
	r := newBGRig(t, 20, 2, "--speed", "4", "--think-mean", "4000", "--answer-mean", "400")
	r.detach("--progress", "100ms")
	// Generation has taken prompts in (requests in flight, each taking
	// minutes at this speed), as status.json says.
	deadline := time.Now().Add(30 * time.Second)
	for r.stageIn("gen") == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("generation took nothing in within 30s:\n%s", r.detachedLog())
		}
		time.Sleep(20 * time.Millisecond) // polling for a condition, not timing
	}
	// A first pipe stop, whose waiting is given up (Ctrl-C): the run drains.
	sigs := make(chan os.Signal, 1)
	sigs <- syscall.SIGINT
	var errb strings.Builder
	if err := stopRun(&stdio{Out: &errb, Err: &errb, Signals: sigs}, r.runDir(), false, 10*time.Millisecond); !strings.Contains(errb.String(), "no longer waiting") || err == nil {
		t.Fatalf("first pipe stop: %v\n%s", err, errb.String())
	}
	// --now then sends the one signal still needed (a third would make the
	// run exit without its last commit).
	start := time.Now()
	stdout, stderr, code := r.pipe("stop", "--now", "run")
	if code != 0 || !strings.Contains(stdout, "has exited (state stopped)") {
		t.Fatalf("pipe stop --now: exit %d\n%s%s\ndetached.log:\n%s", code, stdout, stderr, r.detachedLog())
	}
	if took := time.Since(start); took > 20*time.Second {
		t.Fatalf("pipe stop --now took %s", took)
	} else {
		t.Logf("pipe stop --now took %s", took)
	}
	if log := r.detachedLog(); !strings.Contains(log, "stopped at once; everything processed was committed") || strings.Contains(log, "exiting without waiting") {
		t.Fatalf("detached.log:\n%s", r.detachedLog())
	}
}

// A run of another user cannot be stopped: pipe stop says so instead of
// failing obscurely.
func TestStopAnotherUsersRun(t *testing.T) {
	setpriv, err := exec.LookPath("setpriv")
	if os.Getuid() != 0 || err != nil {
		t.Skip("needs root and setpriv to act as another user")
	}
	nobody, err := user.Lookup("nobody")
	if err != nil {
		t.Skip("no user nobody")
	}
	r := newBGRig(t, 20, 1, "--speed", "0.5")
	pid, _ := r.detach()
	defer r.pipe("stop", "--now", "run")
	// nobody must be able to run the binary and read the run directory.
	bin := filepath.Join(r.dir, "pipe")
	data, err := os.ReadFile(r.bin)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, data, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{filepath.Dir(r.dir), r.dir} {
		os.Chmod(d, 0o755)
	}
	cmd := exec.Command(setpriv, "--reuid="+nobody.Uid, "--regid="+nobody.Gid, "--clear-groups", bin, "stop", "run")
	cmd.Dir = r.dir
	out, err := cmd.CombinedOutput()
	want := fmt.Sprintf("pipe stop: the run in run (pid %d) belongs to another user: permission denied to signal it; run pipe stop as that user\n", pid)
	if err == nil || string(out) != want {
		t.Fatalf("pipe stop as nobody: %v\n%s\nwant %q", err, out, want)
	}
}
