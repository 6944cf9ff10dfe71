// Package figure is what a stage reports about itself (pipeline.Reporter):
// typed figures (counters, gauges, distributions, states) that the terminal,
// status.json, the run summary and the metrics endpoint render alike.
package figure

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/pipe-dev/pipe/internal/numfmt"
)

// Kind says how a figure behaves, and so how the terminal, status.json,
// the summary and the metrics endpoint show it.
type Kind string

const (
	// Counter is a total that only grows during a run: completions, tokens,
	// bytes written. Rates are computed from it by whoever shows it.
	Counter Kind = "counter"
	// Gauge is a level now: requests in flight, a rate the stage measures
	// itself, a mean.
	Gauge Kind = "gauge"
	// Quantiles is a distribution: Count observations summing to Value,
	// and some of its quantiles (e.g. latency p50 and p95).
	Quantiles Kind = "quantiles"
	// State is a word in Text (a server's "ready", "ejected", "probing", a
	// path kept aside), with Detail saying why.
	State Kind = "state"
)

// Units of figures. A figure without a unit counts records or things.
const (
	UnitTokens  = "tokens"
	UnitBytes   = "bytes"
	UnitSeconds = "seconds"
	// UnitPerSecond is a rate (of records, or of Unit of the counter it
	// came from: a figure named *_tokens_per_second is tokens a second).
	UnitPerSecond = "per_second"
)

// Names of the figures the run's economy (decoded against trained tokens)
// is summed from, over every stage that reports them without labels: a
// stage that decodes on servers reports DecodedTokens (the output tokens
// of every completion it got), one that builds training rows
// TrainedTokens (their loss tokens within the trainer's max_length), one
// that keeps completions cut at the trainer's length KeptAtLength.
const (
	DecodedTokens = "decoded_tokens"
	TrainedTokens = "trained_tokens"
	KeptAtLength  = "kept_at_length"
)

// Figure is one number (or word) a stage reports about itself. Names are
// snake_case and stable (they become metric names); Labels tell apart
// figures of one name, e.g. {"server": "127.0.0.1:30000"} or
// {"class": "http_503"}.
type Figure struct {
	Name   string            `json:"name"`
	Kind   Kind              `json:"kind"`
	Unit   string            `json:"unit,omitempty"`
	Labels map[string]string `json:"labels,omitempty"`
	// Value is the counter's or gauge's value, a distribution's sum.
	Value float64 `json:"value"`
	// Count is how many observations a distribution holds.
	Count int64 `json:"count,omitempty"`
	// Quantiles of a distribution, in ascending Q.
	Quantiles []Quantile `json:"quantiles,omitempty"`
	// Text and Detail are a State's word and why.
	Text   string `json:"text,omitempty"`
	Detail string `json:"detail,omitempty"`
}

// Quantile is one quantile of a distribution: Q in 0..1, its value V.
type Quantile struct {
	Q float64 `json:"q"`
	V float64 `json:"v"`
}

// NewCounter returns a counter; labels are key, value pairs.
func NewCounter(name string, v int64, labels ...string) Figure {
	return Figure{Name: name, Kind: Counter, Value: float64(v), Labels: labelMap(labels)}
}

// NewGauge returns a gauge; labels are key, value pairs.
func NewGauge(name string, v float64, labels ...string) Figure {
	return Figure{Name: name, Kind: Gauge, Value: v, Labels: labelMap(labels)}
}

// NewState returns a state figure; labels are key, value pairs.
func NewState(name, text, detail string, labels ...string) Figure {
	return Figure{Name: name, Kind: State, Text: text, Detail: detail, Labels: labelMap(labels)}
}

// NewQuantiles returns a distribution of count observations summing to sum.
func NewQuantiles(name string, count int64, sum float64, qs []Quantile, labels ...string) Figure {
	return Figure{Name: name, Kind: Quantiles, Count: count, Value: sum, Quantiles: qs, Labels: labelMap(labels)}
}

// In sets the figure's unit.
func (f Figure) In(unit string) Figure { f.Unit = unit; return f }

func labelMap(kv []string) map[string]string {
	if len(kv) == 0 {
		return nil
	}
	m := make(map[string]string, len(kv)/2)
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return m
}

// Label returns the value of one of the figure's labels.
func (f Figure) Label(key string) string { return f.Labels[key] }

