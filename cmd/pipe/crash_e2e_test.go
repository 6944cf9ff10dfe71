//go:build e2e

package main

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pipe-dev/pipe/internal/testrig/testenv"
	"github.com/pipe-dev/pipe/pipeline/commitlog"
)

// newCrashRig writes the prompts and the pipeline into dir ("" for a new
// temporary directory).
func newCrashRig(t *testing.T, dir string, prompts int) *crashRig {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: skipping the crash and resume tests (real processes)")
	}
	qwen := testenv.Qwen3Dir(t)
	if dir == "" {
		dir = t.TempDir()
	}
	r := &crashRig{t: t, bin: testenv.PipeBinary(t), dir: dir, prompts: prompts}
	r.sim = testenv.StartSim(t, r.bin, 4, "--tokenizer", qwen, "--speed", "100",
		"--think-mean", "60", "--answer-mean", "30",
		"--fault", "503:0.02", "--fault", "reset:0.01", "--fault", "empty-answer:0.05")
	in := filepath.Join(r.dir, "prompts.jsonl")
	var b strings.Builder
	for i := range prompts {
		fmt.Fprintf(&b, `{"id":"p%d","messages":[{"role":"user","content":"Question %d: explain topic %d briefly."}]}`+"\n", i, i, i*7)
	}
	if err := os.WriteFile(in, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	servers, _ := json.Marshal(r.sim.URLs)
	src := fmt.Sprintf(`[pipeline]
name    = "crash"
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
concurrency       = 32
api               = "generate"
tokenizer         = %q
max_output_tokens = 1024
max_attempts      = 10
backoff_min       = "10ms"
backoff_max       = "200ms"

[[stage]]
id        = "check"
kind      = "validate-thinking"
input     = "gen"
tokenizer = %q

[[stage]]
id        = "tok"
kind      = "tokenize-and-mask"
input     = "check.accepted"
tokenizer = %q

[[stage]]
id       = "completions"
kind     = "write-arrow"
input    = "gen"
path     = "out/completions"
max_rows = 1500

[[stage]]
id    = "train"
kind  = "write-jsonl"
input = "tok"
path  = "out/train.jsonl"

[[stage]]
id    = "rejects"
kind  = "write-jsonl"
input = ["gen.rejected", "check.rejected", "tok.rejected"]
path  = "out/rejected.jsonl"
`, servers, qwen, qwen, qwen)
	r.file = filepath.Join(r.dir, "p.toml")
	if err := os.WriteFile(r.file, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	r.log = runsLog(t, "pipe-crash-runs-*.log")
	return r
}

// runsLog is a file for the output of a test's runs, removed after the
// test; a failed test logs its last 6000 bytes.
func runsLog(t *testing.T, pattern string) *os.File {
	t.Helper()
	f, err := os.CreateTemp("", pattern)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		f.Close()
		defer os.Remove(f.Name())
		if t.Failed() {
			data, _ := os.ReadFile(f.Name())
			t.Logf("runs' output (last 6000 bytes):\n%s", tail(string(data), 6000))
		}
	})
	return f
}

// exitCode is a finished command's exit code (-1 if a signal ended it).
func exitCode(cmd *exec.Cmd) int { return cmd.ProcessState.ExitCode() }

// SIGKILL at ten random moments — while servers answer, while outputs
// commit, while the journal syncs — then the same command to the end:
// every id exactly once, nothing torn, no completion generated twice.
func TestKillNineAnywhereThenResume(t *testing.T) {
	r := newCrashRig(t, "", 20000)
	seed := uint64(time.Now().UnixNano())
	rng := rand.New(rand.NewPCG(seed, 7))
	t.Logf("seed %d", seed)
	var audit lossAudit
	var inFlight int64
	for k := range killCount() {
		cmd := r.start()
		time.Sleep(time.Duration(200+rng.IntN(800)) * time.Millisecond)
		n := r.inFlight()
		inFlight += n
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		err := cmd.Wait()
		if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() {
			t.Fatalf("kill %d: the run ended before it was killed (%v); make the test's run longer", k+1, err)
		}
		fmt.Fprintf(r.log, "=== killed (SIGKILL) with %d requests in flight\n", n)
		r.afterKill(&audit, k+1)
	}
	r.finish()
	r.check()
	total := r.sim.Metric(t, "pipe_sim:completed_requests_total")
	t.Logf("%d prompts; servers answered %d generation requests in full (probes included); %d answers lost in %d kills (servers held %d requests at the kills)",
		r.prompts, total, audit.lost, killCount(), inFlight)
	if j := r.journalLines(); j > int64(r.prompts) {
		t.Fatalf("the journal has %d completions for %d prompts", j, r.prompts)
	}
}

func killCount() int {
	if n, err := strconv.Atoi(os.Getenv("PIPE_TEST_KILLS")); err == nil {
		return n
	}
	return 10
}

// SIGTERM, as Slurm and Kubernetes send it, then SIGKILL 5 s later: the run
// commits what it processed at once, lets requests in flight finish, and
// exits 130 well before the SIGKILL; the same command then finishes it.
func TestTermThenKillThenResume(t *testing.T) {
	r := newCrashRig(t, "", 8000)
	var audit lossAudit
	for k := range 3 {
		cmd := r.start()
		time.Sleep(time.Duration(600+300*k) * time.Millisecond)
		syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		kill := time.AfterFunc(5*time.Second, func() { syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) })
		r.wait(cmd, time.Minute)
		kill.Stop()
		if code := exitCode(cmd); code != exitInterrupted {
			t.Fatalf("after SIGTERM: exit %d, want %d (committed and drained within 5s)", code, exitInterrupted)
		}
		r.afterKill(&audit, k+1)
	}
	out, _ := os.ReadFile(r.log.Name())
	if !strings.Contains(string(out), "To continue where it stopped: pipe run "+r.file) {
		t.Fatalf("the interrupted run does not say how to continue")
	}
	r.finish()
	r.check()
	if audit.lost > int64(3*len(r.sim.URLs)) {
		t.Fatalf("%d answers lost across 3 SIGTERMs: a drain must lose none (only probes may be unjournaled)", audit.lost)
	}
}

