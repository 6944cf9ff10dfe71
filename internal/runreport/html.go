package runreport

import (
	"fmt"
	"html"
	"io"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/pipe-dev/pipe/pipeline/commitlog"
)

// WriteHTMLFile writes the report to RUN_DIR/report.html, replacing it
// atomically, and returns its path.
func (r *Report) WriteHTMLFile() (string, error) {
	var sb strings.Builder
	r.WriteHTML(&sb)
	path := filepath.Join(r.RunDir, HTMLFile)
	if err := commitlog.WriteFileAtomic(path, []byte(sb.String())); err != nil {
		return "", err
	}
	return path, nil
}

// PlotNames lists the data-plot names WriteHTML draws, in order: what a
// test (or a user's tool) can expect in the page.
func (r *Report) PlotNames() []string {
	var out []string
	if tp := r.Throughput; tp != nil {
		out = append(out, "throughput", "finished")
	}
	if len(r.Rejected) > 0 {
		out = append(out, "rejected")
	}
	for _, o := range r.Outputs {
		for _, d := range o.Dists {
			out = append(out, distPlotName(o, d))
		}
	}
	return out
}

func distPlotName(o Output, d Dist) string {
	return "dist:" + o.Stage + ":" + strings.ReplaceAll(d.Name, " ", "-")
}

const css = `
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;margin:24px auto;max-width:1500px;padding:0 16px;color:#1b1b1b;background:#fff}
h1{font-size:22px;margin:0 0 4px}h2{font-size:17px;margin:28px 0 8px;border-bottom:1px solid #ddd;padding-bottom:4px}
h3{font-size:15px;margin:18px 0 6px}.sub{color:#555}
table{border-collapse:collapse;margin:6px 0}td,th{padding:3px 10px;border-bottom:1px solid #eee;text-align:right}
td:first-child,th:first-child,td.l,th.l{text-align:left}th{background:#f6f6f6;font-weight:600}
.glance{background:#fff4e5;border-left:4px solid #d55e00;padding:8px 12px;margin:8px 0}
.glance p{margin:2px 0}.note{color:#7a5a00}
.grid-plots{display:flex;flex-wrap:wrap;gap:12px}
svg.plot{background:#fcfcfc;border:1px solid #e4e4e4;border-radius:4px}
svg .grid{stroke:#e6e6e6}svg .axis{stroke:#888}svg .tick{font-size:11px;fill:#444}
svg .val{font-size:10px;fill:#333}svg .ptitle{font-size:13px;font-weight:600;fill:#222}
svg .axislabel{font-size:11px;fill:#666}svg .line{fill:none;stroke-width:2}
svg .restart{stroke:#999;stroke-dasharray:4 3}svg .bar:hover{opacity:.8}
`

