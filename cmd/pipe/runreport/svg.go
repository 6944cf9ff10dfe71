package runreport

import (
	"fmt"
	"html"
	"math"
	"strings"
	"time"
	"unicode/utf8"
)

// The plots are inline SVG written here: bars and lines are <rect
// class="bar"> and <path class="line"> elements with a <title> each (the
// browser's tooltip), inside <svg class="plot" data-plot="NAME">, so a
// test can find every plot and its marks in the DOM.

// palette holds the line colours, told apart in colour-blind vision too.
var palette = []string{"#0072b2", "#d55e00", "#009e73", "#cc79a7", "#e69f00", "#56b4e9", "#000000"}

const (
	colorSmall = "#d55e00" // bins below SmallBelow: "a handful"
	colorBar   = "#0072b2"
)

type svg struct {
	sb   strings.Builder
	w, h int
}

func newSVG(name, label string, w, h int) *svg {
	s := &svg{w: w, h: h}
	fmt.Fprintf(&s.sb, `<svg class="plot" data-plot="%s" role="img" aria-label="%s" viewBox="0 0 %d %d" width="%d" height="%d" xmlns="http://www.w3.org/2000/svg">`,
		attr(name), attr(label), w, h, w, h)
	return s
}

func (s *svg) add(format string, args ...any) { fmt.Fprintf(&s.sb, format, args...) }

func (s *svg) text(x, y float64, anchor, class, t string) {
	s.add(`<text x="%.1f" y="%.1f" text-anchor="%s" class="%s">%s</text>`, x, y, anchor, class, html.EscapeString(t))
}

func (s *svg) String() string { return s.sb.String() + "</svg>" }

func attr(s string) string { return html.EscapeString(s) }

// niceTicks returns about n round tick values from 0 to at least top.
func niceTicks(top float64, n int) []float64 {
	if top <= 0 {
		return []float64{0, 1}
	}
	raw := top / float64(n)
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	step := mag
	for _, m := range []float64{1, 2, 2.5, 5, 10} {
		if m*mag >= raw {
			step = m * mag
			break
		}
	}
	var out []float64
	for v := 0.0; ; v += step {
		out = append(out, v)
		if v >= top {
			return out
		}
	}
}

func num(v float64) string {
	switch {
	case v >= 1e6:
		return fmt.Sprintf("%.3gM", v/1e6)
	case v >= 1e4:
		return fmt.Sprintf("%.3gK", v/1e3)
	case v == math.Trunc(v):
		return fmt.Sprintf("%.0f", v)
	case v >= 10:
		return fmt.Sprintf("%.0f", v)
	}
	return fmt.Sprintf("%.2g", v)
}

// histogramSVG draws a distribution's doubling bins as bars of the share of
// rows, the bins below SmallBelow in their own colour.
func histogramSVG(name string, d Dist) string {
	// top leaves room, under the title and its figures, for the share
	// printed above a bar as tall as the plot (all rows in one bin).
	const w, h, left, right, top, bottom = 460, 262, 46, 10, 52, 44
	s := newSVG(name, d.Name+" per row", w, h)
	pw, ph := float64(w-left-right), float64(h-top-bottom)
	var peak float64
	for _, b := range d.Bins {
		peak = max(peak, Share(b.Count, d.N))
	}
	ticks := niceTicks(peak*100, 4)
	ymax := ticks[len(ticks)-1] / 100
	for _, t := range ticks {
		y := float64(top) + ph - ph*(t/100)/ymax
		s.add(`<line class="grid" x1="%d" x2="%d" y1="%.1f" y2="%.1f"/>`, left, w-right, y, y)
		s.text(float64(left-4), y+4, "end", "tick", num(t)+"%")
	}
	bw := pw / float64(max(1, len(d.Bins)))
	for i, b := range d.Bins {
		share := Share(b.Count, d.N)
		bh := ph * share / ymax
		x := float64(left) + float64(i)*bw
		color := colorBar
		if b.Hi < SmallBelow {
			color = colorSmall
		}
		s.add(`<rect class="bar" x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s"><title>%s %s: %d rows (%s)</title></rect>`,
			x+1, float64(top)+ph-bh, max(1, bw-2), max(bh, 0.5), color, attr(b.Label()), attr(d.Name), b.Count, pct(share))
		// A bar's share above it only where it fits the bar's width.
		if v := pct(share); share >= 0.03 && textWidth(v, 10) <= bw-2 {
			s.text(x+bw/2, float64(top)+ph-bh-3, "middle", "val", v)
		}
	}
	// Bin labels level under the bars, every step-th one: as many as fit
	// without touching.
	step := 1
	for i := range d.Bins {
		if need := textWidth(d.Bins[i].Label(), 11) + 6; need > float64(step)*bw {
			step = int(math.Ceil(need / bw))
		}
	}
	for i := 0; i < len(d.Bins); i += step {
		s.text(float64(left)+(float64(i)+0.5)*bw, float64(top)+ph+14, "middle", "tick", d.Bins[i].Label())
	}
	s.add(`<line class="axis" x1="%d" x2="%d" y1="%.1f" y2="%.1f"/>`, left, w-right, float64(top)+ph, float64(top)+ph)
	// The title, and its figures on a line of their own below it.
	s.text(float64(left), 15, "start", "ptitle", d.Name+" per row: % of rows")
	s.text(float64(left), 30, "start", "axislabel", fmt.Sprintf("median %d · p90 %d · max %d · %s rows", d.P50, d.P90, d.Max, num(float64(d.N))))
	s.text(float64(w-right), float64(h-6), "end", "axislabel", fmt.Sprintf("%s (bins double; under %d in orange)", d.Name, SmallBelow))
	return s.String()
}

