package engine_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/pipe-dev/pipe/pipeline"
	"github.com/pipe-dev/pipe/pipeline/commitlog"
	"github.com/pipe-dev/pipe/pipeline/engine"
	"github.com/pipe-dev/pipe/pipeline/pipefile"
)

// N shards of one input, run one after the other as separate runs: each id
// ends in exactly one shard's outputs (or its rejected file), each shard's
// done.ids holds only its own ids, records of other shards count as
// skipped (not rejected, not failed), and every stage balances.
func TestShardsTakeEveryIDOnce(t *testing.T) {
	const n, shards = 2000, 4
	dir := t.TempDir()
	seen := map[string]int{}
	for i := 0; i < shards; i++ {
		key := fmt.Sprintf("%s/%d", dir, i)
		src := "[pipeline]\nrun_dir = \"run\"\nshard = \"" + fmt.Sprintf("%d/%d", i, shards) + "\"\n" + resumeGraph(n, key)
		p := durablePlan(t, dir, src)
		sh := pipefile.Shard{Index: i, Count: shards}
		runDir := filepath.Join(dir, "run", sh.Name())
		if p.File.RunDir != runDir {
			t.Fatalf("run dir %s, want %s", p.File.RunDir, runDir)
		}
		sum, err := engine.Run(context.Background(), p, engine.Options{})
		if err != nil {
			t.Fatal(err)
		}
		allBalanced(t, sum)
		src0 := stageByID(t, sum, "src")
		owned := 0
		for _, id := range ids(n) {
			if sh.Owns(id) {
				owned++
			}
		}
		if src0.Out != int64(owned) || src0.Skipped != int64(n-owned) || src0.Skips[engine.ReasonOtherShard] != int64(n-owned) || src0.Rejected != 0 {
			t.Errorf("shard %d: source out %d, skipped %d (%v), rejected %d; want out %d, skipped %d other_shard", i, src0.Out, src0.Skipped, src0.Skips, src0.Rejected, owned, n-owned)
		}
		if sum.Finished != owned {
			t.Errorf("shard %d: %d ids finished, want %d", i, sum.Finished, owned)
		}
		done := commitlog.NewSet(doneHashes(t, filepath.Join(runDir, pipeline.DoneFile)))
		for _, id := range ids(n) {
			if done.Has(commitlog.Hash(id)) != sh.Owns(id) {
				t.Fatalf("shard %d: id %s in done.ids = %v, owned = %v", i, id, done.Has(commitlog.Hash(id)), sh.Owns(id))
			}
		}
		fast := idCounts(t, filepath.Join(dir, sh.Name(), "fast.jsonl"))
		for id, c := range fast {
			seen[id] += c
		}
		for id, c := range idCounts(t, filepath.Join(runDir, "rejected", "exp.jsonl")) {
			seen[id] += c
		}
	}
	for _, id := range ids(n) {
		if seen[id] != 1 {
			t.Errorf("id %s is %d times in the shards' outputs, want once", id, seen[id])
		}
	}
}

// The shard filter adds one ShardOf per record read; the reference is the
// hash done.ids already takes of every id, measured in the same run.
