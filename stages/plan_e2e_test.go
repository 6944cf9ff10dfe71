//go:build e2e

package stages

import (
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pipe-dev/pipe/internal/testrig/testenv"
)

// pipe plan runs a spread sample of the work, as a start of the run, and
// projects the rest: the run that follows does not generate the sample
// again, and its output tokens and training rows fall in the projected
// intervals (the simulated lengths and faults are drawn from each prompt,
// so the test is deterministic).
func TestPlanProjectsTheRunProcess(t *testing.T) {
	if testing.Short() {
		t.Skip("real processes")
	}
	bin := testenv.PipeBinary(t)
	fast := testenv.StartSim(t, bin, 1, "--speed", "400", "--think-mean", "200", "--answer-mean", "60", "--fault", "empty-answer:0.15")
	slow := testenv.StartSim(t, bin, 1, "--speed", "150", "--think-mean", "200", "--answer-mean", "60", "--fault", "empty-answer:0.15")
	const n = 1500
	src := genPipeline(serversKey([]string{fast.URLs[0], slow.URLs[0]})+fastGenKeys+readyKey+"concurrency = 8\n") + `
[[stage]]
id    = "check"
kind  = "validate-thinking"
input = "gen"

[[stage]]
id    = "rows"
kind  = "write-jsonl"
input = "check.accepted"
path  = "out/rows.jsonl"

[[stage]]
id    = "bad"
kind  = "write-jsonl"
input = "check.rejected"
path  = "out/bad.jsonl"
`
	dir := writeGenRun(t, src, n)
	p := filepath.Join(dir, "p.toml")
	cmd := exec.Command(bin, "plan", "--sample", "150", "--json", p)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("pipe plan: %v\n%s", err, stderr.String())
	}
	var plan struct {
		Sample, SampleEvery, PromptsLeft int64
		WallSeconds, OutputTokens, Rows  struct{ Value, Low, High float64 }
		Recommended                      int64 `json:"recommended_max_output_tokens"`
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(out, &raw); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	for k, dst := range map[string]any{"sample": &plan.Sample, "sample_every": &plan.SampleEvery, "prompts_left": &plan.PromptsLeft,
		"wall_seconds": &plan.WallSeconds, "output_tokens": &plan.OutputTokens, "training_rows": &plan.Rows} {
		if err := json.Unmarshal(raw[k], dst); err != nil {
			t.Fatalf("%s: %v\n%s", k, err, out)
		}
	}
	if plan.Sample != 150 || plan.SampleEvery != n/150 || plan.PromptsLeft != n-150 {
		t.Fatalf("sample %d, every %d, left %d", plan.Sample, plan.SampleEvery, plan.PromptsLeft)
	}
	for name, iv := range map[string]struct{ Value, Low, High float64 }{"wall_seconds": plan.WallSeconds, "output_tokens": plan.OutputTokens, "training_rows": plan.Rows} {
		if !(iv.Low <= iv.Value && iv.Value <= iv.High && iv.Value > 0) {
			t.Fatalf("%s: %+v", name, iv)
		}
	}
	// The sample is spread over the input: its ids are every k-th line.
	sampled := readRecords(t, filepath.Join(dir, "out/completions.jsonl"))
	if len(sampled) != 150 {
		t.Fatalf("the sample: %d completions", len(sampled))
	}
	for _, r := range sampled {
		var k int
		fmt.Sscanf(r.ID, "p%d", &k)
		if k%int(plan.SampleEvery) != 0 {
			t.Fatalf("%s is not one in %d", r.ID, plan.SampleEvery)
		}
	}
	// A second plan samples the work left after the first: a start like
	// any other, its accounting balanced.
	if out, err := pipeCmd(t, nil, "plan", "--sample", "50", p); err != nil || !strings.Contains(out, fmt.Sprintf("for the %d prompts left", n-200)) {
		t.Fatalf("a second plan: %v\n%s", err, out)
	}

	said, err := pipeCmd(t, nil, "run", p)
	if err != nil {
		t.Fatalf("pipe run: %v\n%s", err, said)
	}
	var tokens float64
	rows := map[string]bool{}
	all := readRecords(t, filepath.Join(dir, "out/completions.jsonl"))
	if len(all) != n {
		t.Fatalf("%d completions after the run, want %d (the sample's not generated again)", len(all), n)
	}
	inSample := map[string]bool{}
	for _, r := range sampled {
		inSample[r.ID] = true
	}
	for _, r := range all {
		if !inSample[r.ID] {
			tokens += float64(r.Completion.CompletionTokens)
		}
	}
	for _, r := range readRecords(t, filepath.Join(dir, "out/rows.jsonl")) {
		if !inSample[r.ID] {
			rows[r.ID] = true
		}
	}
	if tokens < plan.OutputTokens.Low || tokens > plan.OutputTokens.High {
		t.Errorf("output tokens %.0f, projected %+v", tokens, plan.OutputTokens)
	}
	if r := float64(len(rows)); r < plan.Rows.Low || r > plan.Rows.High {
		t.Errorf("training rows %.0f, projected %+v", r, plan.Rows)
	}
	// Without a dedupe stage the sample is read again and taken from the
	// journal: the servers answer only the prompts left.
	if !strings.Contains(said, fmt.Sprintf("gen: answers %d,", n-200)) {
		t.Errorf("the run after the plan generated more than the prompts left:\n%s", said)
	}
	t.Logf("projected tokens %+v rows %+v wall %+v; actual tokens %.0f rows %d", plan.OutputTokens, plan.Rows, plan.WallSeconds, tokens, len(rows))
}
