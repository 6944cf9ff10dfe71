package rundir_test

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pipe-dev/pipe/pipeline"
	"github.com/pipe-dev/pipe/pipeline/pipefile"
	"github.com/pipe-dev/pipe/pipeline/rundir"
)

// A run directory keeps the shard it was created for: run.json records it,
// and a start as another shard (another N, another index, or unsharded) is
// refused even with --force-new-config, since its finished ids belong to
// the first split.
func TestShardIsFixedForTheRun(t *testing.T) {
	dir := t.TempDir()
	// run_dir names the shard itself, so every spec below maps to one directory.
	src := strings.Replace(basePipeline, `run_dir = "run"`, `run_dir = "run/shard-0001-of-0004"`, 1)
	at := func(shard string) *pipeline.Plan {
		t.Helper()
		p := plan(t, dir, src)
		if shard != "" {
			sh, err := pipefile.ParseShard(shard)
			if err != nil {
				t.Fatal(err)
			}
			p.File.Shard = &sh
		}
		return p
	}
	runDir := filepath.Join(dir, "run", "shard-0001-of-0004")
	if _, _, err := rundir.Check(runDir, at("1/4"), false, []string{"pipe", "run"}); err != nil {
		t.Fatal(err)
	}
	r, err := rundir.ReadRun(runDir)
	if err != nil {
		t.Fatal(err)
	}
	if r.Shard == nil || *r.Shard != (rundir.ShardSpec{Index: 1, Count: 4, Hash: pipefile.ShardHash}) {
		t.Fatalf("run.json shard = %+v, want 1/4 %s", r.Shard, pipefile.ShardHash)
	}
	if _, _, err := rundir.Check(runDir, at("1/4"), false, nil); err != nil {
		t.Fatalf("same shard again: %v", err)
	}
	for _, other := range []string{"1/8", "2/4", ""} {
		_, _, err := rundir.Check(runDir, at(other), true, nil)
		var sc *rundir.ShardChangedError
		if !errors.As(err, &sc) {
			t.Fatalf("as shard %q with --force-new-config: err = %v, want a ShardChangedError", other, err)
		}
		if !strings.Contains(err.Error(), "is shard 1/4 of its input (run.json), this run would be ") {
			t.Errorf("message: %v", err)
		}
	}
	if r, _ := rundir.ReadRun(runDir); len(r.History) != 2 {
		t.Errorf("refused starts were recorded: %d starts", len(r.History))
	}
}
