package shardruns

import (
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/pipe-dev/pipe/pipeline"
	"github.com/pipe-dev/pipe/pipeline/rundir"
)

// Progress is one shard's progress, as WriteStatus shows it.
type Progress struct {
	Shard    string // "I/N"
	State    string
	Dir      string
	Finished int64
	// Rate is ids finished per second in its latest start (0: unknown).
	Rate float64
	// ETA is the time left at Rate for its share of the input; 0 when
	// unknown (no rate, or no shard has read the whole input yet) or done.
	ETA time.Duration
}

// Totals sums the shards of a sharded run.
type Totals struct {
	Shards, Done, Running, Missing int
	Finished                       int64
	// Expected is the ids the whole input holds, known once a shard has
	// read all of it (0 until then).
	Expected int64
	Rate     float64
	ETA      time.Duration // the slowest shard's
}

// Summarize computes every shard's progress (missing shards too) and the
// totals; runs need not be complete, and may be of several N (the first
// run's N counts the missing ones).
func Summarize(runs []*Run) ([]Progress, Totals) {
	var t Totals
	if len(runs) == 0 {
		return nil, t
	}
	n := runs[0].Shard.Count
	t.Shards = n
	t.Expected = expectedInput(runs)
	have := map[int]bool{}
	var out []Progress
	for _, r := range runs {
		have[r.Shard.Index] = true
		p := progressOf(r)
		switch {
		case r.Done():
			t.Done++
		case r.Live && r.Status != nil:
			t.Running++
			p.Rate, p.ETA = liveETA(r, p, t.Expected)
			t.Rate += p.Rate
		}
		t.Finished += p.Finished
		t.ETA = max(t.ETA, p.ETA)
		out = append(out, p)
	}
	for i := 0; i < n; i++ {
		if !have[i] {
			t.Missing++
			out = append(out, Progress{Shard: fmt.Sprintf("%d/%d", i, n), State: "missing"})
		}
	}
	return out, t
}

// expectedInput is the input's size: what a run counted or read to the
// end, else what a run that finished read (its source took every record,
// its own and other shards'); 0 when no run knows it.
func expectedInput(runs []*Run) int64 {
	var expected int64
	for _, r := range runs {
		if st := r.Status; st != nil {
			if st.Input != nil && (st.Input.Counted || st.Input.Complete) {
				expected = max(expected, st.Input.Estimated)
			} else if r.Done() {
				expected = max(expected, sourceIn(st.Stages))
			}
		}
	}
	return expected
}

// progressOf is a run's progress as its status tells it: ids finished and
// the average rate of its latest start, without an ETA.
func progressOf(r *Run) Progress {
	p := Progress{Shard: r.Shard.String(), State: r.State(), Dir: r.Dir}
	if st := r.Status; st != nil {
		p.Finished = int64(st.Finished)
		if st.ElapsedS > 0 {
			p.Rate = float64(st.Finished-st.Before) / st.ElapsedS
		}
	}
	return p
}

// liveETA is the rate and ETA of a live run: the run's own (recent rate,
// its share of the input left), else its share of expected at its
// average rate p.Rate; ETA 0 when neither is known.
func liveETA(r *Run, p Progress, expected int64) (float64, time.Duration) {
	if eta := r.Status.ETA; eta != nil && eta.PerSecond > 0 {
		return eta.PerSecond, time.Duration(eta.Seconds * float64(time.Second))
	}
	if share := expected / int64(r.Shard.Count); share > p.Finished && p.Rate > 0 {
		return p.Rate, time.Duration(float64(share-p.Finished) / p.Rate * float64(time.Second))
	}
	return p.Rate, 0
}

// sourceIn is what a run's source took: the most any stage took in.
func sourceIn(stages []rundir.Stage) int64 {
	var in int64
	for _, s := range stages {
		in = max(in, s.In)
	}
	return in
}

// WriteStatus prints one line per shard and a total line.
func WriteStatus(w io.Writer, runs []*Run) error {
	ps, t := Summarize(runs)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "shard\tstate\tfinished\tids/s\tETA\t\trun directory")
	for _, p := range ps {
		rate, eta := "-", "-"
		if p.Rate > 0 && p.ETA > 0 {
			rate = fmt.Sprintf("%.1f", p.Rate)
		}
		if p.ETA > 0 {
			eta = p.ETA.Round(time.Second).String()
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t\t%s\n", p.Shard, p.State, p.Finished, rate, eta, pipeline.DisplayPath(p.Dir))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	line := fmt.Sprintf("total: %d shards, %d done, %d running, %d missing; %d ids finished", t.Shards, t.Done, t.Running, t.Missing, t.Finished)
	if t.Expected > 0 {
		line += fmt.Sprintf(" of %d (%.1f%%)", t.Expected, 100*float64(t.Finished)/float64(t.Expected))
	}
	if t.Rate > 0 {
		line += fmt.Sprintf(", %.1f ids/s", t.Rate)
	}
	if t.ETA > 0 {
		line += ", ETA " + t.ETA.Round(time.Second).String()
	}
	_, err := fmt.Fprintln(w, line)
	return err
}
