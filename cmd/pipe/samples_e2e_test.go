//go:build e2e

package main

import (
	"fmt"
	"path/filepath"
	"testing"
)

const samplesPipeline = `[pipeline]
name    = "samples"
run_dir = "run"

[[stage]]
id      = "prompts"
kind    = "read-prompts"
path    = "prompts.jsonl"
samples = 4

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
api               = "chat"
max_output_tokens = 512
seed              = 7
per_prompt        = ["temperature"]

[[stage]]
id    = "out"
kind  = "write-jsonl"
input = "gen"
path  = "out.jsonl"
`

// samples = 4 makes 4 rows per prompt, ids ID#1 … ID#4, each exactly once
// across a kill -9 of pipe; each sample is sent its own seed (7 … 10), so
// the 4 completions differ, and a prompt's own temperature (meta) is sent
// and recorded with each of its completions.
func TestSamplesPerPromptExactlyOnceAcrossKill(t *testing.T) {
	const n = 1500
	r := newSimRig(t, n, func(i int) string {
		return fmt.Sprintf(`{"id":"p%d","temperature":%g,"messages":[{"role":"user","content":"Question %d."}]}`, i, 0.5+float64(i%3)/10, i)
	}, "s.toml", samplesPipeline, "--speed", "400", "--think-mean", "30", "--answer-mean", "20")
	dir := r.dir
	r.killWhenRows(r.start(), filepath.Join(dir, "out.jsonl"), n)
	r.finish()

	seen := map[string]bool{}
	answers := map[string]map[string]bool{}
	for _, rec := range readJSONL(t, filepath.Join(dir, "out.jsonl")) {
		id, _ := rec["id"].(string)
		if seen[id] {
			t.Fatalf("id %s twice", id)
		}
		seen[id] = true
		meta, _ := rec["meta"].(map[string]any)
		prompt, _ := meta["prompt_id"].(string)
		k, _ := meta["sample"].(float64)
		if id != fmt.Sprintf("%s#%d", prompt, int(k)) || k < 1 || k > 4 {
			t.Fatalf("row %s: meta.prompt_id %q, meta.sample %v", id, prompt, meta["sample"])
		}
		comp, _ := rec["completion"].(map[string]any)
		req, _ := comp["request"].(map[string]any)
		if req["seed"] != float64(7+int(k)-1) || req["temperature"] != meta["temperature"] {
			t.Fatalf("row %s: request %v, meta %v: want seed %d and the prompt's temperature", id, req, meta, 7+int(k)-1)
		}
		if answers[prompt] == nil {
			answers[prompt] = map[string]bool{}
		}
		answers[prompt][fmt.Sprint(comp["reasoning"], comp["answer"])] = true
	}
	if len(seen) != 4*n {
		t.Fatalf("%d rows, want %d", len(seen), 4*n)
	}
	for p, a := range answers {
		if len(a) != 4 {
			t.Fatalf("prompt %s: %d distinct completions of 4", p, len(a))
		}
	}
}