// WriteHTML writes the report as one self-contained page: inline CSS and
// SVG, no script, nothing fetched.
func (r *Report) WriteHTML(w io.Writer) {
	e := html.EscapeString
	p := func(format string, args ...any) { fmt.Fprintf(w, format, args...) }
	p("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n")
	p("<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n")
	p("<title>pipe report: %s</title>\n<style>%s</style></head><body>\n", e(filepath.Base(r.RunDir)), css)
	p("<h1>Run report: %s</h1>\n<div class=\"sub\">", e(r.RunDir))
	if r.Pipeline != "" {
		p("pipeline %s · ", e(r.Pipeline))
	}
	if !r.Created.IsZero() {
		p("created %s · ", e(r.Created.Local().Format(time.DateTime)))
	}
	p("%s · state <b>%s</b>", e(plural(int64(r.Starts), "start")), e(orDash(r.State)))
	if r.Updated != "" {
		p(" (updated %s)", e(r.Updated))
	}
	p(" · report written %s</div>\n", e(r.Generated.Local().Format(time.DateTime)))
	if r.Error != "" && r.State == "failed" {
		p("<p class=\"note\">error: %s</p>\n", e(r.Error))
	}

	r.writeGlance(w)

	p("<h2>Counts</h2>\n<table><tr><th>finished ids</th><td>%d</td></tr>", r.Finished)
	p("<tr><th>rejected</th><td>%d</td></tr><tr><th>failed</th><td>%d</td></tr></table>\n", r.RejectedAll, r.FailedAll)
	if len(r.Stages) > 0 {
		p("<h3>Stages (last start)</h3>\n<table><tr><th>stage</th><th class=\"l\">kind</th><th>in</th><th>out</th><th>rejected</th><th>failed</th><th>skipped</th></tr>\n")
		for _, s := range r.Stages {
			p("<tr><td>%s</td><td class=\"l\">%s</td><td>%d</td><td>%d</td><td>%d</td><td>%d</td><td>%d</td></tr>\n", e(s.ID), e(s.Kind), s.In, s.Out, s.Rejected, s.Failed, s.Skipped)
		}
		p("</table>\n")
	}
	if len(r.Outputs) > 0 {
		p("<h3>Outputs (committed)</h3>\n<table><tr><th>stage</th><th class=\"l\">kind</th><th class=\"l\">path</th><th>rows</th><th>rejected rows</th><th class=\"l\">finish reasons</th></tr>\n")
		for _, o := range r.Outputs {
			p("<tr><td>%s</td><td class=\"l\">%s</td><td class=\"l\">%s</td><td>%d</td><td>%d</td><td class=\"l\">%s</td></tr>\n",
				e(o.Stage), e(o.Kind), e(o.Path), o.Rows, o.RejectedRows, e(countsText(o.FinishReasons)))
		}
		p("</table>\n")
	}

	p("<h2>Throughput over time</h2>\n")
	if tp := r.Throughput; tp != nil {
		p("<div class=\"grid-plots\">%s\n%s</div>\n",
			linesSVG("throughput", "records per second", "per second", tp.Rates, tp.Starts),
			linesSVG("finished", "finished ids", "ids", []Series{{Name: "finished ids", Points: tp.Finished}}, tp.Starts))
	} else {
		p("<p class=\"note\">No timeline: %s has fewer than two points.</p>\n", TimelineFile)
	}

	p("<h2>Rejections</h2>\n")
	if len(r.Rejected) > 0 {
		p("%s\n", reasonsSVG("rejected", r.Rejected, r.RejectedAll))
	} else {
		p("<p>None.</p>\n")
	}
	if len(r.Failed) > 0 {
		p("<h3>Failures</h3>\n<table><tr><th>stage</th><th class=\"l\">error</th><th>records</th></tr>\n")
		for _, f := range r.Failed {
			p("<tr><td>%s</td><td class=\"l\">%s</td><td>%d</td></tr>\n", e(f.Stage), e(f.Reason), f.Count)
		}
		p("</table>\n")
	}

	for _, o := range r.Outputs {
		if len(o.Dists) == 0 {
			continue
		}
		p("<h2>Output %s <span class=\"sub\">(%s, %s rows, %s)</span></h2>\n", e(o.Stage), e(o.Kind), e(fmt.Sprint(o.Rows)), e(o.Path))
		p("<table><tr><th>per row</th><th>rows</th><th>zero</th><th>&lt;%d</th><th>mean</th><th>p10</th><th>median</th><th>p90</th><th>p99</th><th>max</th><th class=\"l\">source</th></tr>\n", SmallBelow)
		for _, d := range o.Dists {
			p("<tr><td>%s</td><td>%d</td><td>%s</td><td>%s</td><td>%.1f</td><td>%d</td><td>%d</td><td>%d</td><td>%d</td><td>%d</td><td class=\"l\">%s</td></tr>\n",
				e(d.Name), d.N, pct(Share(d.Zero, d.N)), pct(Share(d.Small, d.N)), d.Mean, d.P10, d.P50, d.P90, d.P99, d.Max, e(d.Note))
		}
		p("</table>\n<div class=\"grid-plots\">\n")
		for _, d := range o.Dists {
			p("%s\n", histogramSVG(distPlotName(o, d), d))
		}
		p("</div>\n")
	}
	if len(r.Notes) > 0 {
		p("<h2>Notes</h2>\n<ul>\n")
		for _, n := range r.Notes {
			p("<li class=\"note\">%s</li>\n", e(n))
		}
		p("</ul>\n")
	}
	p("</body></html>\n")
}

// writeGlance puts first what a user must see: each output's one-sentence
// summaries (most rows with a handful of loss tokens, empty answers) and
// the top reject reasons.
func (r *Report) writeGlance(w io.Writer) {
	var lines []string
	for _, o := range r.Outputs {
		for _, d := range o.Dists {
			if g := d.Glance(); g != "" {
				lines = append(lines, fmt.Sprintf("<b>%s</b>: %s", html.EscapeString(o.Stage), html.EscapeString(g)))
			}
		}
	}
	if r.RejectedAll > 0 && len(r.Rejected) > 0 {
		top := r.Rejected[0]
		lines = append(lines, html.EscapeString(fmt.Sprintf("%d rejected; most by %s: %s (%d, %s)",
			r.RejectedAll, top.Stage, top.Reason, top.Count, pct(Share(top.Count, r.RejectedAll)))))
	}
	if len(lines) == 0 {
		return
	}
	sort.SliceStable(lines, func(i, j int) bool {
		return strings.Contains(lines[i], "loss tokens") && !strings.Contains(lines[j], "loss tokens")
	})
	fmt.Fprintf(w, "<div class=\"glance\"><p>%s</p></div>\n", strings.Join(lines, "</p><p>"))
}

func orDash(s string) string {
	if s == "" {
		return "—"
	}
	return s
}
