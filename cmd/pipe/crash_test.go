package main

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
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

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/pipe-dev/pipe/internal/testrig/testenv"
	"github.com/pipe-dev/pipe/pipeline/commitlog"
	"github.com/pipe-dev/pipe/pipeline/filecommit"
	"github.com/pipe-dev/pipe/stages/arrowrow"
)

// crashRig is the full demo graph as real processes: `pipe sim` serving
// simulated servers that count and sample with the real Qwen3 tokenizer (with
// injected 503s, connection resets and empty answers), and `pipe run`
// processes started, killed and started again on one run directory.
type crashRig struct {
	t       *testing.T
	bin     string
	dir     string
	file    string // the pipeline file
	prompts int
	sim     *testenv.Sim
	log     *os.File // every run's stdout and stderr
}

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
	var err error
	if r.log, err = os.CreateTemp("", "pipe-crash-runs-*.log"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		r.log.Close()
		defer os.Remove(r.log.Name())
		if t.Failed() {
			data, _ := os.ReadFile(r.log.Name())
			t.Logf("runs' output (last 6000 bytes):\n%s", tail(string(data), 6000))
		}
	})
	return r
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[len(s)-n:]
}

// start starts `pipe run FILE` (the same command every time) in its own
// process group, as a user's shell would.
func (r *crashRig) start(extra ...string) *exec.Cmd {
	r.t.Helper()
	args := append([]string{"run", r.file, "--commit-every", "300ms", "--progress", "1s"}, extra...)
	cmd := exec.Command(r.bin, args...)
	cmd.Dir = r.dir
	cmd.Stdout, cmd.Stderr = r.log, r.log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	fmt.Fprintf(r.log, "\n=== pipe %s\n", strings.Join(args, " "))
	if err := cmd.Start(); err != nil {
		r.t.Fatal(err)
	}
	return cmd
}

// inFlight is the generation requests the servers hold now.
func (r *crashRig) inFlight() int64 {
	return r.sim.Metric(r.t, "sglang:num_running_reqs") + r.sim.Metric(r.t, "sglang:num_queue_reqs")
}

// finish runs the same command to the end and requires exit 0.
func (r *crashRig) finish() {
	r.t.Helper()
	if err := r.wait(r.start(), 4*time.Minute); err != nil {
		r.t.Fatalf("the final run: %v", err)
	}
}

// wait waits for a run to exit and returns its error (nil for exit 0).
func (r *crashRig) wait(cmd *exec.Cmd, limit time.Duration) error {
	r.t.Helper()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		return err
	case <-time.After(limit):
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-done
		r.t.Fatalf("the run did not exit within %s", limit)
		return nil
	}
}

// exitCode is a finished command's exit code (-1 if a signal ended it).
func exitCode(cmd *exec.Cmd) int { return cmd.ProcessState.ExitCode() }

// readJSONL decodes every line of a JSONL file: a torn or unreadable line
// fails the test. A missing file has no records.
func readJSONL(t *testing.T, path string) []map[string]any {
	t.Helper()
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []map[string]any
	br := bufio.NewReaderSize(f, 1<<20)
	for n := 1; ; n++ {
		line, err := br.ReadBytes('\n')
		if len(line) > 0 {
			if line[len(line)-1] != '\n' {
				t.Fatalf("%s:%d: torn last line (no newline): %.80q", path, n, line)
			}
			var rec map[string]any
			if err := json.Unmarshal(line, &rec); err != nil {
				t.Fatalf("%s:%d: unreadable: %v", path, n, err)
			}
			out = append(out, rec)
		}
		if err != nil {
			return out
		}
	}
}

// journalLines counts the completions the generation journal kept: the
// whole lines of its segments, plus the finished ids (done.ids), whose
// segments may be deleted. It fails the test if an id is in the journal
// twice: a completion journaled once is never generated again.
func (r *crashRig) journalLines() int64 {
	r.t.Helper()
	kept := map[uint64]bool{}
	done, err := commitlog.ReadIDLog(filepath.Join(r.dir, "run", "done.ids"))
	if err != nil {
		r.t.Fatal(err)
	}
	for _, h := range done {
		kept[h] = true
	}
	seen := map[string]bool{}
	for _, path := range commitlog.JournalFiles(filepath.Join(r.dir, "run", "journal"), "gen") {
		data, err := os.ReadFile(path)
		if errors.Is(err, os.ErrNotExist) {
			continue // deleted since it was listed
		}
		if err != nil {
			r.t.Fatal(err)
		}
		for _, line := range strings.SplitAfter(string(data), "\n") {
			if !strings.HasSuffix(line, "\n") {
				break // a torn last line: cut by the next run
			}
			var e struct {
				Record struct{ ID string } `json:"record"`
			}
			if err := json.Unmarshal([]byte(line), &e); err != nil {
				break // the next run cuts it too
			}
			if seen[e.Record.ID] {
				r.t.Fatalf("id %s is in the generation journal twice: it was generated again", e.Record.ID)
			}
			seen[e.Record.ID] = true
			kept[commitlog.Hash(e.Record.ID)] = true
		}
	}
	return int64(len(kept))
}

