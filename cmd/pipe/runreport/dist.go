package runreport

import (
	"fmt"
	"math/bits"
	"slices"
)

// Dist is the distribution of one count per row (e.g. loss tokens), with
// bins that double in width — 0, 1, 2–3, 4–7, 8–15, … — so that a pile of
// rows with a handful of tokens stands out next to rows with thousands.
type Dist struct {
	Name string `json:"name"` // e.g. "loss tokens"
	// Note says where the numbers come from when it matters (e.g. thinking
	// tokens estimated from text length).
	Note  string  `json:"note,omitempty"`
	N     int64   `json:"rows"`
	Sum   int64   `json:"sum"`
	Mean  float64 `json:"mean"`
	Min   int64   `json:"min"`
	Max   int64   `json:"max"`
	P10   int64   `json:"p10"`
	P50   int64   `json:"p50"`
	P90   int64   `json:"p90"`
	P99   int64   `json:"p99"`
	Zero  int64   `json:"zero"`  // rows with 0
	Small int64   `json:"small"` // rows with fewer than SmallBelow
	Bins  []Bin   `json:"bins"`
}

// SmallBelow is where "a handful" ends: rows below it are counted as Small.
const SmallBelow = 16

// Bin counts the rows with Lo <= value <= Hi.
type Bin struct {
	Lo    int64 `json:"lo"`
	Hi    int64 `json:"hi"`
	Count int64 `json:"count"`
}

// Label is the bin's range as shown: "0", "1", "2–3", "4K–8K".
func (b Bin) Label() string {
	if b.Lo == b.Hi {
		return short(b.Lo)
	}
	return short(b.Lo) + "–" + short(b.Hi)
}

func short(v int64) string {
	switch {
	case v >= 1<<20 && v%(1<<20) == 0:
		return fmt.Sprintf("%dM", v>>20)
	case v >= 1<<10 && (v+1)%(1<<10) == 0:
		return fmt.Sprintf("%dK", (v+1)>>10) // 1023 → "1K" as the end of a bin
	case v >= 1<<10 && v%(1<<10) == 0:
		return fmt.Sprintf("%dK", v>>10)
	}
	return fmt.Sprint(v)
}

// Share is part/whole as a fraction, 0 for an empty whole.
func Share(part, whole int64) float64 {
	if whole == 0 {
		return 0
	}
	return float64(part) / float64(whole)
}

// sample collects the values of one distribution as a count per value:
// exact order statistics in memory bounded by the distinct values (token
// counts: at most the longest row), not by the rows.
type sample struct {
	name, note string
	n          int64
	counts     map[int32]int64
}

func (s *sample) add(v int) {
	if v < 0 {
		v = 0
	}
	if s.counts == nil {
		s.counts = map[int32]int64{}
	}
	s.counts[int32(min(v, 1<<31-1))]++
	s.n++
}

// binOf is the index of v's bin: 0 → 0, 1 → 1, 2–3 → 2, 4–7 → 3, …
func binOf(v int64) int {
	if v <= 0 {
		return 0
	}
	return bits.Len64(uint64(v))
}

func binRange(i int) (lo, hi int64) {
	if i == 0 {
		return 0, 0
	}
	return 1 << (i - 1), 1<<i - 1
}

// dist summarizes the sample.
func (s *sample) dist() Dist {
	d := Dist{Name: s.name, Note: s.note, N: s.n}
	if d.N == 0 {
		return d
	}
	vals := make([]int32, 0, len(s.counts))
	for v := range s.counts {
		vals = append(vals, v)
	}
	slices.Sort(vals)
	// The k-th smallest value (from 0), walking the counts in order.
	at := func(k int64) int64 {
		for _, v := range vals {
			if k < s.counts[v] {
				return int64(v)
			}
			k -= s.counts[v]
		}
		return int64(vals[len(vals)-1])
	}
	pct := func(p float64) int64 { return at(int64(p*float64(d.N-1) + 0.5)) }
	d.Min, d.Max = int64(vals[0]), int64(vals[len(vals)-1])
	d.P10, d.P50, d.P90, d.P99 = pct(0.10), pct(0.50), pct(0.90), pct(0.99)
	counts := make([]int64, binOf(d.Max)+1)
	for _, x := range vals {
		c := s.counts[x]
		d.Sum += int64(x) * c
		counts[binOf(int64(x))] += c
		if x == 0 {
			d.Zero += c
		}
		if x < SmallBelow {
			d.Small += c
		}
	}
	d.Mean = float64(d.Sum) / float64(d.N)
	for i, c := range counts {
		lo, hi := binRange(i)
		d.Bins = append(d.Bins, Bin{Lo: lo, Hi: hi, Count: c})
	}
	return d
}
