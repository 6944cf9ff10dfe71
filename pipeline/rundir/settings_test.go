package rundir_test

import (
	"encoding/json"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/pipe-dev/pipe/pipeline/rundir"
)

func TestSettings(t *testing.T) {
	dir := t.TempDir()
	p := plan(t, dir, basePipeline)
	got := rundir.Settings(p)
	want := map[string]any{
		"src": map[string]any{"kind": "src", "input": []any{}, "id_field": "id"},
		"gen": map[string]any{
			"kind": "gen", "input": []any{"src"},
			"model": "qwen3", "temperature": 0.6, "seed": nil, "stop": []any{"</s>"},
			"enable_thinking": true, "system_prompt": "You are helpful. <think> first.",
			"max_output_tokens": int64(1024), "labels": map[string]any{},
		},
		"out": map[string]any{"kind": "sink", "input": []any{"gen"}, "path": filepath.Join(dir, "out.jsonl")},
		"bad": map[string]any{"kind": "sink", "input": []any{"gen.rejected"}, "path": filepath.Join(dir, "bad.jsonl")},
	}
	if !reflect.DeepEqual(got, want) {
		g, _ := json.MarshalIndent(got, "", " ")
		w, _ := json.MarshalIndent(want, "", " ")
		t.Fatalf("Settings:\n%s\nwant\n%s", g, w)
	}

	// With the operational keys: durations as strings, lists as []any.
	gen := p.Lookup("gen").Settings(true)
	for key, want := range map[string]any{
		"servers":         []any{"http://a:30000"},
		"concurrency":     int64(48),
		"request_timeout": "30m0s",
		"model":           "qwen3",
	} {
		if !reflect.DeepEqual(gen[key], want) {
			t.Errorf("Settings(true)[%q] = %#v, want %#v", key, gen[key], want)
		}
	}
	if keys := p.Lookup("gen").Spec.OperationalKeys(); !reflect.DeepEqual(keys, []string{"concurrency", "request_timeout", "servers"}) {
		t.Errorf("OperationalKeys = %v", keys)
	}
	if _, err := json.Marshal(got); err != nil {
		t.Errorf("Settings is not JSON: %v", err)
	}
}

