package shardruns

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/pipe-dev/pipe/pipeline/pipefile"
)

func status(t *testing.T, doc string) *Status {
	t.Helper()
	var st Status
	if err := json.Unmarshal([]byte(doc), &st); err != nil {
		t.Fatal(err)
	}
	return &st
}

// Progress and ETA over five shards as their status.json files say: the
// input's size from a run that read all of it, a running shard's own ETA
// (recent rate, its share left), else its share of the input at its
// average rate; a run that says running with no process is gone; a shard
// not given is missing.
func TestSummarize(t *testing.T) {
	sh := func(i int) pipefile.Shard { return pipefile.Shard{Index: i, Count: 5} }
	runs := []*Run{
		{Dir: "/r/0", Shard: sh(0), Status: status(t, `{"state":"finished","finished":198,"elapsed_s":20,
			"input":{"records_estimated":1000,"read_complete":true},"stages":[{"id":"prompts","in":1000,"out":198,"skipped":802}]}`)},
		{Dir: "/r/1", Shard: sh(1), Live: true, Status: status(t, `{"state":"running","finished":150,"finished_before_this_run":50,"elapsed_s":10,
			"eta":{"remaining":50,"per_second":12.5,"seconds":4}}`)},
		{Dir: "/r/2", Shard: sh(2), Live: true, Status: status(t, `{"state":"running","finished":100,"elapsed_s":10}`)},
		{Dir: "/r/3", Shard: sh(3), Status: status(t, `{"state":"running","finished":30,"elapsed_s":5}`)},
	}
	ps, tot := Summarize(runs)
	if len(ps) != 5 {
		t.Fatalf("%d lines, want 5 (one missing)", len(ps))
	}
	if p := ps[1]; p.State != "running" || p.Rate != 12.5 || p.ETA != 4*time.Second {
		t.Errorf("shard 1: %+v; want running at 12.5/s, ETA 4s (its status.json's)", p)
	}
	if p := ps[2]; p.Rate != 10 || p.ETA != 10*time.Second {
		t.Errorf("shard 2: %+v; want 10 ids/s, ETA 10s (its 200 of 1000 less 100 done, at 10/s)", p)
	}
	if p := ps[3]; p.State != "process gone" || p.ETA != 0 {
		t.Errorf("shard 3: %+v; want process gone, no ETA", p)
	}
	if p := ps[4]; p.Shard != "4/5" || p.State != "missing" {
		t.Errorf("line 5: %+v; want 4/5 missing", p)
	}
	want := Totals{Shards: 5, Done: 1, Running: 2, Missing: 1, Finished: 478, Expected: 1000, Rate: 22.5, ETA: 10 * time.Second}
	if tot != want {
		t.Errorf("totals %+v, want %+v", tot, want)
	}
	var b strings.Builder
	if err := WriteStatus(&b, runs); err != nil {
		t.Fatal(err)
	}
	if got := b.String(); !strings.HasSuffix(got, "total: 5 shards, 1 done, 2 running, 1 missing; 478 ids finished of 1000 (47.8%), 22.5 ids/s, ETA 10s\n") {
		t.Errorf("status:\n%s", got)
	}
}
