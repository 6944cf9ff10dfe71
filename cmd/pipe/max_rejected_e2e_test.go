//go:build e2e

package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/pipe-dev/pipe/internal/testrig/testenv"
)

// rejectsPipeline writes n prompts and a pipeline whose simulated model
// answers with faults (e.g. "empty-answer:1"): generate → validate-thinking
// → the accepted records in train.jsonl, the rejected in rejects.jsonl.
func rejectsPipeline(t *testing.T, n int, faults, pipelineKeys string) (dir, path string) {
	t.Helper()
	dir = t.TempDir()
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, `{"id":"p%d","prompt":"Question %d"}`+"\n", i, i)
	}
	if err := os.WriteFile(filepath.Join(dir, "prompts.jsonl"), []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	src := fmt.Sprintf(`[pipeline]
name    = "rejects"
run_dir = "run"
%s

[[stage]]
id   = "prompts"
kind = "read-prompts"
path = "prompts.jsonl"

[[stage]]
id                = "gen"
kind              = "generate"
input             = "prompts"
servers           = ["sim:2?speed=2000&think_mean=20&answer_mean=10&faults=%s"]
api               = "chat"
concurrency       = 48
max_output_tokens = 256

[[stage]]
id    = "check"
kind  = "validate-thinking"
input = "gen"

[[stage]]
id    = "train"
kind  = "write-jsonl"
input = "check.accepted"
path  = "out/train.jsonl"

[[stage]]
id    = "rejects"
kind  = "write-jsonl"
input = ["gen.rejected", "check.rejected"]
path  = "out/rejects.jsonl"
`, pipelineKeys, faults)
	path = filepath.Join(dir, "p.toml")
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir, path
}

func runPipe(t *testing.T, bin string, limit time.Duration, args ...string) (code int, stderr string) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	var errb syncBuffer
	cmd.Stderr = &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if err := waitCmd(cmd, limit); err != nil && cmd.ProcessState == nil {
		t.Fatalf("pipe %v: %v\n%s", args, err, errb.String())
	}
	return cmd.ProcessState.ExitCode(), errb.String()
}

func countLines(t *testing.T, path string) int {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Count(string(data), "\n")
}

// Every answer empty (the seed job's disaster, at 100%): the run stops
// within the first 2,500 records instead of grinding through 20,000,
// keeps what it committed, names the reason and how to go on, and exits 2
// (a scheduler must not retry: the same command makes the same rejects).
func TestAllAnswersEmptyStopsEarlyWithExit2(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: a real process")
	}
	bin := testenv.PipeBinary(t)
	dir, path := rejectsPipeline(t, 20000, "empty-answer:1", "")
	code, stderr := runPipe(t, bin, 3*time.Minute, "run", path)
	if code != 2 {
		t.Fatalf("exit %d, want 2\n%s", code, tail(stderr, 3000))
	}
	for _, want := range []string{
		`run failed: too many rejected records: stage "check" rejected 100% of its last 2000 records \(max_rejected = 50% of 2000\); top reasons: empty_answer 2000\.`,
		`raise \[pipeline\] max_rejected`,
		`Everything committed so far is kept`,
	} {
		if !regexp.MustCompile(want).MatchString(stderr) {
			t.Errorf("stderr lacks %q:\n%s", want, tail(stderr, 3000))
		}
	}
	rejects := countLines(t, filepath.Join(dir, "out/rejects.jsonl"))
	t.Logf("stopped after %d rejected records of 20000", rejects)
	if rejects < 2000 || rejects > 2500 {
		t.Errorf("%d records rejected and committed: want the stop at 2000, within the first 2500", rejects)
	}
	if n := countLines(t, filepath.Join(dir, "out/train.jsonl")); n != 0 {
		t.Errorf("train.jsonl has %d rows of empty answers", n)
	}
	// Everything decided was committed: the rejected ids are finished.
	ids, err := os.Stat(filepath.Join(dir, "run", "done.ids"))
	if err != nil || ids.Size() < int64(8*rejects) {
		t.Errorf("done.ids does not hold the %d rejected ids: %v", rejects, err)
	}
}

// A run too short to fill the window, whose every answer is empty, still
// does not succeed: its training output has no rows, and the exit is 2,
// naming it.
func TestEmptyTrainingOutputIsExit2(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: a real process")
	}
	bin := testenv.PipeBinary(t)
	_, path := rejectsPipeline(t, 300, "empty-answer:1", "")
	code, stderr := runPipe(t, bin, 2*time.Minute, "run", path)
	if code != 2 {
		t.Fatalf("exit %d, want 2\n%s", code, tail(stderr, 3000))
	}
	if want := `an output holds no rows: output "train" (write-jsonl) ended with 0 rows`; !strings.Contains(stderr, want) {
		t.Errorf("stderr lacks %q:\n%s", want, tail(stderr, 3000))
	}
	// max_rejected = "off" turns the early stop off, not the empty output.
	_, path = rejectsPipeline(t, 2500, "empty-answer:1", `max_rejected = "off"`)
	code, stderr = runPipe(t, bin, 2*time.Minute, "run", path)
	if code != 2 || strings.Contains(stderr, "too many rejected") || !strings.Contains(stderr, `output "train" (write-jsonl) ended with 0 rows`) {
		t.Errorf("max_rejected = off: exit %d\n%s", code, tail(stderr, 3000))
	}
}
