//go:build e2e

package stages

import (
	"bufio"
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

// execE2EPipeline replays completions through exec running the sample
// program (paced.py runs answer_rules.py's own judge, 2 ms a record, so
// that the run lasts long enough to be killed in its middle).
const execE2EPipeline = `[pipeline]
name         = "exec-e2e"
run_dir      = "run"
max_rejected = "off"   # most answers here are made to be rejected

[[stage]]
id   = "completions"
kind = "read-completions"
path = "c.jsonl"

[[stage]]
id        = "rules"
kind      = "exec"
input     = "completions"
command   = ["python3", "paced.py"]
in_flight = 16

[[stage]]
id    = "good"
kind  = "write-jsonl"
input = "rules.accepted"
path  = "out/accepted.jsonl"

[[stage]]
id    = "bad"
kind  = "write-jsonl"
input = "rules.rejected"
path  = "out/rejected.jsonl"
`

const execPaced = `import time
import answer_rules

judge = answer_rules.judge

def paced(record):
    time.sleep(0.002)
    return judge(record)

answer_rules.judge = paced
answer_rules.main()
`

// execIndependentCheck states the sample program's rules again, apart
// from it and from pipe: the verdict each id must get.
const execIndependentCheck = `import json, sys
for line in open(sys.argv[1], encoding="utf-8"):
    r = json.loads(line)
    a = r["completion"]["answer"].strip()
    if a.lower().startswith("as an ai"):
        v = "as_an_ai"
    elif len(a) < 20:
        v = "short_answer"
    else:
        v = "accepted"
    print(r["id"], v)
`

// A replay through exec with the sample program: a kill -9 of the
// program mid-run (restarted, its records sent again), then a kill -9 of
// pipe (the program, orphaned, ends at the end of its input), then the
// same command again to the end: every id is in the output exactly once,
// with the verdict an independent check of the rules gives.
func TestExecKillNineOfProgramAndPipeThenResume(t *testing.T) {
	needPython(t)
	bin := testenv.PipeBinary(t)
	dir := t.TempDir()
	prog, err := os.ReadFile("../pipelines/answer_rules.py")
	if err != nil {
		t.Fatal(err)
	}
	answers := []string{
		"As an AI language model, I cannot see the sky.",
		"Short.",
		"   as an ai, I would say it is Rayleigh scattering.",
		"Because the air scatters blue light more than red light, the sky looks blue.",
		strings.Repeat("é", 19),
		strings.Repeat("é", 20),
		"  Nineteen chars ok  ",
	}
	const n = 3000
	var in strings.Builder
	for i := range n {
		fmt.Fprintf(&in, `{"id":"c%05d","messages":[{"role":"user","content":"Why is the sky blue? (%d)"}],"completion":{"reasoning":"think","answer":%q,"finish_reason":"stop"}}`+"\n",
			i, i, answers[i%len(answers)])
	}
	for name, content := range map[string]string{
		"c.jsonl": in.String(), "p.toml": execE2EPipeline, "answer_rules.py": string(prog), "paced.py": execPaced, "check.py": execIndependentCheck,
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	logf, err := os.Create(filepath.Join(t.TempDir(), "runs.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	t.Cleanup(func() {
		if t.Failed() {
			b, _ := os.ReadFile(logf.Name())
			r, _ := os.ReadFile(filepath.Join(dir, "run", "run.log"))
			t.Logf("pipe's output:\n%s\nrun.log:\n%s", lastBytes(b, 4000), lastBytes(r, 4000))
		}
	})
	start := func() *exec.Cmd {
		cmd := exec.Command(bin, "run", "p.toml", "--commit-every", "200ms")
		cmd.Dir = dir
		cmd.Stdout, cmd.Stderr = logf, logf
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		return cmd
	}
	committed := func() int {
		return countLines(filepath.Join(dir, "out", "accepted.jsonl")) + countLines(filepath.Join(dir, "out", "rejected.jsonl"))
	}
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		for deadline := time.Now().Add(2 * time.Minute); !cond(); time.Sleep(20 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("waited 2m for %s", what)
			}
		}
	}

	cmd := start()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var child int
	waitFor("the program and 300 records committed", func() bool {
		kids := childPIDs(cmd.Process.Pid)
		if len(kids) == 1 {
			child = kids[0]
		}
		return child != 0 && committed() >= 300
	})
	if err := syscall.Kill(child, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	var second int
	waitFor("the program started again, and 1200 records committed", func() bool {
		kids := childPIDs(cmd.Process.Pid)
		if len(kids) == 1 && kids[0] != child {
			second = kids[0]
		}
		return second != 0 && committed() >= 1200
	})
	if got := committed(); got >= n {
		t.Fatalf("the run had finished (%d records) before the kill of pipe: make it slower", got)
	}
	cmd.Process.Kill()
	<-done
	// The orphaned program reads the end of its input and exits.
	waitFor("the orphaned program to exit", func() bool { return !running(second) })

	cmd = start()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("the resumed run: %v", err)
	}
	runLog, _ := os.ReadFile(filepath.Join(dir, "run", "run.log"))
	if !strings.Contains(string(runLog), "signal: killed with") || !strings.Contains(string(runLog), "starting it again (restart 1 of at most 3)") {
		t.Errorf("the run log does not tell of the program's restart")
	}

	out, err := exec.Command("python3", filepath.Join(dir, "check.py"), filepath.Join(dir, "c.jsonl")).Output()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{}
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		id, v, _ := strings.Cut(l, " ")
		want[id] = v
	}
	got := map[string][]string{}
	for _, r := range readRecords(t, filepath.Join(dir, "out", "accepted.jsonl")) {
		got[r.ID] = append(got[r.ID], "accepted")
	}
	counts := map[string]int{}
	for _, r := range readRecords(t, filepath.Join(dir, "out", "rejected.jsonl")) {
		if r.Reject == nil || r.Reject.Stage != "rules" {
			t.Fatalf("%s: rejected without the stage's reason: %+v", r.ID, r.Reject)
		}
		got[r.ID] = append(got[r.ID], r.Reject.Reason)
	}
	if len(want) != n || len(got) != n {
		t.Errorf("%d ids checked, %d in the output; want %d each", len(want), len(got), n)
	}
	for id, w := range want {
		if g := got[id]; len(g) != 1 || g[0] != w {
			t.Errorf("%s: %q in the output, want %s exactly once", id, g, w)
		}
		counts[w]++
	}
	if counts["accepted"] == 0 || counts["as_an_ai"] == 0 || counts["short_answer"] == 0 {
		t.Errorf("verdicts %v: want each kind", counts)
	}
}

// childPIDs are the processes whose parent is pid.
func childPIDs(pid int) []int {
	var out []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces and parentheses.
		fields := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
		if len(fields) > 1 && fields[1] == strconv.Itoa(pid) {
			out = append(out, p)
		}
	}
	return out
}

// running reports whether process pid is there and not a zombie.
func running(pid int) bool {
	stat, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return false
	}
	fields := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
	return len(fields) > 0 && fields[0] != "Z"
}

// lastBytes is the end of b, for a failure's log.
func lastBytes(b []byte, n int) string {
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}

// countLines is the number of whole lines in path (0 when it is not there).
func countLines(path string) int {
	f, err := os.Open(path)
	if err != nil {
		return 0
	}
	defer f.Close()
	n := 0
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		n++
	}
	return n
}
