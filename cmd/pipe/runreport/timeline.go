package runreport

import (
	"os"
	"sync"
	"time"

	"github.com/pipe-dev/pipe/pipeline/engine"
	"github.com/pipe-dev/pipe/pipeline/rundir"
	"github.com/pipe-dev/pipe/pipeline/view"
)

// TimelineFile is RUN_DIR/timeline.jsonl (declared in pipeline/rundir).
const TimelineFile = rundir.TimelineFile

type (
	// Point is one line of the timeline.
	Point = rundir.Point
	// PointStage is one stage's counts since its start began.
	PointStage = rundir.PointStage
)

var timelineLast sync.Map // run directory → time.Time of its last point

// RecordPoint appends s to runDir's timeline, at most as often as keeps a
// two-day run's file small: every 30 s once the run is long, more often
// early on (elapsed/360), so a short run still has a curve. final writes
// regardless. Errors are ignored: the timeline serves a report and must
// never stop a run.
func RecordPoint(runDir string, s *engine.Summary, final bool) {
	if s == nil {
		return
	}
	now := time.Now()
	if last, ok := timelineLast.Load(runDir); ok && !final {
		gap := min(30*time.Second, s.Elapsed/360)
		if now.Sub(last.(time.Time)) < gap {
			return
		}
	}
	timelineLast.Store(runDir, now)
	p := Point{T: now.UTC(), PID: os.Getpid(), Elapsed: s.Elapsed.Seconds(), Finished: s.Finished}
	for _, st := range s.Stages {
		ps := PointStage{StageCounts: st.StageCounts}
		if v := st.Fleet; v != nil {
			ps.Tokens, ps.ServerTokens, ps.ServerLimits = v.Tokens, map[string]int64{}, map[string]int64{}
			for _, s := range v.Servers {
				ps.ServerTokens[s.Name] = s.Tokens
				ps.ServerLimits[s.Name] = s.Concurrency
			}
			ps.ServerEvents = newEvents(runDir+"\x00"+st.ID, v.Events)
		}
		p.Stages = append(p.Stages, ps)
	}
	rundir.AppendPoint(runDir, &p) // errors ignored: see above
}

// ReadTimeline reads runDir's timeline (rundir.ReadTimeline).
func ReadTimeline(runDir string) ([]Point, error) { return rundir.ReadTimeline(runDir) }

// eventsSeen is, per run directory and stage, the last launched-server
// event a point holds: each event goes into one point.
var eventsSeen sync.Map

// newEvents are the events of evs not in a point yet.
func newEvents(key string, evs []view.ServerEvent) []rundir.ServerEvent {
	last, _ := eventsSeen.Load(key)
	seen, _ := last.(int)
	var out []rundir.ServerEvent
	for _, e := range evs {
		if e.Seq <= seen {
			continue
		}
		out = append(out, rundir.ServerEvent{T: e.T, Server: e.Server, Start: e.Start, Kind: e.Kind, Text: e.Text, Tail: e.Tail})
		seen = e.Seq
	}
	eventsSeen.Store(key, seen)
	return out
}
