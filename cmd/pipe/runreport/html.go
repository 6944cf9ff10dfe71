package runreport

import (
	"fmt"
	"github.com/pipe-dev/pipe/internal/numfmt"
	"html/template"
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
	if err := r.WriteHTML(&sb); err != nil {
		return "", err
	}
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
		if len(r.Tokens) > 0 {
			out = append(out, "tokens")
		}
		if len(r.Limits) > 0 {
			out = append(out, "limits")
		}
	}
	out = append(out, r.economyPlotNames()...)
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

// economyPlotNames are the selection-bias panel's plots: output lengths
// of kept rows and of rejected ones, drawn when there are both.
func (r *Report) economyPlotNames() []string {
	if e := r.Economy; e == nil || e.Kept.N == 0 || e.Rejected.N == 0 {
		return nil
	}
	return []string{"economy:kept", "economy:rejected"}
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
.headline{font-size:16px;margin:10px 0}.headline p{margin:2px 0}.headline .empty{color:#b00020;font-weight:700}
.glance{background:#fff4e5;border-left:4px solid #d55e00;padding:8px 12px;margin:8px 0}
.glance p{margin:2px 0}.note{color:#7a5a00}
.grid-plots{display:flex;flex-wrap:wrap;gap:12px}
svg.plot{background:#fcfcfc;border:1px solid #e4e4e4;border-radius:4px}
svg .grid{stroke:#e6e6e6}svg .axis{stroke:#888}svg .tick{font-size:11px;fill:#444}
svg .val{font-size:10px;fill:#333}svg .ptitle{font-size:13px;font-weight:600;fill:#222}
svg .axislabel{font-size:11px;fill:#666}svg .line{fill:none;stroke-width:2}
svg .restart{stroke:#999;stroke-dasharray:4 3}svg .bar:hover{opacity:.8}
.sample{border:1px solid #e4e4e4;border-radius:4px;padding:6px 10px;margin:8px 0;max-width:1200px}
.sample .k{font-weight:600;color:#555;margin:6px 0 2px}
.sample pre{white-space:pre-wrap;overflow-wrap:anywhere;margin:0;font:12px/1.4 ui-monospace,Menlo,Consolas,monospace;background:#fafafa;padding:4px 6px}
mark.loss{background:#d8ecff;color:inherit}
`

// page is the report's HTML: html/template escapes every text; the plots
// (svg.go) are inserted as they are.
var page = template.Must(template.New("report").Funcs(template.FuncMap{
	"share":         func(part, whole int64) string { return pct(Share(part, whole)) },
	"finishReasons": countsText,
	"join":          strings.Join,
	"dists":         func(e *Economy) []Dist { return []Dist{e.Kept, e.Rejected} },
}).Parse(`<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>pipe report: {{.Base}}</title>
<style>{{.CSS}}</style></head><body>
<h1>Run report: {{.R.RunDir}}</h1>
<div class="sub">{{with .R.Pipeline}}pipeline {{.}} · {{end}}{{with .Created}}created {{.}} · {{end}}{{.Starts}} · state <b>{{.State}}</b>{{with .R.Updated}} (updated {{.}}){{end}} · report written {{.Generated}}</div>
{{if and .R.Error (eq .R.State "failed")}}<p class="note">error: {{.R.Error}}</p>
{{end}}<div class="headline">{{range .Headline}}<p{{if .Empty}} class="empty"{{end}}>{{.Text}}</p>{{end}}</div>
{{with .Glance}}<div class="glance">{{range .}}<p><b>{{.Stage}}</b>: {{.Text}}</p>{{end}}</div>
{{end}}
<h2>Counts</h2>
<table><tr><th>finished ids (prompts)</th><td>{{.R.Finished}}</td></tr><tr><th>rejected</th><td>{{.R.RejectedAll}}</td></tr><tr><th>failed</th><td>{{.R.FailedAll}}</td></tr></table>
{{with .R.Stages}}<h3>Stages (last start)</h3>
<table><tr><th>stage</th><th class="l">kind</th><th>in</th><th>out</th><th>rejected</th><th>failed</th><th>skipped</th></tr>
{{range .}}<tr><td>{{.ID}}</td><td class="l">{{.Kind}}</td><td>{{.In}}</td><td>{{.Out}}</td><td>{{.Rejected}}</td><td>{{.Failed}}</td><td>{{.Skipped}}</td></tr>
{{end}}</table>
{{end}}{{with .R.Outputs}}<h3>Outputs (committed)</h3>
<table><tr><th>stage</th><th class="l">kind</th><th class="l">path</th><th>rows</th><th>rejected rows</th><th class="l">finish reasons</th></tr>
{{range .}}<tr><td>{{.Stage}}</td><td class="l">{{.Kind}}</td><td class="l">{{.Path}}</td><td>{{.Rows}}</td><td>{{.RejectedRows}}</td><td class="l">{{finishReasons .FinishReasons}}{{if .ToolRows}}; {{.ToolRows}} with tools{{end}}</td></tr>
{{end}}</table>
{{end}}
<h2>Throughput over time</h2>
{{if .Plots.Throughput}}<div class="grid-plots">{{.Plots.Throughput}}
{{.Plots.Finished}}</div>
{{else}}<p class="note">No timeline: {{.TimelineFile}} has fewer than two points.</p>
{{end}}{{with .Plots.Tokens}}<h3>Output tokens per second, all servers and each</h3>
<div class="grid-plots">{{.}}</div>
{{end}}{{with .Plots.Limits}}<h3>Concurrency limit of each server</h3>
<div class="grid-plots">{{.}}</div>
{{end}}
{{with .R.Economy}}<h2 id="economy">Decoded and trained tokens</h2>
<div class="headline">{{range .Lines}}<p>{{.}}</p>{{end}}</div>
{{if and .Kept.N .Rejected.N}}<h3>Output length of kept rows against rejected ones</h3>
<table><tr><th>output tokens per row</th><th>rows</th><th>mean</th><th>p10</th><th>median</th><th>p90</th><th>p99</th><th>max</th></tr>
{{range (dists .)}}<tr><td>{{.Name}}</td><td>{{.N}}</td><td>{{printf "%.1f" .Mean}}</td><td>{{.P10}}</td><td>{{.P50}}</td><td>{{.P90}}</td><td>{{.P99}}</td><td>{{.Max}}</td></tr>
{{end}}</table>
{{end}}{{end}}{{with .Plots.Economy}}<div class="grid-plots">{{range .}}{{.}}
{{end}}</div>
{{end}}
<h2>Rejections</h2>
{{with .Plots.Rejected}}{{.}}
{{else}}<p>None.</p>
{{end}}{{with .R.Failed}}<h3>Failures</h3>
<table><tr><th>stage</th><th class="l">error</th><th>records</th></tr>
{{range .}}<tr><td>{{.Stage}}</td><td class="l">{{.Reason}}</td><td>{{.Count}}</td></tr>
{{end}}</table>
{{end}}{{with .R.Launched}}<h2>Launched servers</h2>
<ul>
{{range .}}<li>{{.Summary}}</li>
{{end}}</ul>
{{with $.R.ServerEvents}}<table><tr><th class="l">time</th><th class="l">server</th><th>start</th><th class="l">what happened, and its last lines</th></tr>
{{range .}}<tr><td class="l">{{.T.Format "2006-01-02 15:04:05"}}</td><td class="l">{{.Server}}</td><td>{{.Start}}</td><td class="l">{{.Text}}{{with .Tail}}<pre>{{range .}}{{.}}
{{end}}</pre>{{end}}</td></tr>
{{end}}</table>
{{end}}{{end}}{{range .Outputs}}<h2>Output {{.O.Stage}} <span class="sub">({{.O.Kind}}, {{.O.Rows}} rows, {{.O.Path}})</span></h2>
<table><tr><th>per row</th><th>rows</th><th>zero</th><th>&lt;{{$.SmallBelow}}</th><th>mean</th><th>p10</th><th>median</th><th>p90</th><th>p99</th><th>max</th><th class="l">source</th></tr>
{{range .O.Dists}}<tr><td>{{.Name}}</td><td>{{.N}}</td><td>{{share .Zero .N}}</td><td>{{share .Small .N}}</td><td>{{printf "%.1f" .Mean}}</td><td>{{.P10}}</td><td>{{.P50}}</td><td>{{.P90}}</td><td>{{.P99}}</td><td>{{.Max}}</td><td class="l">{{.Note}}</td></tr>
{{end}}</table>
<div class="grid-plots">
{{range .Plots}}{{.}}
{{end}}</div>
{{end}}{{with .R.Handoffs}}<h2 id="handoff">Handoff to SpecForge</h2>
<p class="sub">The data: block of the run config (<code>specforge train --config</code>) that loads each output, as written beside it.</p>
{{range .}}<h3>Output {{.Stage}} <span class="sub">({{.Path}})</span></h3>
<pre class="handoff">{{.Text}}</pre>
{{end}}{{end}}{{with .Samples}}<h2 id="samples">Sample rows</h2>
<p class="sub">A few accepted rows of each output and a few rejected rows of each reason; in a training row, the text the model is trained on (loss mask 1) is <mark class="loss">marked</mark>.</p>
{{range .}}<section class="samples" data-group="{{.Key}}"><h3>{{.Title}}</h3>
{{range .Rows}}<article class="sample" data-id="{{.ID}}"><div class="sub">id {{.ID}} · in {{.Output}}</div>
{{with .Detail}}<div class="k">why</div><pre>{{.}}</pre>{{end}}
<div class="k">prompt</div><pre>{{.Prompt}}</pre>
{{with .Tools}}<div class="k">tools declared</div><pre>{{join . ", "}}</pre>{{end}}
{{with .ToolSteps}}<div class="k">tool calls and results</div><pre>{{range .}}{{if .Call}}→ {{if .Reply}}the reply calls{{else}}call{{end}} {{.Name}} {{.Text}}{{else}}← result{{with .Name}} of {{.}}{{end}}: {{.Text}}{{end}}
{{end}}</pre>{{end}}
<div class="k">thinking</div><pre>{{if .Thinking}}{{.Thinking}}{{else}}(none){{end}}</pre>
<div class="k">answer</div><pre>{{if .Answer}}{{.Answer}}{{else}}(none){{end}}</pre>
{{with .Trained}}<div class="k">training row (trained on: marked)</div><pre class="trained">{{range .}}{{if .Loss}}<mark class="loss">{{.Text}}</mark>{{else}}{{.Text}}{{end}}{{end}}</pre>{{end}}
</article>
{{end}}</section>
{{end}}{{end}}{{with .R.Notes}}<h2>Notes</h2>
<ul>
{{range .}}<li class="note">{{.}}</li>
{{end}}</ul>
{{end}}</body></html>
`))

// pageData is what the page template reads.
type pageData struct {
	R                                       *Report
	CSS                                     template.CSS
	Base, Created, Starts, State, Generated string
	TimelineFile                            string
	SmallBelow                              int
	Headline                                []HeadLine
	Glance                                  []glanceLine
	Plots                                   struct {
		Throughput, Finished, Tokens, Limits, Rejected template.HTML
		Economy                                        []template.HTML
	}
	Outputs []outputPlots
	Samples []sampleGroup
}

type glanceLine struct{ Stage, Text string }

type outputPlots struct {
	O     Output
	Plots []template.HTML
}

// sampleGroup is the samples of one kind: accepted rows of an output, or
// rejected rows of one reason.
type sampleGroup struct {
	Key, Title string
	Rows       []Sample
}

// WriteHTML writes the report as one self-contained page: inline CSS and
// SVG, no script, nothing fetched.
func (r *Report) WriteHTML(w io.Writer) error {
	d := pageData{R: r, CSS: template.CSS(css), Base: filepath.Base(r.RunDir), Starts: numfmt.Plural(int64(r.Starts), "start"),
		State: orDash(r.State), Generated: r.Generated.Local().Format(time.DateTime), TimelineFile: TimelineFile,
		SmallBelow: SmallBelow, Headline: r.Headline(), Glance: r.glance()}
	if !r.Created.IsZero() {
		d.Created = r.Created.Local().Format(time.DateTime)
	}
	if tp := r.Throughput; tp != nil {
		d.Plots.Throughput = template.HTML(linesSVG("throughput", "records per second", "per second", tp.Rates, tp.Starts))
		d.Plots.Finished = template.HTML(linesSVG("finished", "finished ids", "ids", []Series{{Name: "finished ids", Points: tp.Finished}}, tp.Starts))
		if len(r.Tokens) > 0 {
			d.Plots.Tokens = template.HTML(linesSVG("tokens", "output tokens per second", "tokens/s", r.Tokens, tp.Starts))
		}
		if len(r.Limits) > 0 {
			d.Plots.Limits = template.HTML(linesSVG("limits", "requests each server may hold", "requests", r.Limits, tp.Starts))
		}
	}
	if len(r.Rejected) > 0 {
		d.Plots.Rejected = template.HTML(reasonsSVG("rejected", r.Rejected, r.RejectedAll))
	}
	if e := r.Economy; e != nil && e.Kept.N > 0 && e.Rejected.N > 0 {
		for i, x := range []Dist{e.Kept, e.Rejected} {
			d.Plots.Economy = append(d.Plots.Economy, template.HTML(histogramSVG(r.economyPlotNames()[i], x)))
		}
	}
	for _, o := range r.Outputs {
		if len(o.Dists) == 0 {
			continue
		}
		op := outputPlots{O: o}
		for _, x := range o.Dists {
			op.Plots = append(op.Plots, template.HTML(histogramSVG(distPlotName(o, x), x)))
		}
		d.Outputs = append(d.Outputs, op)
	}
	d.Samples = r.sampleGroups()
	return page.Execute(w, d)
}

// sampleGroups orders the samples: accepted rows by output, then rejected
// rows by reason, most frequent first.
func (r *Report) sampleGroups() []sampleGroup {
	var out []sampleGroup
	index := map[string]int{}
	add := func(key, title string, x Sample) {
		i, ok := index[key]
		if !ok {
			i = len(out)
			index[key] = i
			out = append(out, sampleGroup{Key: key, Title: title})
		}
		out[i].Rows = append(out[i].Rows, x)
	}
	for _, x := range r.Samples {
		if x.Reason == "" {
			add("accepted:"+x.Output, "accepted rows of "+x.Output, x)
		}
	}
	for _, reason := range r.Rejected {
		for _, x := range r.Samples {
			if x.Reason == reason.Reason && x.Stage == reason.Stage {
				add("rejected:"+x.Stage+":"+x.Reason, fmt.Sprintf("rejected by %s: %s (%d = %s of rejects)",
					x.Stage, x.Reason, reason.Count, pct(Share(reason.Count, r.RejectedAll))), x)
			}
		}
	}
	return out
}

// glance is each output's one-sentence summaries (most rows with a handful
// of loss tokens, empty answers), the loss tokens first.
func (r *Report) glance() []glanceLine {
	var lines []glanceLine
	for _, o := range r.Outputs {
		for _, d := range o.Dists {
			if g := d.Glance(); g != "" {
				lines = append(lines, glanceLine{o.Stage, g})
			}
		}
	}
	sort.SliceStable(lines, func(i, j int) bool {
		return strings.Contains(lines[i].Text, "loss tokens") && !strings.Contains(lines[j].Text, "loss tokens")
	})
	return lines
}

func orDash(s string) string {
	if s == "" {
		return "—"
	}
	return s
}