// Q returns the value of quantile q, or 0 when the figure has none.
func (f Figure) Q(q float64) float64 {
	for _, x := range f.Quantiles {
		if x.Q == q {
			return x.V
		}
	}
	return 0
}

// Find returns the figure named name whose labels include every
// key, value pair given.
func Find(figs []Figure, name string, labels ...string) (Figure, bool) {
	for _, f := range figs {
		if f.Name != name {
			continue
		}
		ok := true
		for i := 0; i+1 < len(labels); i += 2 {
			if f.Labels[labels[i]] != labels[i+1] {
				ok = false
				break
			}
		}
		if ok && (len(labels) > 0 || len(f.Labels) == 0) {
			return f, true
		}
	}
	return Figure{}, false
}

// FormatValue shows the figure's value in its unit: "1.2 GiB", "350 ms",
// "p50 1.2s p95 3.4s", "ejected (HTTP 503)".
func (f Figure) FormatValue() string {
	switch f.Kind {
	case State:
		if f.Detail != "" {
			return f.Text + " (" + f.Detail + ")"
		}
		return f.Text
	case Quantiles:
		if f.Count == 0 {
			return "none yet"
		}
		parts := make([]string, 0, len(f.Quantiles)+1)
		for _, q := range f.Quantiles {
			parts = append(parts, fmt.Sprintf("p%s %s", strconv.FormatFloat(q.Q*100, 'f', -1, 64), formatNumber(q.V, f.Unit)))
		}
		return strings.Join(parts, " ")
	}
	return formatNumber(f.Value, f.Unit)
}

func formatNumber(v float64, unit string) string {
	switch unit {
	case UnitBytes:
		return numfmt.Bytes(int64(v))
	case UnitSeconds:
		d := time.Duration(v * float64(time.Second))
		switch {
		case d >= time.Minute:
			return d.Round(time.Second).String()
		case d >= time.Second:
			return d.Round(10 * time.Millisecond).String()
		}
		return d.Round(time.Millisecond).String()
	case UnitPerSecond:
		return numfmt.Count(v) + "/s"
	}
	return numfmt.Count(v)
}

// splitLabels are labels that tell apart parts of one figure (errors by
// class, rows by source) rather than the thing it is about (a server): they
// are shown inside one line, "errors http_503 2, transport 1".
var splitLabels = []string{"class", "reason", "source", "prompt"}

// Line is a group of figures about one thing: Subject names it
// ("server 127.0.0.1:30000", or "" for the stage itself), Parts are
// "name value" texts in the order reported.
type Line struct {
	Subject string
	Parts   []string
}

// Lines groups a stage's figures for reading: one line per subject
// (the figures' labels other than splitLabels), figures of one name and
// subject merged into one part.
func Lines(figs []Figure) []Line {
	var lines []Line
	index := map[string]int{}
	type partKey struct{ line, name string }
	parts := map[partKey]int{}
	for _, f := range figs {
		subj, split := subject(f.Labels)
		li, ok := index[subj]
		if !ok {
			li = len(lines)
			index[subj] = li
			lines = append(lines, Line{Subject: subj})
		}
		name := strings.ReplaceAll(f.Name, "_", " ")
		if f.Unit == UnitPerSecond {
			name = strings.TrimSuffix(name, " per second") // the value says "/s"
		}
		text := f.FormatValue()
		if split == "" {
			lines[li].Parts = append(lines[li].Parts, name+" "+text)
			continue
		}
		pk := partKey{subj, f.Name}
		if pi, ok := parts[pk]; ok {
			lines[li].Parts[pi] += ", " + split + " " + text
			continue
		}
		parts[pk] = len(lines[li].Parts)
		lines[li].Parts = append(lines[li].Parts, name+" "+split+" "+text)
	}
	return lines
}

// subject names what labels are about ("server 127.0.0.1:30000") and the
// splitting labels' values.
func subject(labels map[string]string) (subj, split string) {
	var s, p []string
	for _, k := range slices.Sorted(maps.Keys(labels)) {
		if slices.Contains(splitLabels, k) {
			p = append(p, labels[k])
		} else {
			s = append(s, k+" "+labels[k])
		}
	}
	return strings.Join(s, ", "), strings.Join(p, " ")
}
