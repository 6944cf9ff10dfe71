package runreport

import (
	"fmt"
	"github.com/pipe-dev/pipe/internal/numfmt"
	"io"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/pipe-dev/pipe/pipeline"
)

// WriteText prints the report for a terminal: counts, reject reasons,
// throughput, and each output's distributions as figures and a one-line
// histogram, with the sentence that matters ("most rows have fewer than 16
// loss tokens") spelled out.
func (r *Report) WriteText(w io.Writer) {
	r.writeTitle(w)
	for _, h := range r.Headline() {
		fmt.Fprintf(w, "  %s\n", h.Text)
	}
	fmt.Fprintf(w, "  finished ids: %d\n", r.Finished)
	fmt.Fprintf(w, "  rejected:     %d%s\n", r.RejectedAll, topReasons(r.Rejected, r.RejectedAll))
	fmt.Fprintf(w, "  failed:       %d%s\n", r.FailedAll, topReasons(r.Failed, r.FailedAll))
	for _, id := range slices.Sorted(maps.Keys(r.Redone)) {
		fmt.Fprintf(w, "  journal damage: %s did %s again, their journal entries lost to damage (the warnings in run.log name them)\n", id, numfmt.Plural(r.Redone[id], "record"))
	}
	r.writeServers(w)
	r.writeRates(w)
	r.writeEconomy(w)
	for i := range r.Outputs {
		writeOutputText(w, &r.Outputs[i])
	}
	for _, h := range r.Handoffs {
		fmt.Fprintf(w, "\n  handoff to SpecForge, output %s (%s):\n", h.Stage, pipeline.DisplayPath(h.Path))
		for _, line := range strings.Split(strings.TrimRight(h.Text, "\n"), "\n") {
			fmt.Fprintf(w, "    %s\n", line)
		}
	}
	for _, n := range r.Notes {
		fmt.Fprintf(w, "  note: %s\n", n)
	}
}

// writeTitle writes the report's first line: the run directory, its state,
// when it was created and how often it started.
func (r *Report) writeTitle(w io.Writer) {
	fmt.Fprintf(w, "report of %s", pipeline.DisplayPath(r.RunDir))
	var about []string
	if r.State != "" {
		about = append(about, "state "+r.State)
	}
	if !r.Created.IsZero() {
		about = append(about, "created "+r.Created.Local().Format(time.DateTime))
	}
	if r.Starts > 0 {
		about = append(about, numfmt.Plural(int64(r.Starts), "start"))
	}
	if len(about) > 0 {
		fmt.Fprintf(w, " (%s)", strings.Join(about, ", "))
	}
	fmt.Fprintln(w)
}

// writeRates writes the throughput (mean, peak, last), the output tokens/s
// and the concurrency limits over the run.
func (r *Report) writeRates(w io.Writer) {
	if tp := r.Throughput; tp != nil {
		for _, s := range tp.Rates {
			if len(s.Points) == 0 {
				continue
			}
			mean, peak := meanPeak(s.Points)
			fmt.Fprintf(w, "  %-28s mean %s, peak %s, last %s\n", s.Name+":", rate(mean), rate(peak), rate(s.Points[len(s.Points)-1].Y))
		}
	}
	for _, s := range r.Tokens {
		if len(s.Points) == 0 {
			continue
		}
		mean, peak := meanPeak(s.Points)
		fmt.Fprintf(w, "  %-28s mean %s, peak %s\n", "output tokens/s, "+s.Name+":", rate(mean), rate(peak))
	}
	for _, s := range r.Limits {
		lo, hi := s.Points[0].Y, s.Points[0].Y
		for _, p := range s.Points {
			lo, hi = min(lo, p.Y), max(hi, p.Y)
		}
		fmt.Fprintf(w, "  %-28s first %.0f, last %.0f, %.0f–%.0f\n", "concurrency, "+s.Name+":", s.Points[0].Y, s.Points[len(s.Points)-1].Y, lo, hi)
	}
}

// writeEconomy writes decoded against trained tokens and the selection-bias
// panel: the output lengths of kept rows against rejected ones.
func (r *Report) writeEconomy(w io.Writer) {
	e := r.Economy
	if e == nil {
		return
	}
	for _, l := range e.Lines() {
		fmt.Fprintf(w, "  %s\n", l)
	}
	if e.Kept.N == 0 || e.Rejected.N == 0 {
		return
	}
	fmt.Fprintf(w, "    %-30s %8s %7s %7s %7s %7s %7s\n", "output tokens per row", "rows", "p10", "median", "p90", "p99", "max")
	for _, d := range []Dist{e.Kept, e.Rejected} {
		fmt.Fprintf(w, "    %-30s %8d %7d %7d %7d %7d %7d\n", strings.TrimPrefix(d.Name, "output tokens, "), d.N, d.P10, d.P50, d.P90, d.P99, d.Max)
	}
}

