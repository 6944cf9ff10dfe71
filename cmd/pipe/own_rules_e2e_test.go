//go:build e2e

package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/pipe-dev/pipe/internal/testrig/testenv"
)

// ownRulesPipeline generates against pipe sim, keeps every completion
// (completions.jsonl), and judges them by a filter with two rules, then by
// the sample program pipelines/answer_rules.py through exec.
const ownRulesPipeline = `[pipeline]
name         = "own-rules"
run_dir      = "run"
keep_journal = true

[[stage]]
id   = "prompts"
kind = "read-prompts"
path = "prompts.jsonl"

[[stage]]
id                = "gen"
kind              = "generate"
input             = "prompts"
servers           = %s
concurrency       = 32
api               = "chat"
max_output_tokens = 256

[[stage]]
id    = "all"
kind  = "write-jsonl"
input = "gen"
path  = "completions.jsonl"

[[stage]]
id    = "rules"
kind  = "filter"
input = "gen"
rules = [
  {reject_if = 'len(completion.reasoning) < 120', reason = "short_thinking"},
  {reject_if = 'len(completion.answer) %% 7 == 3', reason = "lucky_seven"},
]

[[stage]]
id      = "judge"
kind    = "exec"
input   = "rules.accepted"
command = ["python3", "answer_rules.py"]

[[stage]]
id    = "good"
kind  = "write-jsonl"
input = "judge.accepted"
path  = "good.jsonl"

[[stage]]
id    = "bad"
kind  = "write-jsonl"
input = ["gen.rejected", "rules.rejected", "judge.rejected"]
path  = "bad.jsonl"
`

// independentCheck is the same rules in Python, written apart from both
// pipe's filter and the sample program: one verdict a completion.
const independentCheck = `
import json, sys
for line in open(sys.argv[1]):
    r = json.loads(line)
    c = r.get("completion") or {}
    reasoning, answer = c.get("reasoning") or "", c.get("answer") or ""
    if len(reasoning) < 120:
        v = "short_thinking"
    elif len(answer) % 7 == 3:
        v = "lucky_seven"
    elif answer.strip().lower().startswith("as an ai"):
        v = "as_an_ai"
    elif len(answer.strip()) < 20:
        v = "short_answer"
    else:
        v = "accepted"
    print(r["id"], v)
`

// The check of users' own rules: a replay (--from gen=run) of a
// generated run through a filter with two rules and an exec running the
// sample Python program gives exactly the verdicts of an independent
// Python check of the same rules, with each reason counted in the
// summary; no server is asked.
func TestReplayThroughFilterAndExecMatchesPython(t *testing.T) {
	const n = 800
	dir := t.TempDir()
	bin := testenv.PipeBinary(t)
	sim := testenv.StartSim(t, bin, 2, "--speed", "400", "--think-mean", "40", "--answer-mean", "8", "--fault", "empty-answer:0.05")
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, `{"id":"p%d","messages":[{"role":"user","content":"Question %d."}]}`+"\n", i, i)
	}
	writeFile(t, filepath.Join(dir, "prompts.jsonl"), b.String())
	servers, _ := json.Marshal(sim.URLs)
	writeFile(t, filepath.Join(dir, "rules.toml"), fmt.Sprintf(ownRulesPipeline, servers))
	script, err := os.ReadFile(filepath.Join(testenv.RepoRoot(t), "pipelines", "answer_rules.py"))
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, "answer_rules.py"), string(script))
	writeFile(t, filepath.Join(dir, "check.py"), independentCheck)
	pipe := func(args ...string) string {
		t.Helper()
		c := exec.Command(bin, args...)
		c.Dir = dir
		out, err := c.CombinedOutput()
		if err != nil {
			t.Fatalf("pipe %s: %v\n%s", strings.Join(args, " "), err, tail(string(out), 4000))
		}
		return string(out)
	}
	pipe("run", "rules.toml")
	sim.Stop()

	out, err := exec.Command("python3", filepath.Join(dir, "check.py"), filepath.Join(dir, "completions.jsonl")).Output()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{}
	counts := map[string]int{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		id, v, _ := strings.Cut(line, " ")
		want[id] = v
		counts[v]++
	}
	if len(want) != n {
		t.Fatalf("the check judged %d completions, want %d", len(want), n)
	}
	for _, v := range []string{"accepted", "short_thinking", "lucky_seven", "short_answer"} {
		if counts[v] == 0 {
			t.Fatalf("verdicts %v: none %s, so the test cannot tell it", counts, v)
		}
	}

	summary := pipe("run", "rules.toml", "--from", "gen=run")
	replayed := filepath.Join(dir, "run-from-gen")
	got := map[string]string{}
	for _, f := range []string{"good.jsonl", "bad.jsonl"} {
		path := filepath.Join(dir, f)
		if _, err := os.Stat(filepath.Join(replayed, f)); err == nil {
			path = filepath.Join(replayed, f)
		}
		for _, rec := range readJSONL(t, path) {
			id, _ := rec["id"].(string)
			v := "accepted"
			if rej, ok := rec["reject"].(map[string]any); ok {
				v, _ = rej["reason"].(string)
			}
			if _, dup := got[id]; dup {
				t.Fatalf("id %s twice in the replay's outputs", id)
			}
			got[id] = v
		}
	}
	for id, v := range want {
		if got[id] != v {
			t.Errorf("%s: the replay says %q, the independent check %q", id, got[id], v)
		}
	}
	if len(got) != n {
		t.Errorf("the replay wrote %d ids, want %d", len(got), n)
	}
	for stage, reasons := range map[string][]string{"rules": {"lucky_seven", "short_thinking"}, "judge": {"short_answer"}} {
		for _, r := range reasons {
			re := regexp.MustCompile(fmt.Sprintf(`rejected by %s: .*\b%s %d\b`, stage, r, counts[r]))
			if !re.MatchString(summary) {
				t.Errorf("the replay's summary does not count %s %d at %s:\n%s", r, counts[r], stage, tail(summary, 3000))
			}
		}
	}
	t.Logf("verdicts: %v", counts)
}
