package main

import (
	"math"
	"strings"
	"testing"

	"github.com/pipe-dev/pipe/pipeline"
	"github.com/pipe-dev/pipe/pipeline/engine"
	"github.com/pipe-dev/pipe/pipeline/figure"
	"github.com/pipe-dev/pipe/pipeline/pipefile"
	"github.com/pipe-dev/pipe/pipeline/view"
	"github.com/pipe-dev/pipe/stages"
)

// At the end of a run, when every record left is a request a server has
// brought nothing back for a while, the ETA says what it waits on instead
// of a time the run's rate would give ("ETA 1s" while a hung server holds
// the last requests until stall_timeout).
func TestETAWaitsOnQuietServers(t *testing.T) {
	fleet := func(quiet float64) *liveFleet {
		return &liveFleet{Fleet: view.Fleet{InFlight: 3, Servers: []view.Server{
			{Name: "gpu1:30000", InFlight: 0, QuietSeconds: 400},
			{Name: "gpu4:30000", InFlight: 3, QuietSeconds: quiet},
		}}}
	}
	if got, want := tailWait(fleet(190), 3, quietTail), "3 requests on gpu4:30000, no output for 3m10s"; got != want {
		t.Fatalf("tailWait = %q, want %q", got, want)
	}
	if got := tailWait(fleet(20), 3, quietTail); got != "" {
		t.Fatalf("a server quiet for 20 s: %q", got)
	}
	if got := tailWait(fleet(190), 50, quietTail); got != "" {
		t.Fatalf("records left beyond those in flight: %q", got)
	}
	// Once the estimate has run out, 20 s of quiet is already the answer.
	if got := tailWait(fleet(20), 3, quietPastETA); got != "3 requests on gpu4:30000, no output for 20s" {
		t.Fatalf("past the ETA, a server quiet for 20 s: %q", got)
	}
	e := &liveETA{Remaining: 3, PerSecond: 40, Seconds: 0.075, Waiting: tailWait(fleet(190), 3, quietTail)}
	if got := etaLine(e); got != "ETA ?: 3 left, waiting on 3 requests on gpu4:30000, no output for 3m10s" {
		t.Fatalf("etaLine = %q", got)
	}
	line := progressLine(&liveStatus{ETA: e})
	if !strings.Contains(line, "waiting on 3 requests on gpu4:30000") || strings.Contains(line, "ETA 0s") {
		t.Fatalf("progress line %q", line)
	}
}

// Where the fleet is the work and is full, the ETA is the fleet's model
// (pipe plan's): a server whose latency has just tripled moves it at once,
// while the last minute's rate still says the old speed.
func TestETAFromTheFleetModel(t *testing.T) {
	fleet := func(recent float64, inFlight int64) *liveFleet {
		return &liveFleet{Stage: "gen", Fleet: view.Fleet{InFlight: inFlight, Capacity: 96, Servers: []view.Server{
			{Name: "a", State: view.ServerReady, Concurrency: 48, InFlight: inFlight / 2, Completions: 500, LatencyMean: 10, LatencyRecent: 10, P95Seconds: 20},
			{Name: "b", State: view.ServerReady, Concurrency: 48, InFlight: inFlight / 2, Completions: 500, LatencyMean: 10, LatencyRecent: recent, P95Seconds: 20},
		}}}
	}
	ls := func(f *liveFleet) *liveStatus {
		return &liveStatus{
			Input: &liveInput{Estimated: 10000, Records: 10000, Complete: true},
			Stages: []liveStage{
				{StageSummary: engine.StageSummary{StageCounts: engine.StageCounts{ID: "prompts", In: 10000, Out: 10000}}},
				{StageSummary: engine.StageSummary{StageCounts: engine.StageCounts{ID: "gen", In: 10000, Out: 1000}}, Done1m: 9.6},
			},
			Fleet: f,
		}
	}
	l := &live{plan: &pipeline.Plan{File: &pipefile.File{}}, expensive: map[string]bool{"gen": true}, upstream: map[string]bool{"prompts": true}}
	// 9,000 left, 96 in flight: 8,904 to send at 48/10 + 48/10 per second,
	// then the drain (20 - 10/2).
	e := l.eta(ls(fleet(10, 96)))
	if want := 8904/9.6 + 15; e.By != "fleet" || math.Abs(e.Seconds-want) > 1e-6 {
		t.Errorf("steady: %.1f s by %q, want %.1f by the fleet", e.Seconds, e.By, want)
	}
	slowed := l.eta(ls(fleet(30, 96)))
	if want := 8904/(4.8+1.6) + 20 - (10+30)/2.0/2; math.Abs(slowed.Seconds-want) > 1e-6 {
		t.Errorf("b slowed to 30 s: %.1f s, want %.1f", slowed.Seconds, want)
	}
	// Starved (the fleet holds a fifth of what it may): the stage's rate.
	if e := l.eta(ls(fleet(10, 20))); e.By != "rate" || e.Seconds != 9000/9.6 {
		t.Errorf("starved fleet: %.1f s by %q, want the rate's %.1f", e.Seconds, e.By, 9000/9.6)
	}
}

// The prompts left are the input's, less what is done and what will be
// skipped as finished before this run: a plan's spread sample lies ahead
// in the unread part of the file too (2,000 prompts, 626 read, 100
// finished before of which 32 skipped so far, 257 done: 1,643 left, not
// 1,711).
func TestETALeftCountsFinishedAhead(t *testing.T) {
	l := &live{plan: &pipeline.Plan{File: &pipefile.File{}}, expensive: map[string]bool{"gen": true}, upstream: map[string]bool{"prompts": true, "todo": true}}
	e := l.eta(&liveStatus{
		Input: &liveInput{Estimated: 2000, Records: 626, Counted: true},
		Stages: []liveStage{
			{StageSummary: engine.StageSummary{StageCounts: engine.StageCounts{ID: "prompts", In: 626, Out: 626}}},
			{StageSummary: engine.StageSummary{StageCounts: engine.StageCounts{ID: "todo", In: 626, Out: 530, Skipped: 32}, Abandoned: 64,
				Skips: map[string]int64{"done": 32}, Figures: []figure.Figure{figure.NewGauge(stages.FigureFinishedBefore, 100)}}},
			{StageSummary: engine.StageSummary{StageCounts: engine.StageCounts{ID: "gen", In: 530, Out: 257}, Abandoned: 273}},
		},
	})
	if e.Remaining != 2000-357 {
		t.Fatalf("%d left, want %d", e.Remaining, 2000-357)
	}
}
