package rundir

import (
	"bufio"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"time"

	"github.com/pipe-dev/pipe/pipeline/commitlog"
	"github.com/pipe-dev/pipe/pipeline/rundir/layout"
	"github.com/pipe-dev/pipe/pipeline/tally"
)

// TimelineFile is RUN_DIR/timeline.jsonl: the run's counts over time, one
// line per point, appended by every start of the run, for the report's
// throughput plots.
const TimelineFile = layout.Timeline

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
	tally.StageCounts
	// Tokens are the output tokens of a stage with a fleet
	// (view.Fleet), ServerTokens each server's.
	Tokens       int64            `json:"output_tokens,omitempty"`
	ServerTokens map[string]int64 `json:"server_output_tokens,omitempty"`
	// ServerLimits are each server's concurrency limit at the point: what
	// concurrency = "auto" chose over time (a fixed number stays flat).
	ServerLimits map[string]int64 `json:"server_concurrency,omitempty"`
	// ServerEvents are what happened to the servers the stage launched
	// since the point before: starts, readiness, crashes, hangs,
	// restarts, give-ups.
	ServerEvents []ServerEvent `json:"server_events,omitempty"`
}

// ServerEvent is one event of a launched server (stages/fleet.Event).
type ServerEvent struct {
	T      time.Time `json:"t"`
	Server string    `json:"server"`
	Start  int       `json:"start"`
	Kind   string    `json:"kind"`
	Text   string    `json:"text"`
	Tail   []string  `json:"tail,omitempty"`
}

// AppendPoint appends p to dir's timeline in one write, so lines of two
// writers never interleave.
func AppendPoint(dir string, p *Point) error {
	line, err := json.Marshal(p)
	if err != nil {
		return err
	}
	f, err := commitlog.OpenFile(filepath.Join(dir, TimelineFile), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	_, err = f.Write(append(line, '\n'))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// ReadTimeline reads dir's timeline; a missing file has no points, a torn
// or unreadable line (a crash mid-write, a bad sector) is skipped, and a
// point read twice (a block of the file written again elsewhere) counts
// once: the budget sums what earlier starts spent from it.
func ReadTimeline(dir string) ([]Point, error) {
	f, err := os.Open(filepath.Join(dir, TimelineFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []Point
	type key struct {
		t       int64
		pid     int
		elapsed float64
	}
	seen := map[key]bool{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for sc.Scan() {
		var p Point
		if json.Unmarshal(sc.Bytes(), &p) != nil || p.T.IsZero() {
			continue
		}
		if k := (key{p.T.UnixNano(), p.PID, p.Elapsed}); !seen[k] {
			seen[k] = true
			out = append(out, p)
		}
	}
	return out, sc.Err()
}

// Spent is what earlier starts of a run spent, read from its timeline:
// each start's last point (a start killed between points loses at most
// the time since its last one).
type Spent struct {
	Wall         time.Duration
	OutputTokens int64
	// GPUHours are servers × hours: each start's servers (those with a
	// figure in its points) for the time it lasted.
	GPUHours float64
}

// SpentBy sums points by start: a start is a run of points of one
// process whose elapsed time does not go back.
func SpentBy(points []Point) Spent {
	var s Spent
	add := func(p *Point) {
		if p == nil {
			return
		}
		s.Wall += time.Duration(p.Elapsed * float64(time.Second))
		servers := map[string]bool{}
		for _, st := range p.Stages {
			s.OutputTokens += st.Tokens
			for name := range st.ServerTokens {
				servers[name] = true
			}
		}
		s.GPUHours += float64(len(servers)) * p.Elapsed / 3600
	}
	var last *Point
	for i := range points {
		p := &points[i]
		if last != nil && (p.PID != last.PID || p.Elapsed < last.Elapsed) {
			add(last)
		}
		last = p
	}
	add(last)
	return s
}
