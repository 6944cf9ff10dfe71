//go:build e2e

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/pipe-dev/pipe/internal/testrig/testenv"
	"github.com/pipe-dev/pipe/pipeline/filecommit"
	"github.com/pipe-dev/pipe/stages/arrowrow"
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
// exactly one place, training rows (Parquet) carry tokens and a loss mask,
// and the broken completions the simulator injects are on the rejected side.
// Then revalidate.toml, pointed at the demo's shards by swapping nothing but
// the path, rebuilds exactly the same training rows from the completions.
func TestDemoEndToEndThenRevalidateItsShards(t *testing.T) {
	testenv.Qwen3Dir(t)
	dir := t.TempDir()
	train, rejected := filepath.Join(dir, "train"), filepath.Join(dir, "rejected.jsonl")
	var out, errb bytes.Buffer
	code := run([]string{"run", "../../pipelines/demo.toml", "--run-dir", filepath.Join(dir, "run"),
		"--set", "train.path=" + quoteTOML(train), "--set", "rejects.path=" + quoteTOML(rejected)},
		&stdio{Out: &out, Err: &errb})
	if code != 0 {
		t.Fatalf("pipe run demo: exit %d\n%s", code, errb.String())
	}
	trainRows := readShardRecords(t, train)
	ids := map[string]string{}
	for _, f := range []string{train, rejected} {
		recs := trainRows
		if f == rejected {
			recs = readRecords(t, f)
		}
		for _, rec := range recs {
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

	again := filepath.Join(dir, "revalidated.jsonl")
	errb.Reset()
	code = run([]string{"run", "../../pipelines/revalidate.toml", "--run-dir", filepath.Join(dir, "reval"),
		"--set", "completions.path=" + quoteTOML(train), "--set", "train.path=" + quoteTOML(again),
		"--set", "rejects.path=" + quoteTOML(filepath.Join(dir, "revalidate-rejects.jsonl"))},
		&stdio{Out: &out, Err: &errb})
	if code != 0 {
		t.Fatalf("pipe run revalidate over the demo's shards: exit %d\n%s", code, errb.String())
	}
	want := map[string]map[string]any{}
	for _, rec := range trainRows {
		want[rec["id"].(string)] = rec["tokens"].(map[string]any)
	}
	got := readRecords(t, again)
	if len(got) != len(want) {
		t.Fatalf("revalidate made %d training rows from the demo's %d", len(got), len(want))
	}
	for _, rec := range got {
		id := rec["id"].(string)
		w, g := want[id], rec["tokens"].(map[string]any)
		for _, k := range []string{"input_ids", "loss_mask", "num_loss_tokens"} {
			if wj, gj := mustJSON(t, w[k]), mustJSON(t, g[k]); wj != gj {
				t.Fatalf("row %s: %s differs after revalidation:\n demo       %.200s\n revalidate %.200s", id, k, wj, gj)
			}
		}
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// readShardRecords reads a write-arrow directory with our reader, as the
// JSON shape write-jsonl would have written.
func readShardRecords(t *testing.T, dir string) []map[string]any {
	t.Helper()
	m, err := filecommit.ReadManifest(dir)
	if err != nil || m == nil {
		t.Fatalf("%s: no manifest (%v)", dir, err)
	}
	var out []map[string]any
	for _, sh := range m.Shards {
		err := arrowrow.ReadFile(context.Background(), filepath.Join(dir, sh.Name), memory.DefaultAllocator, func(b arrow.RecordBatch) error {
			recs, err := arrowrow.Records(b)
			for _, r := range recs {
				var m map[string]any
				if err := json.Unmarshal([]byte(mustJSON(t, r)), &m); err != nil {
					return err
				}
				out = append(out, m)
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return out
}

func quoteTOML(s string) string { b, _ := json.Marshal(s); return string(b) }
