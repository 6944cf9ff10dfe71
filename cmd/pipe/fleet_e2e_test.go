//go:build e2e

package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pipe-dev/pipe/internal/testrig/testenv"
)

// fleetRig runs a pipeline whose generate stage launches its servers:
// pipe sim processes standing in for SGLang, each marked in its
// environment so that /proc tells which processes are this test's.
type fleetRig struct {
	t        *testing.T
	bin, dir string
	marker   string
	prompts  int
}

func newFleetRig(t *testing.T, prompts int, command string, count int, keys ...string) *fleetRig {
	dir := t.TempDir()
	r := &fleetRig{t: t, bin: testenv.PipeBinary(t), dir: dir, marker: "PIPE_TEST_FLEET=" + dir, prompts: prompts}
	var b bytes.Buffer
	for i := range prompts {
		fmt.Fprintf(&b, "{\"id\": \"p%05d\", \"prompt\": \"Question %d\"}\n", i, i)
	}
	os.WriteFile(filepath.Join(dir, "p.jsonl"), b.Bytes(), 0o644)
	port := testenv.LaunchPorts(t, count)
	cmd := strings.ReplaceAll(command, "{bin}", r.bin)
	os.WriteFile(filepath.Join(dir, "f.toml"), []byte(fmt.Sprintf(`[pipeline]
name    = "f"
run_dir = "run"

[[stage]]
id   = "prompts"
kind = "read-prompts"
path = "p.jsonl"

[[stage]]
id    = "todo"
kind  = "dedupe-against-progress"
input = "prompts"

[[stage]]
id                = "gen"
kind              = "generate"
input             = "todo"
concurrency       = 8
max_output_tokens = 256

[[stage.servers]]
launch        = %q
count         = %d
port          = %d
%s
env           = { PIPE_TEST_FLEET = %q }
%s

[[stage]]
id    = "out"
kind  = "write-jsonl"
input = "gen"
path  = "out.jsonl"
`, cmd, count, port, readyKey(keys), dir, strings.Join(keys, "\n"))), 0o644)
	return r
}

// readyKey is the launch table's ready_timeout: 30 s unless keys set it.
func readyKey(keys []string) string {
	for _, k := range keys {
		if strings.HasPrefix(k, "ready_timeout") {
			return ""
		}
	}
	return `ready_timeout = "30s"`
}

func (r *fleetRig) start(extra ...string) (*exec.Cmd, *syncBuffer) {
	out := &syncBuffer{}
	cmd := exec.Command(r.bin, append([]string{"run", filepath.Join(r.dir, "f.toml"), "--commit-every", "300ms"}, extra...)...)
	cmd.Dir = r.dir
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		r.t.Fatal(err)
	}
	return cmd, out
}

// processes are the live processes of this test's servers (guards,
// shells, sims), read from /proc.
func (r *fleetRig) processes() []string {
	var out []string
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		env, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if !bytes.Contains(env, []byte(r.marker+"\x00")) {
			continue
		}
		stat, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if i := bytes.LastIndexByte(stat, ')'); i > 0 && bytes.HasPrefix(bytes.TrimSpace(stat[i+1:]), []byte("Z")) {
			continue
		}
		cmdline, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		out = append(out, e.Name()+" "+string(bytes.ReplaceAll(cmdline, []byte{0}, []byte{' '})))
	}
	return out
}

