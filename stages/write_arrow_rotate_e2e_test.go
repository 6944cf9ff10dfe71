//go:build e2e

package stages

import (
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/pipe-dev/pipe/pipeline/engine"
)

// More records pending than the engine's old early-commit limit (65,536)
// do not cut a shard short: at seed scale that limit made shards of 84–350
// rows beside ones of 65,540. Shards are max_rows (100,000) but the last.
func TestWriteArrowShardsNotCutByPendingRecords(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: 140,000 rows")
	}
	const n = 140_000
	src := `
[pipeline]
run_dir = "run"

[[stage]]
id   = "prompts"
kind = "read-prompts"
path = "prompts.jsonl"

[[stage]]
id    = "train"
kind  = "write-arrow"
input = "prompts"
path  = "out/train"
`
	dir := t.TempDir()
	sum, err := runInDir(t, dir, src, map[string]string{"prompts.jsonl": genPrompts(n)}, engine.Options{CommitEvery: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if got := shardRows(t, filepath.Join(dir, "out/train")); !slices.Equal(got, []int64{100_000, 40_000}) {
		t.Fatalf("shards of %v rows, want [100000 40000]", got)
	}
	if sum.Finished != n {
		t.Fatalf("%d ids finished, want %d", sum.Finished, n)
	}
}
