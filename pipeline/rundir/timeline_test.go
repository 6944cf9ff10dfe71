package rundir_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pipe-dev/pipe/pipeline/engine"
	"github.com/pipe-dev/pipe/pipeline/rundir"
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
			Stages: []rundir.PointStage{{StageCounts: engine.StageCounts{ID: "gen", Kind: "k", In: int64(10 * i), Out: int64(10 * i)}, Tokens: 5, ServerTokens: map[string]int64{"a": 5}}}}
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
}
