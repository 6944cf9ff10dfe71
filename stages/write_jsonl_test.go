package stages

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pipe-dev/pipe/pipeline"
)

// The output appears only at commit, whole; a run that never commits leaves
// no file and no temporary behind; an existing file is replaced atomically.
func TestWriteJSONLAtomicCommit(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "sub", "out.jsonl")
	w := &writeJSONL{cfg: writeJSONLConfig{Path: path}}
	ctx := context.Background()
	if err := w.Open(ctx, &pipeline.Env{}); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"a", "b"} {
		if err := w.Process(ctx, &pipeline.Record{ID: id, Tokens: &pipeline.Tokens{LossMask: pipeline.LossMask{0, 1}}}, nil); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatalf("output visible before commit: %v", err)
	}
	if err := w.Finish(ctx, nil); err != nil {
		t.Fatal(err)
	}
	w.Close()
	data, _ := os.ReadFile(path)
	if got := strings.Count(string(data), "\n"); got != 2 || !strings.Contains(string(data), `"loss_mask":[0,1]`) {
		t.Fatalf("committed %q", data)
	}
	// An uncommitted second run: the first output stays, the temp is removed.
	w2 := &writeJSONL{cfg: writeJSONLConfig{Path: path}}
	if err := w2.Open(ctx, &pipeline.Env{}); err != nil {
		t.Fatal(err)
	}
	w2.Process(ctx, &pipeline.Record{ID: "c"}, nil)
	w2.Close()
	after, _ := os.ReadFile(path)
	if string(after) != string(data) {
		t.Fatal("an uncommitted run changed the output")
	}
	entries, _ := os.ReadDir(filepath.Dir(path))
	if len(entries) != 1 {
		t.Fatalf("left behind: %v", entries)
	}
	// A committed third run keeps the previous output beside the new one.
	w3 := &writeJSONL{cfg: writeJSONLConfig{Path: path}}
	if err := w3.Open(ctx, &pipeline.Env{}); err != nil {
		t.Fatal(err)
	}
	w3.Process(ctx, &pipeline.Record{ID: "d"}, nil)
	if err := w3.Finish(ctx, nil); err != nil {
		t.Fatal(err)
	}
	prev, _ := filepath.Glob(path + ".prev-*")
	if len(prev) != 1 {
		t.Fatalf("previous output not kept: %v", prev)
	}
	if kept, _ := os.ReadFile(prev[0]); string(kept) != string(data) {
		t.Fatal("kept previous output differs")
	}
	if st, _ := os.Stat(path); st.Mode().Perm() != 0o644 {
		t.Fatalf("output mode %v, want 0644", st.Mode().Perm())
	}
}