// writeOutputText writes one output's rows, finish reasons and
// distributions: a table, then the sentences that matter.
func writeOutputText(w io.Writer, o *Output) {
	fmt.Fprintf(w, "\n  output %s (%s, %s): %s", o.Stage, o.Kind, pipeline.DisplayPath(o.Path), numfmt.Plural(o.Rows, "row"))
	if o.RejectedRows > 0 {
		fmt.Fprintf(w, ", %d of them rejected", o.RejectedRows)
	}
	if len(o.FinishReasons) > 0 {
		fmt.Fprintf(w, "; finish reasons: %s", countsText(o.FinishReasons))
	}
	if o.ToolRows > 0 {
		fmt.Fprintf(w, "; %s with tools", numfmt.Plural(o.ToolRows, "conversation"))
	}
	fmt.Fprintln(w)
	if len(o.Dists) == 0 {
		return
	}
	fmt.Fprintf(w, "    %-16s %8s %6s %6s %7s %7s %7s %7s %7s  %s\n", "per row", "rows", "zero", "<16", "p10", "median", "p90", "p99", "max", "histogram (bins 0, 1, 2-3, 4-7, … doubling)")
	for _, d := range o.Dists {
		fmt.Fprintf(w, "    %-16s %8d %6s %6s %7d %7d %7d %7d %7d  %s\n", d.Name, d.N,
			pct(Share(d.Zero, d.N)), pct(Share(d.Small, d.N)), d.P10, d.P50, d.P90, d.P99, d.Max, Sparkline(d.Bins))
	}
	for _, d := range o.Dists {
		if s := d.Glance(); s != "" {
			fmt.Fprintf(w, "    %s\n", s)
		}
	}
	for _, d := range o.Dists {
		if d.Name == DistThinking && d.Note != "" {
			fmt.Fprintf(w, "    thinking and answer tokens: %s\n", d.Note)
		}
	}
}

// Glance is the one sentence a distribution says: where most rows are, and
// how many are empty, when that is what stands out.
func (d Dist) Glance() string {
	if d.N == 0 {
		return ""
	}
	var parts []string
	if small := Share(d.Small, d.N); small >= 0.5 {
		parts = append(parts, fmt.Sprintf("most rows (%s) have fewer than %d %s", pct(small), SmallBelow, d.Name))
	}
	if zero := Share(d.Zero, d.N); zero >= 0.05 {
		parts = append(parts, fmt.Sprintf("%s have none", pct(zero)))
	}
	if len(parts) == 0 {
		return ""
	}
	return fmt.Sprintf("%s: median %d; %s", d.Name, d.P50, strings.Join(parts, "; "))
}

// Sparkline draws bin counts as one character each, height relative to the
// largest bin; an empty bin is a dot.
func Sparkline(bins []Bin) string {
	const levels = "▁▂▃▄▅▆▇█"
	var top int64
	for _, b := range bins {
		top = max(top, b.Count)
	}
	var sb strings.Builder
	for _, b := range bins {
		if b.Count == 0 || top == 0 {
			sb.WriteString("·")
			continue
		}
		i := int(float64(b.Count) / float64(top) * 7.999)
		sb.WriteString(string([]rune(levels)[i]))
	}
	return sb.String()
}

func topReasons(rs []Reason, total int64) string {
	if total == 0 {
		return ""
	}
	var parts []string
	for i, x := range rs {
		if i == 5 {
			parts = append(parts, fmt.Sprintf("… %d more", len(rs)-5))
			break
		}
		parts = append(parts, fmt.Sprintf("%s %s %d (%s)", x.Stage, x.Reason, x.Count, pct(Share(x.Count, total))))
	}
	return " — " + strings.Join(parts, ", ")
}

func countsText(m map[string]int64) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return m[keys[i]] > m[keys[j]] || m[keys[i]] == m[keys[j]] && keys[i] < keys[j] })
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s %d", k, m[k])
	}
	return strings.Join(parts, ", ")
}

func meanPeak(pts []XY) (mean, peak float64) {
	for _, p := range pts {
		mean += p.Y
		peak = max(peak, p.Y)
	}
	return mean / float64(len(pts)), peak
}

func rate(v float64) string {
	if v >= 100 {
		return fmt.Sprintf("%.0f/s", v)
	}
	return fmt.Sprintf("%.2f/s", v)
}

func pct(f float64) string {
	switch {
	case f == 0:
		return "0%"
	case f < 0.001:
		return "<0.1%"
	case f >= 0.1:
		return fmt.Sprintf("%.0f%%", 100*f)
	}
	return fmt.Sprintf("%.1f%%", 100*f)
}
