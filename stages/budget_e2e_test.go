//go:build e2e

package stages

import (
	"errors"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pipe-dev/pipe/internal/testrig/testenv"
)

// A budget of output tokens stops the run soon after it is reached: intake
// stops, what is in flight finishes, everything is committed and checked,
// and the run exits 4 saying how to go on. The same command with a larger
// budget continues, and every prompt ends in the output exactly once.
func TestBudgetStopsAndContinuesProcess(t *testing.T) {
	if testing.Short() {
		t.Skip("real processes")
	}
	bin := testenv.PipeBinary(t)
	srv := testenv.StartSim(t, bin, 1, "--speed", "4", "--think-mean", "60", "--answer-mean", "20")
	const n = 120
	src := "[pipeline]\nbudget = {output_tokens = 2000}\n" + genPipeline(serversKey(srv.URLs)+fastGenKeys+readyKey+"concurrency = 8\n")
	dir := writeGenRun(t, src, n)
	p := filepath.Join(dir, "p.toml")
	out, err := pipeCmd(t, nil, "run", "--commit-every", "200ms", p)
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 4 {
		t.Fatalf("pipe run: %v, want exit 4\n%s", err, out)
	}
	for _, want := range []string{"the run reached its budget: output_tokens ", " of 2000", "--set pipeline.budget.output_tokens=", "verified against the manifests:"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	first := readRecords(t, filepath.Join(dir, "out/completions.jsonl"))
	var decoded int
	for _, r := range first {
		decoded += r.Completion.CompletionTokens
	}
	if len(first) == 0 || len(first) >= n || decoded < 2000 || decoded > 2000+8*2048 {
		t.Fatalf("%d completions, %d tokens decoded before the stop; want the budget reached and the run stopped soon after", len(first), decoded)
	}
	// The same budget again: reached already, nothing more is generated.
	out, err = pipeCmd(t, nil, "run", p)
	if !errors.As(err, &ee) || ee.ExitCode() != 4 {
		t.Fatalf("again at the same budget: %v, want exit 4\n%s", err, out)
	}
	if again := readRecords(t, filepath.Join(dir, "out/completions.jsonl")); len(again) > len(first)+8 {
		t.Fatalf("the same budget let %d more completions through", len(again)-len(first))
	}
	out, err = pipeCmd(t, nil, "run", "--set", "pipeline.budget.output_tokens=100000000", p)
	if err != nil {
		t.Fatalf("with a larger budget: %v\n%s", err, out)
	}
	seen := map[string]int{}
	for _, r := range readRecords(t, filepath.Join(dir, "out/completions.jsonl")) {
		seen[r.ID]++
	}
	for id, k := range seen {
		if k != 1 {
			t.Fatalf("%s written %d times", id, k)
		}
	}
	if len(seen) != n {
		t.Fatalf("%d of %d prompts in the output", len(seen), n)
	}
}