// lossAudit follows what the servers answered and what the journal kept
// across kills.
type lossAudit struct {
	completed, journaled int64 // at the last look
	lost                 int64
}

// afterKill accounts for the answers of one run: each was journaled, or
// was lost in the kill; a kill may lose at most the requests in flight
// (servers × concurrency) and each server's 1-token readiness probe.
func (r *crashRig) afterKill(a *lossAudit, k int) {
	r.t.Helper()
	c, j := r.sim.Metric(r.t, "pipe_sim:completed_requests_total"), r.journalLines()
	lost := (c - a.completed) - (j - a.journaled)
	capacity := int64(len(r.sim.URLs) * (32 + 1))
	if lost > capacity {
		r.t.Fatalf("kill %d: servers answered %d requests, the journal kept %d: %d lost, more than the %d that can be in flight",
			k, c-a.completed, j-a.journaled, lost, capacity)
	}
	a.completed, a.journaled, a.lost = c, j, a.lost+lost
}

// check verifies the end state: every prompt id is exactly once across the
// accepted and rejected outputs (and the run directory's failed records),
// every generated id exactly once in the completions output, nothing torn.
func (r *crashRig) check() {
	t := r.t
	t.Helper()
	count := func(files ...string) map[string]int {
		n := map[string]int{}
		for _, f := range files {
			for _, rec := range readJSONL(t, f) {
				n[rec["id"].(string)]++
			}
		}
		return n
	}
	out := filepath.Join(r.dir, "out")
	failed, _ := filepath.Glob(filepath.Join(r.dir, "run", "failed", "*.jsonl"))
	dead, _ := filepath.Glob(filepath.Join(r.dir, "run", "rejected", "*.jsonl"))
	final := count(append(append([]string{filepath.Join(out, "train.jsonl"), filepath.Join(out, "rejected.jsonl")}, failed...), dead...)...)
	for i := range r.prompts {
		id := fmt.Sprintf("p%d", i)
		if final[id] != 1 {
			t.Fatalf("id %s is in the accepted, rejected and failed outputs %d times, want exactly once", id, final[id])
		}
	}
	if len(final) != r.prompts {
		t.Fatalf("%d distinct ids in the outputs, want %d", len(final), r.prompts)
	}
	comps := shardIDs(t, filepath.Join(out, "completions"))
	for id, n := range comps {
		if n != 1 {
			t.Fatalf("id %s is in the completions shards %d times", id, n)
		}
	}
	if len(comps)+len(failed) < r.prompts*9/10 {
		t.Fatalf("completions.jsonl has %d ids of %d prompts", len(comps), r.prompts)
	}
}

// shardIDs counts the ids in the shards a write-arrow directory's manifest
// names, checking each shard's size and sha256 against the manifest, and
// that no other part file is there.
func shardIDs(t *testing.T, dir string) map[string]int {
	t.Helper()
	m, err := filecommit.ReadManifest(dir)
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string]int{}
	if m == nil {
		return ids
	}
	named := map[string]bool{}
	var rows int64
	for _, sh := range m.Shards {
		named[sh.Name] = true
		path := filepath.Join(dir, sh.Name)
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if sum := sha256.Sum256(data); int64(len(data)) != sh.Bytes || hex.EncodeToString(sum[:]) != sh.SHA256 {
			t.Fatalf("%s: %d bytes, sha256 %x; the manifest says %d bytes, %s", path, len(data), sum, sh.Bytes, sh.SHA256)
		}
		n := 0
		err = arrowrow.ReadFile(context.Background(), path, memory.DefaultAllocator, func(b arrow.RecordBatch) error {
			recs, err := arrowrow.Records(b)
			for _, r := range recs {
				ids[r.ID]++
				n++
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		if int64(n) != sh.Rows {
			t.Fatalf("%s has %d rows; the manifest says %d", path, n, sh.Rows)
		}
		rows += sh.Rows
	}
	if rows != m.Rows {
		t.Fatalf("%s: the manifest's shards hold %d rows, its total says %d", dir, rows, m.Rows)
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), "part-") && !named[e.Name()] {
			t.Fatalf("%s: %s is not in the manifest", dir, e.Name())
		}
	}
	return ids
}

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
