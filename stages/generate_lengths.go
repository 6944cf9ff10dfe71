package stages

import (
	"math"
	"slices"
	"sync"

	"github.com/pipe-dev/pipe/pipeline/record"
	"github.com/pipe-dev/pipe/pipeline/view"
)

// lengthKeep is how many completions' lengths are kept for quantiles: the
// first ones (a plan's sample is all of them).
const lengthKeep = 8192

// lengths follows the output tokens of the completions generate sent on:
// their moments, the share cut at the length limit, and the first
// lengthKeep lengths and latencies for quantiles. pipe plan projects a run
// from them.
type lengths struct {
	mu         sync.Mutex
	n, cut     int64
	sum, sumSq float64
	kept       []int
	latencies  []float64
}

func (l *lengths) add(c *record.Completion) {
	l.mu.Lock()
	defer l.mu.Unlock()
	x := float64(c.CompletionTokens)
	l.n++
	l.sum += x
	l.sumSq += x * x
	if c.FinishReason == "length" {
		l.cut++
	}
	if len(l.kept) < lengthKeep {
		l.kept = append(l.kept, c.CompletionTokens)
		l.latencies = append(l.latencies, c.LatencySeconds)
	}
}

func (l *lengths) view() *view.Lengths {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.n == 0 {
		return nil
	}
	v := &view.Lengths{Completions: l.n, Mean: l.sum / float64(l.n), Cut: l.cut}
	if l.n > 1 {
		v.SD = math.Sqrt(max(0, (l.sumSq-l.sum*l.sum/float64(l.n))/float64(l.n-1)))
	}
	kept := slices.Clone(l.kept)
	slices.Sort(kept)
	at := func(q float64) int { return kept[min(len(kept)-1, int(q*float64(len(kept))))] }
	v.P50, v.P90, v.P99, v.Max = at(0.5), at(0.9), at(0.99), kept[len(kept)-1]
	lat := slices.Clone(l.latencies)
	slices.Sort(lat)
	var s float64
	for _, x := range lat {
		s += x
	}
	v.LatencyMean, v.LatencyP99 = s/float64(len(lat)), lat[min(len(lat)-1, int(0.99*float64(len(lat))))]
	return v
}