// reasonsSVG draws rejections by stage and reason as horizontal bars.
func reasonsSVG(name string, rs []Reason, total int64) string {
	const w, left, right, rowH, top = 720, 260, 150, 22, 8
	n := min(len(rs), 20)
	h := max(120, top+n*rowH+8)
	s := newSVG(name, "rejections by reason", w, h)
	var peak int64
	for _, r := range rs[:n] {
		peak = max(peak, r.Count)
	}
	pw := float64(w - left - right)
	for i, r := range rs[:n] {
		y := float64(top + i*rowH)
		bw := pw * float64(r.Count) / float64(max(1, peak))
		label := r.Stage + " · " + r.Reason
		s.text(float64(left-6), y+15, "end", "tick", clipLabel(label, float64(left-12), 11))
		s.add(`<rect class="bar" x="%d" y="%.1f" width="%.1f" height="%d" fill="%s"><title>%s: %d (%s of rejections)</title></rect>`,
			left, y+3, max(bw, 1), rowH-6, colorSmall, attr(label), r.Count, pct(Share(r.Count, total)))
		s.text(float64(left)+bw+6, y+15, "start", "val", fmt.Sprintf("%d (%s of rejects)", r.Count, pct(Share(r.Count, total))))
	}
	return s.String()
}

// linesSVG draws series over time, with dashed lines where a new start of
// the run began.
func linesSVG(name, title, ylabel string, series []Series, starts []time.Time) string {
	const w, h, left, right, top, bottom = 720, 260, 56, 16, 26, 40
	const perRow = 3
	legendH := 16 * ((len(series) + perRow - 1) / perRow)
	s := newSVG(name, title, w, h+legendH)
	lp := &linePlot{left: left, top: top, pw: float64(w - left - right), ph: float64(h - top - bottom)}
	var peak float64
	lp.t0, lp.t1, peak = seriesExtent(series)
	lp.span = lp.t1.Sub(lp.t0)
	if lp.span <= 0 {
		lp.span = time.Second
	}
	ticks := niceTicks(peak, 4)
	lp.ymax = ticks[len(ticks)-1]
	if lp.ymax == 0 {
		lp.ymax = 1
	}
	for _, t := range ticks {
		s.add(`<line class="grid" x1="%d" x2="%d" y1="%.1f" y2="%.1f"/>`, left, w-right, lp.yOf(t), lp.yOf(t))
		s.text(float64(left-4), lp.yOf(t)+4, "end", "tick", num(t))
	}
	lp.timeLabels(s)
	for _, st := range starts {
		if !st.Before(lp.t0) && !st.After(lp.t1) {
			s.add(`<line class="restart" x1="%.1f" x2="%.1f" y1="%d" y2="%.1f"><title>a new start of the run</title></line>`, lp.xOf(st), lp.xOf(st), top, float64(top)+lp.ph)
		}
	}
	for i, sr := range series {
		if len(sr.Points) == 0 {
			continue
		}
		color := palette[i%len(palette)]
		lp.line(s, sr, color)
		colW := lp.pw / perRow
		lx, ly := float64(left)+float64(i%perRow)*colW, float64(h+(i/perRow)*16+4)
		s.add(`<rect x="%.1f" y="%.1f" width="14" height="4" fill="%s"/>`, lx, ly-4, color)
		s.text(lx+18, ly, "start", "tick", clipLabel(sr.Name, colW-24, 11))
	}
	s.add(`<line class="axis" x1="%d" x2="%d" y1="%.1f" y2="%.1f"/>`, left, w-right, float64(top)+lp.ph, float64(top)+lp.ph)
	s.text(float64(left), 16, "start", "ptitle", title)
	s.text(float64(w-right), 16, "end", "axislabel", ylabel)
	return s.String()
}

