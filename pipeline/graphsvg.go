package pipeline

import (
	"fmt"
	"html/template"
	"io"
	"strings"
)

// columns are the stages by rank, their longest path from a reader, each
// column in plan order.
func (p *Plan) columns() [][]*PlanStage {
	rank := map[*PlanStage]int{}
	for _, s := range p.Stages {
		for _, e := range s.edgesOut() {
			if e.To != nil && rank[e.To] < rank[s]+1 {
				rank[e.To] = rank[s] + 1
			}
		}
	}
	var cols [][]*PlanStage
	for _, s := range p.Stages {
		r := rank[s]
		for len(cols) <= r {
			cols = append(cols, nil)
		}
		cols[r] = append(cols[r], s)
	}
	return cols
}

// WriteSVG draws the graph as SVG with a small layered layout of its own, for
// machines without Graphviz: stages left to right by their longest path from
// a reader (the DOT output's rankdir=LR), one column per rank, stacked in plan
// order within a column; edges are curves from the right side of a box to the
// left side of the next, labelled with the port when it is not the first one.
// Nothing is computed from fonts: a box is sized from the longest line of its
// label at a fixed advance, which a monospace font honours.
func (p *Plan) WriteSVG(w io.Writer) error {
	const (
		charW, lineH       = 7.8, 16.0
		padX, padY         = 10.0, 8.0
		gapX, gapY, margin = 60.0, 20.0, 10.0
	)
	type box struct {
		X, Y, W, H float64
		Lines      []string
	}
	cols := p.columns()
	boxes := map[*PlanStage]*box{}
	x, width, height := margin, 0.0, 0.0
	for _, col := range cols {
		colW, y := 0.0, margin
		for _, s := range col {
			lines := []string{s.ID(), s.kind()}
			if set := s.settings(); set != "" {
				lines = append(lines, set)
			}
			n := 0
			for _, l := range lines {
				n = max(n, len([]rune(l)))
			}
			b := &box{X: x, Y: y, W: float64(n)*charW + 2*padX, H: float64(len(lines))*lineH + 2*padY, Lines: lines}
			boxes[s] = b
			colW = max(colW, b.W)
			y += b.H + gapY
		}
		height = max(height, y-gapY+margin)
		x += colW + gapX
		width = x - gapX + margin
	}
	type text struct {
		X, Y float64
		S    string
	}
	type node struct {
		X, Y, W, H float64
		Texts      []text
	}
	type edge struct {
		D     string
		Label *text
	}
	var nodes []node
	var edges []edge
	for _, s := range p.Stages {
		b := boxes[s]
		n := node{X: b.X, Y: b.Y, W: b.W, H: b.H}
		for i, l := range b.Lines {
			n.Texts = append(n.Texts, text{X: b.X + b.W/2, Y: b.Y + padY + lineH*float64(i+1) - 4, S: l})
		}
		nodes = append(nodes, n)
		for _, e := range s.edgesOut() {
			t := boxes[e.To]
			if t == nil {
				continue
			}
			x1, y1 := b.X+b.W, b.Y+b.H/2
			x2, y2 := t.X, t.Y+t.H/2
			mid := (x1 + x2) / 2
			ed := edge{D: fmt.Sprintf("M%.1f,%.1f C%.1f,%.1f %.1f,%.1f %.1f,%.1f", x1, y1, mid, y1, mid, y2, x2, y2)}
			if s.Spec != nil && e.Port != s.Spec.Outputs[0] {
				ed.Label = &text{X: mid, Y: (y1+y2)/2 - 4, S: e.Port}
			}
			edges = append(edges, ed)
		}
	}
	return svgTemplate.Execute(w, map[string]any{
		"Name": p.File.Name, "W": width, "H": height, "Nodes": nodes, "Edges": edges,
	})
}

// svgTemplate escapes every label (stage ids, paths, settings) as XML text.
var svgTemplate = template.Must(template.New("svg").Funcs(template.FuncMap{
	"f": func(v float64) string { return strings.TrimSuffix(fmt.Sprintf("%.1f", v), ".0") },
}).Parse(`<svg xmlns="http://www.w3.org/2000/svg" width="{{f .W}}" height="{{f .H}}" viewBox="0 0 {{f .W}} {{f .H}}" font-family="monospace" font-size="13">
<title>{{.Name}}</title>
<defs><marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="8" markerHeight="8" orient="auto"><path d="M0,0 L10,5 L0,10 z"/></marker></defs>
{{- range .Edges}}
<path d="{{.D}}" fill="none" stroke="black" marker-end="url(#arrow)"/>
{{- with .Label}}
<text x="{{f .X}}" y="{{f .Y}}" text-anchor="middle" font-size="11">{{.S}}</text>
{{- end}}
{{- end}}
{{- range .Nodes}}
<g>
<rect x="{{f .X}}" y="{{f .Y}}" width="{{f .W}}" height="{{f .H}}" rx="6" fill="white" stroke="black"/>
{{- range .Texts}}
<text x="{{f .X}}" y="{{f .Y}}" text-anchor="middle">{{.S}}</text>
{{- end}}
</g>
{{- end}}
</svg>
`))
