//go:build e2e

package pipefile_test

import (
	"testing"

	"github.com/pipe-dev/pipe/pipeline/pipefile"
)

// Every shard holds within 2% of 1/N of a million ids, for both kinds of
// id and several N.
func TestShardsAreBalanced(t *testing.T) {
	if testing.Short() {
		t.Skip("hashes 2M ids; skipped with -short")
	}
	for _, kind := range []string{"given", "content"} {
		ids := balanceIDs(kind, 1_000_000)
		for _, n := range []int{2, 3, 4, 16} {
			counts := make([]int, n)
			for _, id := range ids {
				counts[pipefile.ShardOf(id, n)]++
			}
			want := float64(len(ids)) / float64(n)
			for i, c := range counts {
				if dev := (float64(c) - want) / want; dev > 0.02 || dev < -0.02 {
					t.Errorf("%s ids, %d shards: shard %d has %d ids, %.2f%% off 1/N (%.0f); want within 2%%", kind, n, i, c, 100*dev, want)
				}
			}
		}
	}
}
