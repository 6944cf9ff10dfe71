package runreport

import (
	"bufio"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/pipe-dev/pipe/pipeline/commitlog"
	"github.com/pipe-dev/pipe/pipeline/engine"
	"github.com/pipe-dev/pipe/stages"
)

// TimelineFile is RUN_DIR/timeline.jsonl: the run's counts over time, one
// line per point, appended by every start of the run, for the report's
// throughput plots.
const TimelineFile = "timeline.jsonl"

// Point is one line of the timeline.
type Point struct {
	T        time.Time    `json:"t"`
	PID      int          `json:"pid"` // which start of the run
	Elapsed  float64      `json:"elapsed_s"`
	Finished int          `json:"finished"`
	Stages   []PointStage `json:"stages"`
}

// PointStage is one stage's counts since its start began.
type PointStage struct {
	engine.StageCounts
	// Tokens are the output tokens of a stage with a fleet
	// (stages.FleetView), ServerTokens each server's.
	Tokens       int64            `json:"output_tokens,omitempty"`
	ServerTokens map[string]int64 `json:"server_output_tokens,omitempty"`
	// ServerLimits are each server's concurrency limit at the point: what
	// concurrency = "auto" chose over time (a fixed number stays flat).
	ServerLimits map[string]int64 `json:"server_concurrency,omitempty"`
}

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
		if v, ok := st.View.(stages.FleetView); ok {
			ps.Tokens, ps.ServerTokens, ps.ServerLimits = v.Tokens, map[string]int64{}, map[string]int64{}
			for _, s := range v.Servers {
				ps.ServerTokens[s.Name] = s.Tokens
				ps.ServerLimits[s.Name] = s.Concurrency
			}
		}
		p.Stages = append(p.Stages, ps)
	}
	line, err := json.Marshal(p)
	if err != nil {
		return
	}
	f, err := commitlog.OpenFile(filepath.Join(runDir, TimelineFile), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return
	}
	f.Write(append(line, '\n')) // one write: lines never interleave
	f.Close()
}

// ReadTimeline reads runDir's timeline; a missing file has no points, and
// a torn or unreadable line (a crash mid-write) is skipped.
func ReadTimeline(runDir string) ([]Point, error) {
	f, err := os.Open(filepath.Join(runDir, TimelineFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []Point
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for sc.Scan() {
		var p Point
		if json.Unmarshal(sc.Bytes(), &p) == nil && !p.T.IsZero() {
			out = append(out, p)
		}
	}
	return out, sc.Err()
}