// TestSettingsSameData: edits that do not change the data leave the settings
// equal; edits that do are listed.
func TestSettingsSameData(t *testing.T) {
	tests := []struct {
		name  string
		edits []string
		want  []string
	}{
		{"unchanged", nil, nil},
		{"operational keys", []string{
			`servers = ["http://a:30000"]`, `servers = ["http://b:30000", "http://c:30000"]
concurrency = 8
request_timeout = "2h"`,
			`path = "prompts.jsonl"`, `path = "prompts.jsonl"
limit = 100`,
		}, nil},
		{"first port spelled out", []string{`input = "src"`, `input = "src.out"`}, nil},
		{"integer written for a float", []string{"temperature = 0.6", "temperature = 1"}, []string{"gen.temperature: 0.6 → 1"}},
		{"sampling", []string{"temperature = 0.6", "temperature = 0.7\nseed = 7"}, []string{
			"gen.seed: unset → 7",
			"gen.temperature: 0.6 → 0.7",
		}},
		{"model and stop", []string{`model = "qwen3"`, `model = "qwen3-8b"`, `stop = ["</s>"]`, `stop = []`}, []string{
			`gen.model: "qwen3" → "qwen3-8b"`,
			`gen.stop: ["</s>"] → []`,
		}},
		{"default made explicit", []string{`model = "qwen3"`, "model = \"qwen3\"\nenable_thinking = true\nmax_output_tokens = 1024"}, nil},
		{"output path", []string{`path = "out.jsonl"`, `path = "out2.jsonl"`}, []string{
			`out.path: "` + "DIR/out.jsonl" + `" → "` + "DIR/out2.jsonl" + `"`,
		}},
		{"rewired", []string{`input = "gen.rejected"`, `input = "gen"`}, []string{
			`bad.input: ["gen.rejected"] → ["gen"]`,
		}},
		{"stage added", []string{`[[stage]]
id = "out"`, `[[stage]]
id = "check"
kind = "check"
input = "gen"

[[stage]]
id = "check-bad"
kind = "sink"
input = "check.rejected"
path = "check-bad.jsonl"

[[stage]]
id = "out"`, `id = "out"
kind = "sink"
input = "gen"`, `id = "out"
kind = "sink"
input = "check"`}, []string{
			`out.input: ["gen"] → ["check"]`,
			`stage "check" added`,
			`stage "check-bad" added`,
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			old := rundir.Settings(plan(t, dir, basePipeline))
			new := rundir.Settings(plan(t, dir, basePipeline, tt.edits...))
			got := rundir.Compare(old, new)
			var want []string
			for _, w := range tt.want {
				want = append(want, strings.ReplaceAll(w, "DIR", dir))
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("Compare:\n  %s\nwant\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
			}
		})
	}
}

func TestCompare(t *testing.T) {
	long := strings.Repeat("You are a careful assistant. ", 10)
	stage := func(kv ...any) map[string]any {
		m := map[string]any{"kind": "gen", "input": []any{"src"}}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i].(string)] = kv[i+1]
		}
		return m
	}
	tests := []struct {
		name     string
		old, new map[string]any
		want     []string
	}{
		{"both empty", nil, map[string]any{}, nil},
		{"equal", map[string]any{"gen": stage("temperature", 0.6)}, map[string]any{"gen": stage("temperature", 0.6)}, nil},
		{"int and float", map[string]any{"gen": stage("n", 2)}, map[string]any{"gen": stage("n", 2.0)}, nil},
		{"int64 and json.Number", map[string]any{"gen": stage("seed", json.Number("9007199254740993"))},
			map[string]any{"gen": stage("seed", int64(9007199254740993))}, nil},
		{"big ints differ past float precision", map[string]any{"gen": stage("seed", int64(9007199254740993))},
			map[string]any{"gen": stage("seed", int64(9007199254740992))},
			[]string{"gen.seed: 9007199254740993 → 9007199254740992"}},
		{"value changed", map[string]any{"gen": stage("temperature", 0.6)}, map[string]any{"gen": stage("temperature", 0.7)},
			[]string{"gen.temperature: 0.6 → 0.7"}},
		{"set and unset", map[string]any{"gen": stage("top_p", nil, "top_k", 20)}, map[string]any{"gen": stage("top_p", 0.9, "top_k", nil)},
			[]string{"gen.top_k: 20 → unset", "gen.top_p: unset → 0.9"}},
		{"key new in this version", map[string]any{"gen": stage()}, map[string]any{"gen": stage("min_p", 0.0)},
			[]string{"gen.min_p: (not recorded) → 0"}},
		{"key gone", map[string]any{"gen": stage("old", "x")}, map[string]any{"gen": stage()},
			[]string{`gen.old: "x" → (no longer a setting)`}},
		{"stage added and removed", map[string]any{"check": stage()}, map[string]any{"tok": stage()},
			[]string{`stage "check" removed`, `stage "tok" added`}},
		{"kind changed: only the kind", map[string]any{"check": map[string]any{"kind": "validate-thinking", "input": []any{"gen"}, "a": 1}},
			map[string]any{"check": map[string]any{"kind": "tokenize-and-mask", "input": []any{"gen"}, "b": 2}},
			[]string{"check.kind: validate-thinking → tokenize-and-mask"}},
		{"no HTML escaping", map[string]any{"gen": stage("think_end", "</think>")}, map[string]any{"gen": stage("think_end", "</reasoning>")},
			[]string{`gen.think_end: "</think>" → "</reasoning>"`}},
		{"long text shows where it differs", map[string]any{"gen": stage("system_prompt", long+"Answer briefly.")},
			map[string]any{"gen": stage("system_prompt", long+"Answer at length.")},
			[]string{`gen.system_prompt: …reful assistant. Answer briefly." → …reful assistant. Answer at length."`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := rundir.Compare(tt.old, tt.new)
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Compare:\n  %s\nwant\n  %s", strings.Join(got, "\n  "), strings.Join(tt.want, "\n  "))
			}
		})
	}
}

// What Settings writes to run.json reads back, per stage and in id order,
// as RecordedStages: kind, inputs and keys.
func TestRecordedStages(t *testing.T) {
	dir := t.TempDir()
	p := plan(t, dir, basePipeline)
	if _, _, err := rundir.Check(dir, p, false, []string{"pipe", "run"}); err != nil {
		t.Fatal(err)
	}
	r, err := rundir.ReadRun(dir)
	if err != nil || r == nil {
		t.Fatal(r, err)
	}
	got := rundir.RecordedStages(r.Settings)
	var ids []string
	for _, s := range got {
		ids = append(ids, s.ID)
	}
	if !reflect.DeepEqual(ids, []string{"bad", "gen", "out", "src"}) {
		t.Fatalf("ids %q", ids)
	}
	bad, gen, src := got[0], got[1], got[3]
	if bad.Kind != "sink" || !reflect.DeepEqual(bad.Inputs, []string{"gen.rejected"}) || bad.Str("path") != filepath.Join(dir, "bad.jsonl") {
		t.Errorf("bad: %+v", bad)
	}
	if gen.Kind != "gen" || gen.Str("model") != "qwen3" || gen.Str("max_output_tokens") != "" || gen.Keys["max_output_tokens"] != json.Number("1024") {
		t.Errorf("gen: %+v", gen)
	}
	if src.Kind != "src" || src.Inputs != nil {
		t.Errorf("src: %+v", src)
	}
}