func (r *fleetRig) nothingLeft(within time.Duration, after string) {
	r.t.Helper()
	deadline := time.Now().Add(within)
	for len(r.processes()) > 0 {
		if time.Now().After(deadline) {
			r.t.Fatalf("%s: processes of the servers still running after %s:\n%s", after, within, strings.Join(r.processes(), "\n"))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// everyIDOnce: out.jsonl holds each prompt's id exactly once.
func (r *fleetRig) everyIDOnce() {
	r.t.Helper()
	seen := map[string]int{}
	for _, rec := range readJSONL(r.t, filepath.Join(r.dir, "out.jsonl")) {
		seen[rec["id"].(string)]++
	}
	if len(seen) != r.prompts {
		r.t.Fatalf("%d ids in out.jsonl, want %d", len(seen), r.prompts)
	}
	for id, n := range seen {
		if n != 1 {
			r.t.Fatalf("%s is in out.jsonl %d times", id, n)
		}
	}
}

// The first start of server 0 dies by SIGKILL two seconds in (a scheduler
// crash); pipe starts it again, the run finishes with every id exactly
// once, the crash is named on the terminal, in run.log and in the
// summary's figures, and no process of any server is left after it.
func TestLaunchedServerCrashMidRun(t *testing.T) {
	r := newFleetRig(t, 400, `sh -c 'test {index} != 0 || test -e crashed || { touch crashed; (sleep 2; kill -9 $$) & }; exec {bin} sim --listen 127.0.0.1:{port} --speed 20 --think-mean 60 --answer-mean 30'`, 2)
	cmd, out := r.start()
	if err := waitDump(t, cmd, out, 3*time.Minute); err != nil {
		t.Fatalf("run: %v\n%s", err, out)
	}
	r.everyIDOnce()
	text := out.String()
	for _, want := range []string{"server gen-0-0: exited (signal killed) though nobody asked it to: a crash", "server gen-0-0: restarting in", "launched crashes 1"} {
		if !strings.Contains(text, want) {
			t.Errorf("the run does not say %q:\n%s", want, text)
		}
	}
	if log, _ := os.ReadFile(filepath.Join(r.dir, "run", "run.log")); !bytes.Contains(log, []byte("a crash")) {
		t.Errorf("run.log does not name the crash")
	}
	if _, err := os.Stat(filepath.Join(r.dir, "run", "servers", "gen-0-0.log")); err != nil {
		t.Errorf("no server log: %v", err)
	}
	r.nothingLeft(5*time.Second, "after the run")
}

// pipe stop ends the run and every server process; kill -9 of pipe ends
// them too (each guard sees pipe gone), and the next start launches them
// again and finishes with every id exactly once.
func TestLaunchedServersEndWithTheRun(t *testing.T) {
	r := newFleetRig(t, 600, `{bin} sim --listen 127.0.0.1:{port} --speed 2 --think-mean 60 --answer-mean 30`, 2)
	waitReady := func(out *syncBuffer) {
		deadline := time.Now().Add(60 * time.Second)
		for strings.Count(out.String(), ": ready: a one-token generation answered") < 2 {
			if time.Now().After(deadline) {
				t.Fatalf("the servers never got ready:\n%s", out)
			}
			time.Sleep(50 * time.Millisecond)
		}
		time.Sleep(time.Second)
	}
	cmd, out := r.start()
	waitReady(out)
	if n := len(r.processes()); n < 4 {
		t.Fatalf("%d server processes while running, want guards and sims: %v", n, r.processes())
	}
	stop := exec.Command(r.bin, "stop", filepath.Join(r.dir, "run"))
	if b, err := stop.CombinedOutput(); err != nil {
		t.Fatalf("pipe stop: %v\n%s", err, b)
	}
	waitDump(t, cmd, out, time.Minute)
	r.nothingLeft(5*time.Second, "after pipe stop")

	cmd, out = r.start()
	waitReady(out)
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	r.nothingLeft(15*time.Second, "after kill -9 of pipe")

	// Faster servers for the rest (servers are operational: the file's
	// change is taken on a resume).
	file := filepath.Join(r.dir, "f.toml")
	b, _ := os.ReadFile(file)
	os.WriteFile(file, bytes.Replace(b, []byte("--speed 2 "), []byte("--speed 50 "), 1), 0o644)
	cmd, out = r.start()
	if err := waitDump(t, cmd, out, 3*time.Minute); err != nil {
		t.Fatalf("the last start: %v\n%s", err, out)
	}
	r.everyIDOnce()
	r.nothingLeft(5*time.Second, "after the run")
}

// Five servers, each failing its first start its own way: killed by a
// signal (a crash), exiting 0 unasked, hanging (stopped: its probes go
// unanswered), printing CUDA out of memory while it serves, and never
// answering a generation. Each is ended and started again; the run ends
// with every id exactly once; pipe report names every event with the
// server's last lines, and the timeline holds them; nothing is left.
func TestLaunchedServersEachFailure(t *testing.T) {
	sim := "{bin} sim --listen 127.0.0.1:{port} --speed 4 --think-mean 60 --answer-mean 30"
	cmd := `sh -c 'f=first-{index}; test -e $f && exec ` + sim + `; touch $f; case {index} in
0) (sleep 2; kill -9 $$) & exec ` + sim + `;;
1) ` + sim + ` & p=$!; sleep 2; kill $p; wait $p; exit 0;;
2) ` + sim + ` & p=$!; sleep 2; kill -STOP $p; wait $p;;
3) ` + sim + ` & p=$!; sleep 2; echo "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 GiB"; wait $p;;
4) echo loading; exec sleep 120;;
esac'`
	// Enough prompts that the run outlasts gen-0-4's ready timeout and
	// its restart's backoff (about 15 s) on a fast machine too: with 500
	// the run could end before the second start.
	r := newFleetRig(t, 1500, cmd, 5, `probe_every = "300ms"`, `probe_timeout = "1s"`, `stop_grace = "2s"`, `restarts = 2`, `ready_timeout = "5s"`)
	c, out := r.start()
	if err := waitDump(t, c, out, 4*time.Minute); err != nil {
		t.Fatalf("run: %v\n%s", err, out)
	}
	r.everyIDOnce()
	r.nothingLeft(5*time.Second, "after the run")
	rep, err := exec.Command(r.bin, "report", filepath.Join(r.dir, "run")).CombinedOutput()
	if err != nil {
		t.Fatalf("pipe report: %v\n%s", err, rep)
	}
	for _, want := range []string{
		"gen-0-0 (start 1): exited (signal killed) though nobody asked it to: a crash",
		"gen-0-1 (start 1): exited (status 0) though nobody asked it to: a crash",
		"gen-0-2 (start 1): hung: 3 one-token generations in a row went unanswered",
		`gen-0-3 (start 1): printed "torch.OutOfMemoryError: CUDA out of memory.`,
		"gen-0-4 (start 1): no generation answered within 5s (ready_timeout)",
		"| loading",
		"gen-0-0: 2 starts, 1 crash", "gen-0-2: 2 starts, 1 hang", "gen-0-4: 2 starts, 1 start never ready",
	} {
		if !strings.Contains(string(rep), want) {
			t.Errorf("pipe report does not say %q:\n%s", want, rep)
		}
	}
	tl, _ := os.ReadFile(filepath.Join(r.dir, "run", "timeline.jsonl"))
	for _, kind := range []string{"crash", "hang", "fatal_line", "never_ready"} {
		if !bytes.Contains(tl, []byte(`"kind":"`+kind+`"`)) {
			t.Errorf("the timeline has no %s event", kind)
		}
	}
	t.Logf("report:\n%s", rep)
}

// A launched server whose answers turn empty (its process and probes
// fine) trips the quality breaker: it is restarted, the run finishes with
// every id once, each row records the start that made it, and the rows of
// the bad start are the ones a filter on completion.server_start finds.
func TestLaunchedServerBreakerOnEmptyAnswers(t *testing.T) {
	r, out := runFirstStartBad(t, "", "--fault empty-answer:1")
	if !strings.Contains(out.String(), "server gen-0-1 (start 1): ") || !strings.Contains(out.String(), "answers are tiny (under 8 characters) against") {
		t.Fatalf("no breaker trip named:\n%s", out)
	}
	if !strings.Contains(out.String(), "server gen-0-0 (start 1): its first 16 completions decode ") {
		t.Errorf("no first-completions speed said for gen-0-0:\n%s", out)
	}
	starts := map[string]int{}
	emptyOfBad := 0
	for _, rec := range readJSONL(t, filepath.Join(r.dir, "out.jsonl")) {
		comp := rec["completion"].(map[string]any)
		start, _ := comp["server_start"].(float64)
		key := fmt.Sprintf("%v#%v", comp["server"], start)
		starts[key]++
		if start == 1 && strings.TrimSpace(comp["answer"].(string)) == "" {
			emptyOfBad++
		}
	}
	if len(starts) != 3 || emptyOfBad == 0 {
		t.Errorf("rows by server and start: %v (%d empty answers from a first start)", starts, emptyOfBad)
	}
	rep, _ := exec.Command(r.bin, "report", filepath.Join(r.dir, "run")).CombinedOutput()
	if !strings.Contains(string(rep), "gen-0-1: 2 starts, 1 breaker trip") {
		t.Errorf("pipe report:\n%s", rep)
	}
	t.Logf("rows by server and start: %v", starts)
}

// pipe fleet up, then pipe plan and pipe run: each server is started
// once, both commands use the servers kept up and leave them up; pipe
// fleet down ends every process; kill -9 of the holder ends them too.
func TestFleetUpServesPlanAndRun(t *testing.T) {
	r := newFleetRig(t, 300, `{bin} sim --listen 127.0.0.1:{port} --speed 50 --think-mean 60 --answer-mean 30`, 2)
	file := filepath.Join(r.dir, "f.toml")
	pipe := func(args ...string) string {
		t.Helper()
		c := exec.Command(r.bin, args...)
		c.Dir = r.dir
		out, err := c.CombinedOutput()
		if err != nil {
			t.Fatalf("pipe %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	up := pipe("fleet", "up", file)
	if !strings.Contains(up, "fleet up for") || strings.Count(up, ": ready: a one-token generation answered") != 2 {
		t.Fatalf("pipe fleet up:\n%s", up)
	}
	plan := pipe("plan", file, "--sample", "40")
	run := pipe("run", file)
	for name, out := range map[string]string{"plan": plan, "run": run} {
		if !strings.Contains(out, "using the 2 servers kept up by pipe fleet up") || strings.Contains(out, ": started (pid") {
			t.Errorf("pipe %s did not use the fleet kept up:\n%s", name, out)
		}
	}
	r.everyIDOnce()
	status := pipe("fleet", "status", file)
	if strings.Count(status, "ready, 1 starts") != 2 {
		t.Errorf("each server should have started once:\n%s", status)
	}
	log, _ := os.ReadFile(filepath.Join(r.dir, "run", "servers", "fleet.log"))
	if n := strings.Count(string(log), ": started (pid"); n != 2 {
		t.Errorf("%d server starts in fleet.log, want 2:\n%s", n, log)
	}
	down := pipe("fleet", "down", file)
	if !strings.Contains(down, "2 servers ended") {
		t.Errorf("pipe fleet down:\n%s", down)
	}
	r.nothingLeft(5*time.Second, "after pipe fleet down")

	// The holder killed with -9: its guards end the servers.
	pipe("fleet", "up", file)
	h, err := os.ReadFile(filepath.Join(r.dir, "run", "servers", "fleet.json"))
	if err != nil {
		t.Fatal(err)
	}
	var held struct{ PID int }
	json.Unmarshal(h, &held)
	syscall.Kill(held.PID, syscall.SIGKILL)
	r.nothingLeft(15*time.Second, "after kill -9 of the fleet's holder")
	if out := pipe("fleet", "status", file); !strings.Contains(out, "no fleet is up") {
		t.Errorf("status after the holder died:\n%s", out)
	}
}

// A launched server whose speculative acceptance collapses (its answers
// and health fine) trips the breaker against its own first completions:
// restarted, the run finishes with every id once, and the report names it.
func TestLaunchedServerBreakerOnAcceptanceCollapse(t *testing.T) {
	r, out := runFirstStartBad(t, " --spec-accept 3.6", "--fault spec-collapse@120req")
	if !strings.Contains(out.String(), "server gen-0-1 (start 1): its speculative acceptance fell to ") {
		t.Fatalf("no acceptance breaker named:\n%s", out)
	}
	if !strings.Contains(out.String(), "server gen-0-1 (start 1): its first 16 completions decode ") || !strings.Contains(out.String(), "speculative acceptance 3.") {
		t.Errorf("the first completions' acceptance is not said:\n%s", out)
	}
	rep, _ := exec.Command(r.bin, "report", filepath.Join(r.dir, "run")).CombinedOutput()
	if !strings.Contains(string(rep), "gen-0-1: 2 starts, 1 breaker trip") {
		t.Errorf("pipe report:\n%s", rep)
	}
}

// A launch command that cannot work (a typo) ends the same way at every
// start: it is given up after three such starts, not restarts times with
// backoff, and the run fails at once naming the command's own error,
// instead of waiting ready_timeout for a server.
func TestLaunchedServerCommandTypo(t *testing.T) {
	r := newFleetRig(t, 20, "nosuch-sglang --port {port}", 2, `backoff = "100ms"`)
	start := time.Now()
	c, out := r.start()
	err := waitDump(t, c, out, time.Minute)
	if err == nil || exitCode(c) != 1 {
		t.Fatalf("run: %v (exit %d), want exit 1\n%s", err, exitCode(c), out)
	}
	text := out.String()
	for _, want := range []string{"every launched server was given up", "its last 3 starts ended the same way before any generation answered", "nosuch-sglang: not found"} {
		if !strings.Contains(text, want) {
			t.Errorf("the run does not say %q:\n%s", want, text)
		}
	}
	if d := time.Since(start); d > 20*time.Second {
		t.Errorf("the run took %s to fail", d)
	}
	r.nothingLeft(5*time.Second, "after the run")
}

// runFirstStartBad runs 800 prompts on two launched sims (with simFlags)
// of which server 1's first start has badFlags too, and checks every id
// landed once and nothing is left.
func runFirstStartBad(t *testing.T, simFlags, badFlags string) (*fleetRig, *syncBuffer) {
	t.Helper()
	sim := "{bin} sim --listen 127.0.0.1:{port} --speed 10 --think-mean 60 --answer-mean 40" + simFlags
	cmd := `sh -c 'if test {index} = 1 && ! test -e bad; then touch bad; exec ` + sim + " " + badFlags + `; fi; exec ` + sim + `'`
	r := newFleetRig(t, 800, cmd, 2)
	c, out := r.start()
	if err := waitDump(t, c, out, 4*time.Minute); err != nil {
		t.Fatalf("run: %v\n%s", err, out)
	}
	r.everyIDOnce()
	r.nothingLeft(5*time.Second, "after the run")
	return r, out
}