// seriesExtent is the first and last time and the largest value of the
// points of series.
func seriesExtent(series []Series) (t0, t1 time.Time, peak float64) {
	for _, sr := range series {
		for _, p := range sr.Points {
			if t0.IsZero() || p.X.Before(t0) {
				t0 = p.X
			}
			if p.X.After(t1) {
				t1 = p.X
			}
			peak = max(peak, p.Y)
		}
	}
	return t0, t1, peak
}

// linePlot maps times and values to linesSVG's plot area: pw × ph px at
// (left, top), t0 to t0+span across, 0 to ymax up.
type linePlot struct {
	left, top int
	pw, ph    float64
	t0, t1    time.Time
	span      time.Duration
	ymax      float64
}

func (lp *linePlot) xOf(t time.Time) float64 {
	return float64(lp.left) + lp.pw*float64(t.Sub(lp.t0))/float64(lp.span)
}
func (lp *linePlot) yOf(v float64) float64 { return float64(lp.top) + lp.ph - lp.ph*v/lp.ymax }

// timeLabels writes the time axis's labels: at most 5, fewer where they
// would touch.
func (lp *linePlot) timeLabels(s *svg) {
	ticksX := 4
	for ticksX > 1 && textWidth(clock(lp.t1, lp.span), 11)+12 > lp.pw/float64(ticksX) {
		ticksX--
	}
	for i := 0; i <= ticksX; i++ {
		t := lp.t0.Add(lp.span * time.Duration(i) / time.Duration(ticksX))
		anchor := "middle"
		switch i {
		case 0:
			anchor = "start"
		case ticksX:
			anchor = "end"
		}
		s.text(lp.xOf(t), float64(lp.top)+lp.ph+16, anchor, "tick", clock(t, lp.span))
	}
}

// line draws one series in color: a path, and a dot when it has one point.
func (lp *linePlot) line(s *svg, sr Series, color string) {
	var d strings.Builder
	for j, p := range sr.Points {
		cmd := "L"
		if j == 0 {
			cmd = "M"
		}
		fmt.Fprintf(&d, "%s%.1f %.1f ", cmd, lp.xOf(p.X), lp.yOf(p.Y))
	}
	s.add(`<path class="line" d="%s" stroke="%s"><title>%s</title></path>`, strings.TrimSpace(d.String()), color, attr(sr.Name))
	if len(sr.Points) == 1 {
		p := sr.Points[0]
		s.add(`<circle class="dot" cx="%.1f" cy="%.1f" r="3" fill="%s"/>`, lp.xOf(p.X), lp.yOf(p.Y), color)
	}
}

// textWidth is an upper bound of the width of s in px at a font size of
// size px in the page's sans-serif (wide glyphs take about 0.62 em).
func textWidth(s string, size float64) float64 {
	return float64(utf8.RuneCountInString(s)) * size * 0.62
}

// clipLabel cuts a label to fit width px (its full text stays in the
// plot's tooltip).
func clipLabel(s string, width, size float64) string {
	r := []rune(s)
	for len(r) > 1 && textWidth(string(r), size) > width {
		r = append(r[:len(r)-2], '…')
	}
	return string(r)
}

// clock labels a time axis: the time of day, with the date for long runs.
func clock(t time.Time, span time.Duration) string {
	t = t.Local()
	switch {
	case span >= 24*time.Hour:
		return t.Format("Jan 2 15:04")
	case span >= 10*time.Minute:
		return t.Format("15:04")
	}
	return t.Format("15:04:05")
}
