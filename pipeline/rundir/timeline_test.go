package rundir_test

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pipe-dev/pipe/pipeline/rundir"
	"github.com/pipe-dev/pipe/pipeline/tally"
)

// Points append one line each, in the format earlier runs wrote (flat
// stage counts); a torn last line (a crash mid-write) is skipped, and no
// file has no points.
func TestTimeline(t *testing.T) {
	dir := t.TempDir()
	if pts, err := rundir.ReadTimeline(dir); pts != nil || err != nil {
		t.Fatalf("no timeline: %v, %v", pts, err)
	}
	t0 := time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)
	for i := range 2 {
		p := &rundir.Point{T: t0.Add(time.Duration(i) * time.Minute), PID: 7, Elapsed: float64(60 * i), Finished: 10 * i,
			Stages: []rundir.PointStage{{StageCounts: tally.StageCounts{ID: "gen", Kind: "k", In: int64(10 * i), Out: int64(10 * i)}, Tokens: 5, ServerTokens: map[string]int64{"a": 5}}}}
		if err := rundir.AppendPoint(dir, p); err != nil {
			t.Fatal(err)
		}
	}
	path := filepath.Join(dir, rundir.TimelineFile)
	data, _ := os.ReadFile(path)
	first, _, _ := strings.Cut(string(data), "\n")
	if want := `{"t":"2026-11-30T08:00:00Z","pid":7,"elapsed_s":0,"finished":0,"stages":[{"id":"gen","kind":"k","in":0,"out":0,"rejected":0,"failed":0,"skipped":0,"output_tokens":5,"server_output_tokens":{"a":5}}]}`; first != want {
		t.Errorf("line\n%s\nwant\n%s", first, want)
	}
	f, _ := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString(`{"t":"2026-11-30T08:02:00Z","pid":7,"sta`)
	f.Close()
	pts, err := rundir.ReadTimeline(dir)
	if err != nil || len(pts) != 2 || pts[1].Finished != 10 || pts[1].Stages[0].Out != 10 || pts[1].Stages[0].ServerTokens["a"] != 5 {
		t.Errorf("read %+v, %v; want the two whole points", pts, err)
	}

	// A block of the file written again further on (a misdirected write)
	// does not count those points twice: the budget would stop early.
	f, _ = os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString("\n" + string(data))
	f.Close()
	pts, _ = rundir.ReadTimeline(dir)
	if s := rundir.SpentBy(pts); len(pts) != 2 || s.OutputTokens != 5 {
		t.Errorf("after a duplicated block: %d points, %d tokens spent; want 2 points, 5 tokens", len(pts), s.OutputTokens)
	}
}

// What earlier starts spent is each start's last point: a start is a run
// of points of one process whose elapsed time does not go back.
func TestSpentBy(t *testing.T) {
	fleet := func(tokens int64, servers ...string) []rundir.PointStage {
		m := map[string]int64{}
		for _, s := range servers {
			m[s] = tokens / int64(len(servers))
		}
		return []rundir.PointStage{{Tokens: tokens, ServerTokens: m}}
	}
	points := []rundir.Point{
		{PID: 10, Elapsed: 30, Stages: fleet(100, "a", "b")},
		{PID: 10, Elapsed: 3600, Stages: fleet(5000, "a", "b")},
		{PID: 11, Elapsed: 60, Stages: fleet(700, "a")},
		{PID: 11, Elapsed: 1800, Stages: fleet(900, "a")},
		{PID: 11, Elapsed: 5, Stages: fleet(10, "a", "b", "c")}, // the pid again, a new start
	}
	got := rundir.SpentBy(points)
	want := rundir.Spent{Wall: 5405 * time.Second, OutputTokens: 5910, GPUHours: 2 + 0.5 + 3*5.0/3600}
	if got.Wall != want.Wall || got.OutputTokens != want.OutputTokens || math.Abs(got.GPUHours-want.GPUHours) > 1e-9 {
		t.Fatalf("SpentBy = %+v, want %+v", got, want)
	}
	if (rundir.SpentBy(nil) != rundir.Spent{}) {
		t.Fatal("no points spent something")
	}
}
