package shardrun

import (
	"strings"
	"testing"
	"time"

	"github.com/pipe-dev/pipe/pipeline"
)

// Progress and ETA: the input's size comes from a shard that read all of
// it (its source took 1000 records), each shard's share is 1/N of it, and
// a running shard's ETA is its share left at its rate.
func TestSummarize(t *testing.T) {
	runs := []*Run{
		{Dir: "/r/shard-0000-of-0004", Shard: pipeline.Shard{Index: 0, Count: 4},
			Status: &Status{State: "done", Finished: 248, ElapsedS: 20, Stages: []pipeline.StageSummary{{ID: "prompts", In: 1000, Out: 248, Skipped: 752}}}},
		{Dir: "/r/shard-0001-of-0004", Shard: pipeline.Shard{Index: 1, Count: 4}, Live: true,
			Status: &Status{State: "running", Finished: 150, FinishedBefore: 50, ElapsedS: 10}},
		{Dir: "/r/shard-0003-of-0004", Shard: pipeline.Shard{Index: 3, Count: 4},
			Status: &Status{State: "running", Finished: 30, ElapsedS: 5}}, // no process holds it
	}
	ps, tot := Summarize(runs)
	if len(ps) != 4 {
		t.Fatalf("%d lines, want 4 (one missing)", len(ps))
	}
	if ps[1].State != "running" || ps[1].Rate != 10 || ps[1].ETA != 10*time.Second {
		t.Errorf("shard 1: %+v; want running at 10 ids/s, ETA 10s (250-150 at 10/s)", ps[1])
	}
	if ps[2].State != "killed" || ps[2].ETA != 0 {
		t.Errorf("shard 3: %+v; want killed, no ETA", ps[2])
	}
	if ps[3].Shard != "2/4" || ps[3].State != "missing" {
		t.Errorf("line 4: %+v; want 2/4 missing", ps[3])
	}
	want := Totals{Shards: 4, Done: 1, Running: 1, Missing: 1, Finished: 428, Expected: 1000, Rate: 10, ETA: 10 * time.Second}
	if tot != want {
		t.Errorf("totals %+v, want %+v", tot, want)
	}
	var b strings.Builder
	if err := WriteStatus(&b, runs); err != nil {
		t.Fatal(err)
	}
	if got := b.String(); !strings.HasSuffix(got, "total: 4 shards, 1 done, 1 running, 1 missing; 428 ids finished of 1000 (42.8%), 10.0 ids/s, ETA 10s\n") {
		t.Errorf("status:\n%s", got)
	}
}
