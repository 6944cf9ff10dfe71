package runfile

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// run.json reads back as written (settings' numbers as json.Number);
// none is nil, nil; one that is not a run file names its path.
func TestReadWrite(t *testing.T) {
	dir := t.TempDir()
	if r, err := Read(dir); r != nil || err != nil {
		t.Fatalf("no run.json: %v, %v", r, err)
	}
	at := time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)
	w := &Run{Pipeline: "/p/x.toml", Created: at, Settings: map[string]any{"gen": map[string]any{"max": 30}},
		Shard: &ShardSpec{Index: 1, Count: 4, Hash: "h"}, Outputs: []Output{{Stage: "rows", Kind: "k", Path: "/o/rows.jsonl"}},
		History: []Start{{At: at, PID: 7, Command: []string{"pipe", "run", "<x>.toml"}}}}
	if err := w.Write(filepath.Join(dir, "new")); err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(filepath.Join(dir, "new", Name))
	if !strings.Contains(string(data), `"<x>.toml"`) {
		t.Errorf("run.json escapes HTML:\n%s", data)
	}
	r, err := Read(filepath.Join(dir, "new"))
	if err != nil || r == nil {
		t.Fatal(r, err)
	}
	if g, _ := r.Settings["gen"].(map[string]any); g["max"] != json.Number("30") {
		t.Errorf("settings %v: want max as json.Number 30", r.Settings)
	}
	if r.Shard.String() != "shard 1/4" || len(r.Outputs) != 1 || r.Outputs[0].Path != "/o/rows.jsonl" || r.History[0].PID != 7 || !r.Created.Equal(at) {
		t.Errorf("read back %+v", r)
	}
	if err := os.WriteFile(filepath.Join(dir, Name), []byte("[1]"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Read(dir); err == nil || !strings.Contains(err.Error(), filepath.Join(dir, Name)+" is not a run file") {
		t.Errorf("a bad run.json: %v", err)
	}
}
