package runreport

import (
	"slices"
	"sort"
	"time"
)

// Throughput is the run's pace over time, from its timeline.
type Throughput struct {
	// Finished is the run directory's finished ids at each point.
	Finished []XY `json:"finished"`
	// Rates are records per second: completions of each generate stage,
	// rows into each writer, and rejections summed over the stages.
	Rates []Series `json:"rates"`
	// Starts are when each start of the run (after the first) began.
	Starts []time.Time `json:"starts,omitempty"`
}

// XY is one point of a plot: X a time, Y a value.
type XY struct {
	X time.Time `json:"t"`
	Y float64   `json:"v"`
}

// Series is one line of a plot.
type Series struct {
	Name   string `json:"name"`
	Points []XY   `json:"points"`
}

// maxPlotPoints bounds each line: a two-day run's thousands of points are
// averaged into this many buckets.
const maxPlotPoints = 300

// rateLine names what a rate series counts.
type rateLine struct {
	name  string
	count func(PointStage) int64
	keep  func(PointStage) bool
}

func throughput(points []Point) *Throughput {
	if len(points) < 2 {
		return nil
	}
	sort.SliceStable(points, func(i, j int) bool { return points[i].T.Before(points[j].T) })
	tp := &Throughput{}
	for i, p := range points {
		tp.Finished = append(tp.Finished, XY{p.T, float64(p.Finished)})
		if i > 0 && newStart(points[i-1], p) {
			tp.Starts = append(tp.Starts, p.T.Add(-time.Duration(p.Elapsed*float64(time.Second))))
		}
	}
	var lines []rateLine
	seen := map[string]bool{}
	for _, p := range points {
		for _, st := range p.Stages {
			if seen[st.ID] {
				continue
			}
			seen[st.ID] = true
			id := st.ID
			switch {
			case generates(st.Kind):
				lines = append(lines, rateLine{name: id + " completions/s", count: func(s PointStage) int64 { return s.Out + s.Rejected }, keep: func(s PointStage) bool { return s.ID == id }})
			case writesRowsOf(st.Kind):
				lines = append(lines, rateLine{name: id + " rows/s", count: func(s PointStage) int64 { return s.Out }, keep: func(s PointStage) bool { return s.ID == id }})
			}
		}
	}
	lines = append(lines, rateLine{name: "rejected/s (all stages)", count: func(s PointStage) int64 { return s.Rejected }, keep: func(PointStage) bool { return true }})
	for _, l := range lines {
		tp.Rates = append(tp.Rates, Series{Name: l.name, Points: rates(points, l)})
	}
	return tp
}

// rates is l's rate between consecutive points of one start, averaged into
// at most maxPlotPoints buckets of equal time.
func rates(points []Point, l rateLine) []XY {
	total := func(p Point) int64 {
		var n int64
		for _, s := range p.Stages {
			if l.keep(s) {
				n += l.count(s)
			}
		}
		return n
	}
	first, last := points[0].T, points[len(points)-1].T
	span := last.Sub(first)
	if span <= 0 {
		return nil
	}
	nb := min(maxPlotPoints, len(points)-1)
	type bucket struct {
		n    int64
		secs float64
	}
	b := make([]bucket, nb)
	for i := 1; i < len(points); i++ {
		p, q := points[i-1], points[i]
		dt := q.T.Sub(p.T).Seconds()
		if newStart(p, q) || dt <= 0 {
			continue // a new start: its counts begin again from zero
		}
		mid := p.T.Add(q.T.Sub(p.T) / 2)
		k := min(nb-1, int(float64(nb)*float64(mid.Sub(first))/float64(span)))
		b[k].n += total(q) - total(p)
		b[k].secs += dt
	}
	var out []XY
	for k, x := range b {
		if x.secs == 0 {
			continue
		}
		at := first.Add(time.Duration((float64(k) + 0.5) / float64(nb) * float64(span)))
		out = append(out, XY{at, max(0, float64(x.n)/x.secs)})
	}
	return out
}

// newStart reports whether q comes from a later start of the run than p: its
// pid differs, or — pids repeat in containers (PID 1 every time) — its
// elapsed time went back.
// redone sums each stage's Redone over the run's starts: the last figure
// of each start (a start's counts grow from zero); nil when none is.
func redone(points []Point) map[string]int64 {
	points = slices.Clone(points)
	sort.SliceStable(points, func(i, j int) bool { return points[i].T.Before(points[j].T) })
	var total, start map[string]int64
	flush := func() {
		for id, n := range start {
			if total == nil {
				total = map[string]int64{}
			}
			total[id] += n
		}
		start = nil
	}
	for i, p := range points {
		if i > 0 && newStart(points[i-1], p) {
			flush()
		}
		for _, st := range p.Stages {
			if st.Redone > 0 {
				if start == nil {
					start = map[string]int64{}
				}
				start[st.ID] = max(start[st.ID], st.Redone)
			}
		}
	}
	flush()
	return total
}

func newStart(p, q Point) bool {
	return q.PID != p.PID || q.Elapsed < p.Elapsed
}