// A hang-up (the SSH session or terminal closes) does not stop a run, nor
// does a closed stdout/stderr: it finishes on its own, exit 0.
func TestHangUpDoesNotStopTheRun(t *testing.T) {
	r := newCrashRig(t, "", 4000)
	args := []string{"run", r.file, "--progress", "100ms"}
	cmd := exec.Command(r.bin, args...)
	cmd.Dir = r.dir
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 256)
	if _, err := stderr.Read(buf); err != nil { // it has started talking
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond)
	syscall.Kill(-cmd.Process.Pid, syscall.SIGHUP)
	stderr.Close() // the terminal is gone: writes to stderr now fail
	if err := r.wait(cmd, 4*time.Minute); err != nil {
		t.Fatalf("after SIGHUP and a closed stderr the run ended with %v, want exit 0", err)
	}
	r.check()
	logData, _ := os.ReadFile(filepath.Join(r.dir, "run", "run.log"))
	if !strings.Contains(string(logData), " msg=done\n") {
		t.Fatalf("run.log does not end the run:\n%s", tail(string(logData), 2000))
	}
}

// A full disk fails the run clearly and frees nothing it committed; once
// there is room, the same command finishes it.
func TestFullDiskThenResume(t *testing.T) {
	if testing.Short() {
		t.Skip("-short")
	}
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size=6m"); err != nil {
		testenv.Missing(t, "cannot mount a small tmpfs to fill ("+err.Error()+")", "the tests as root on Linux")
	}
	t.Cleanup(func() { syscall.Unmount(dir, syscall.MNT_DETACH) })
	r := newCrashRig(t, dir, 3000)
	cmd := r.start()
	err := r.wait(cmd, 2*time.Minute)
	if err == nil {
		t.Fatal("the run fit on a 6 MiB disk; make the test's output larger")
	}
	out, _ := os.ReadFile(r.log.Name())
	if !strings.Contains(string(out), "no space left on device") {
		t.Fatalf("the failure does not say the disk is full:\n%s", tail(string(out), 3000))
	}
	if code := exitCode(cmd); code != exitFailed {
		t.Fatalf("exit %d, want %d", code, exitFailed)
	}
	committed := map[string]int{}
	for _, f := range []string{"train.jsonl", "rejected.jsonl"} {
		committed[f] = len(readJSONL(t, filepath.Join(r.dir, "out", f)))
	}
	committed["completions"] = len(shardIDs(t, filepath.Join(r.dir, "out", "completions")))
	// Room again: the same command finishes, keeping what was committed.
	if err := syscall.Mount("tmpfs", dir, "tmpfs", syscall.MS_REMOUNT, "size=200m"); err != nil {
		t.Fatal(err)
	}
	r.finish()
	r.check()
	for f, n := range committed {
		got := len(shardIDs(t, filepath.Join(r.dir, "out", "completions")))
		if f != "completions" {
			got = len(readJSONL(t, filepath.Join(r.dir, "out", f)))
		}
		if got < n {
			t.Fatalf("%s had %d records after the failure and %d after the resume", f, n, got)
		}
	}
	t.Logf("committed before the disk filled: %v", committed)
}

// A disk that fills while pipe is stopped (another job's files) fails the
// next start with exit 1, the code that says "retry", as a full disk in
// the middle of a run does; once there is room the same command finishes.
func TestFullDiskAtStartIsRetried(t *testing.T) {
	if testing.Short() {
		t.Skip("-short")
	}
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size=256m"); err != nil {
		testenv.Missing(t, "cannot mount a small tmpfs to fill ("+err.Error()+")", "the tests as root on Linux")
	}
	t.Cleanup(func() { syscall.Unmount(dir, syscall.MNT_DETACH) })
	r := newCrashRig(t, dir, 20000)
	cmd := r.start()
	deadline := time.Now().Add(2 * time.Minute)
	for n, _ := commitlog.CountIDs(filepath.Join(dir, "run", "done.ids")); n < 500; n, _ = commitlog.CountIDs(filepath.Join(dir, "run", "done.ids")) {
		if time.Now().After(deadline) {
			t.Fatal("no 500 ids finished within 2 minutes")
		}
		time.Sleep(20 * time.Millisecond)
	}
	syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	cmd.Wait()

	filler := filepath.Join(dir, "filler")
	f, err := os.Create(filler)
	if err != nil {
		t.Fatal(err)
	}
	block := make([]byte, 64<<10)
	for {
		if _, err := f.Write(block); err != nil {
			break // the disk is full
		}
	}
	for _, n := range []int{4096, 1} { // the last pages too
		for {
			if _, err := f.Write(block[:n]); err != nil {
				break
			}
		}
	}
	f.Close()

	start := r.start()
	r.wait(start, time.Minute)
	out, _ := os.ReadFile(r.log.Name())
	if code := exitCode(start); code != exitFailed {
		t.Fatalf("a start on a full disk: exit %d, want %d (retry):\n%s", code, exitFailed, tail(string(out), 2000))
	}
	if !strings.Contains(string(out), "no space left on device") {
		t.Fatalf("the failed start does not say the disk is full:\n%s", tail(string(out), 2000))
	}
	os.Remove(filler)
	r.finish()
	r.check()
}
