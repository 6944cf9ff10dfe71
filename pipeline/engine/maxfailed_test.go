package engine_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"testing"

	"github.com/pipe-dev/pipe/pipeline"
	"github.com/pipe-dev/pipe/pipeline/engine"
	"github.com/pipe-dev/pipe/pipeline/pipefile"
	"github.com/pipe-dev/pipe/pipeline/record"
)

// failEvery fails every k-th record (retries exhausted, as generate does).
type failEvery struct{ k int64 }

type failEveryConfig struct {
	K int64 `toml:"k" default:"1" min:"1"`
}

func (f *failEvery) Process(_ context.Context, rec *record.Record, out pipeline.Emitter) error {
	if n, _ := strconv.ParseInt(rec.ID, 10, 64); n%f.k == 0 {
		return out.Fail(rec, errors.New("server error after 5 attempts"), 5)
	}
	return out.Emit("out", rec)
}

func maxFailedPlan(t *testing.T, dir string, n, k int64, maxFailed string) *pipeline.Plan {
	t.Helper()
	reg := durableRegistry()
	reg.Register(pipeline.Spec{Kind: "fail-every", Summary: "test: fails every k-th record", Outputs: []string{"out"},
		New: pipeline.NewProcessor(func(c *failEveryConfig) (pipeline.Processor, error) { return &failEvery{k: c.K}, nil })})
	header := "[pipeline]\nrun_dir = \"run\"\n"
	if maxFailed != "" {
		header += "max_failed = " + maxFailed + "\n"
	}
	src := header + fmt.Sprintf(`
[[stage]]
id = "src"
kind = "count"
n = %d

[[stage]]
id = "gen"
kind = "fail-every"
input = "src"
k = %d

[[stage]]
id = "out"
kind = "write-jsonl"
input = "gen"
path = "out.jsonl"
`, n, k)
	f, probs := pipefile.Parse(dir+"/test.toml", []byte(src), pipefile.Options{})
	if len(probs) > 0 {
		t.Fatal(probs)
	}
	p, probs := pipeline.Build(f, reg)
	if len(probs) > 0 {
		t.Fatal(probs)
	}
	return p
}

// A fleet where every generation fails is a failed run: it stops early
// (drains, commits) and ends with ErrTooManyFailed naming the stage.
func TestEveryRecordFailingStopsTheRun(t *testing.T) {
	dir := t.TempDir()
	sum, err := engine.Run(context.Background(), maxFailedPlan(t, dir, 1_000_000, 1, ""), engine.Options{})
	if !errors.Is(err, engine.ErrTooManyFailed) {
		t.Fatalf("err = %v, want ErrTooManyFailed", err)
	}
	gen := stageByID(t, sum, "gen")
	if gen.In >= 1_000_000 || gen.Failed == 0 || !sum.Drained {
		t.Fatalf("gen took %d, failed %d, drained %v: want an early stop", gen.In, gen.Failed, sum.Drained)
	}
	if len(idCounts(t, dir+"/run/failed/gen.jsonl")) != int(gen.Failed) {
		t.Fatalf("failed/gen.jsonl does not hold the %d failed records", gen.Failed)
	}
}

// Failures within max_failed let the run go on to its end, which then says
// they are not finished (ErrRecordsFailed: the next start does them); past
// it, the run fails as too many even when they come too late to stop it.
func TestMaxFailedLimits(t *testing.T) {
	for _, tc := range []struct {
		name      string
		n, k      int64
		maxFailed string
		wantErr   bool
	}{
		{"default 1%: 0.5% failed", 2000, 200, "", false},
		{"default 1%: 2% failed", 2000, 50, "", true},
		{"count allows 20", 2000, 100, "20", false},
		{"count allows 19", 2000, 100, "19", true},
		{"zero allows none", 50, 49, "0", true},
		{"share 10%", 200, 20, `"10%"`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sum, err := engine.Run(context.Background(), maxFailedPlan(t, t.TempDir(), tc.n, tc.k, tc.maxFailed), engine.Options{})
			if got := errors.Is(err, engine.ErrTooManyFailed); got != tc.wantErr {
				t.Fatalf("err = %v; want ErrTooManyFailed: %v (failed %d)", err, tc.wantErr, stageByID(t, sum, "gen").Failed)
			}
			if !tc.wantErr && !errors.Is(err, engine.ErrRecordsFailed) {
				t.Fatalf("err = %v; want ErrRecordsFailed (the run went on, and the failed records are not finished)", err)
			}
			if !tc.wantErr && sum.Finished != int(tc.n-tc.n/tc.k) {
				t.Fatalf("%d ids finished, want %d: all but the failed", sum.Finished, tc.n-tc.n/tc.k)
			}
		})
	}
}
