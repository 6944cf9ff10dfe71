package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pipe-dev/pipe/internal/testenv"
)

// Every file in pipelines/ passes pipe check.
func TestPipelinesPassCheck(t *testing.T) {
	testenv.Qwen3Dir(t)
	files, err := filepath.Glob("../../pipelines/*.toml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no pipelines found: %v", err)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			var out, errb bytes.Buffer
			if code := run([]string{"check", f}, &stdio{Out: &out, Err: &errb}); code != 0 {
				t.Fatalf("pipe check %s: exit %d\n%s", f, code, errb.String())
			}
			if !strings.Contains(out.String(), ": OK") {
				t.Fatalf("stdout %q", out.String())
			}
		})
	}
}

// The demo runs end to end against the simulator: every prompt ends in
// exactly one place, training rows carry tokens and a loss mask, and the
// broken completions the simulator injects are on the rejected side.
func TestDemoEndToEnd(t *testing.T) {
	testenv.Qwen3Dir(t)
	dir := t.TempDir()
	train, rejected := filepath.Join(dir, "train.jsonl"), filepath.Join(dir, "rejected.jsonl")
	var out, errb bytes.Buffer
	code := run([]string{"run", "../../pipelines/demo.toml", "--run-dir", filepath.Join(dir, "run"),
		"--set", "train.path=" + quoteTOML(train), "--set", "rejects.path=" + quoteTOML(rejected)},
		&stdio{Out: &out, Err: &errb})
	if code != 0 {
		t.Fatalf("pipe run demo: exit %d\n%s", code, errb.String())
	}
	ids := map[string]string{}
	for _, f := range []string{train, rejected} {
		for _, rec := range readRecords(t, f) {
			id := rec["id"].(string)
			if prev, dup := ids[id]; dup {
				t.Fatalf("id %s in both %s and %s", id, prev, f)
			}
			ids[id] = f
			if f == train {
				tok, _ := rec["tokens"].(map[string]any)
				if tok == nil || len(tok["input_ids"].([]any)) == 0 || len(tok["loss_mask"].([]any)) != len(tok["input_ids"].([]any)) {
					t.Fatalf("training row %s without tokens/loss_mask", id)
				}
			} else if rec["reject"] == nil {
				t.Fatalf("rejected row %s has no reason", id)
			}
		}
	}
	if len(ids) != 122 {
		t.Fatalf("%d prompts accounted for, want all 122", len(ids))
	}
	if !strings.Contains(errb.String(), "rejected by check: ") {
		t.Fatalf("summary does not show rejections by reason:\n%s", errb.String())
	}
}

func quoteTOML(s string) string { b, _ := json.Marshal(s); return string(b) }

func readRecords(t *testing.T, path string) []map[string]any {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []map[string]any
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 64<<20)
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		out = append(out, m)
	}
	return out
}
