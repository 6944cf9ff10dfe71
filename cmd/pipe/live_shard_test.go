package main

import (
	"testing"

	"github.com/pipe-dev/pipe/pipeline"
	"github.com/pipe-dev/pipe/pipeline/engine"
	"github.com/pipe-dev/pipe/pipeline/pipefile"
)

// A shard's ETA counts 1/N of the input it has not read yet (the rest is
// other shards'), plus what it read of its own and has not done.
func TestLiveETAOfAShard(t *testing.T) {
	ls := &liveStatus{
		Input: &liveInput{Estimated: 1000, Records: 100},
		Stages: []liveStage{
			{StageSummary: engine.StageSummary{StageCounts: engine.StageCounts{ID: "prompts", In: 100, Out: 25, Skipped: 75}}},
			{StageSummary: engine.StageSummary{StageCounts: engine.StageCounts{ID: "gen", In: 25, Out: 20}}, Done1m: 2},
		},
	}
	for _, tc := range []struct {
		shard     *pipefile.Shard
		remaining int64
	}{
		{nil, 1000 - 75 - 20},                            // whole input: all unread is ours
		{&pipefile.Shard{Index: 1, Count: 4}, 900/4 + 5}, // a quarter of the unread, and 5 read, not done
	} {
		l := &live{plan: &pipeline.Plan{File: &pipefile.File{Shard: tc.shard}},
			expensive: map[string]bool{"gen": true}, upstream: map[string]bool{"prompts": true}}
		e := l.eta(ls)
		if e.Remaining != tc.remaining || e.Seconds != float64(tc.remaining)/2 {
			t.Errorf("shard %v: remaining %d, %.1fs; want %d at 2/s", tc.shard, e.Remaining, e.Seconds, tc.remaining)
		}
	}
}
