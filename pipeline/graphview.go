package pipeline

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/pipe-dev/pipe/pipeline/rundir/layout"
)

// DisplayPath shows an absolute path relative to the working directory when
// it lies below it, so output is short and the same on every machine.
func DisplayPath(p string) string {
	wd, err := os.Getwd()
	if err != nil {
		return p
	}
	rel, err := filepath.Rel(wd, p)
	if err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
		return p
	}
	return rel
}

// stageLabel is "kind" plus the kind's key settings, if any.
func (s *PlanStage) settings() string {
	if s.Spec == nil || s.Spec.KeySettings == nil || s.Config == nil {
		return ""
	}
	return s.Spec.KeySettings(s.Config)
}

func (s *PlanStage) kind() string {
	if s.Spec == nil {
		return s.Decl.Kind
	}
	return s.Spec.Kind
}

// edgesOut returns a stage's outgoing edges by port in the kind's port order.
func (s *PlanStage) edgesOut() []Edge {
	var out []Edge
	if s.Spec == nil {
		return nil
	}
	for _, port := range s.Spec.Outputs {
		out = append(out, s.Outputs[port]...)
	}
	return out
}

// WriteText prints the graph for a terminal: stages in topological order with
// their kind, key settings and where each port goes.
func (p *Plan) WriteText(w io.Writer) {
	fmt.Fprintf(w, "pipeline %q  (%s)\n", p.File.Name, p.File.Path)
	fmt.Fprintf(w, "run dir  %s\n", DisplayPath(p.File.RunDir))
	p.WriteFrom(w)
	fmt.Fprintln(w)
	idw, kw := 0, 0
	for _, s := range p.Stages {
		idw = max(idw, len(s.ID()))
		kw = max(kw, len(s.kind()))
	}
	for _, s := range p.Stages {
		fmt.Fprintf(w, "%-*s  %-*s  %s\n", idw, s.ID(), kw, s.kind(), s.settings())
		if s.Spec == nil {
			continue
		}
		for _, port := range s.Spec.Outputs {
			var to []string
			for _, e := range s.Outputs[port] {
				to = append(to, e.To.ID())
			}
			switch {
			case len(to) > 0:
				fmt.Fprintf(w, "%*s  └ %s → %s\n", idw, "", port, strings.Join(to, ", "))
			case port == RejectedPort:
				fmt.Fprintf(w, "%*s  └ %s → %s\n", idw, "", port, layout.DeadLetters("RUN_DIR", layout.Rejected, s.ID()))
			}
		}
	}
}

// WriteDOT prints the graph in Graphviz DOT.
func (p *Plan) WriteDOT(w io.Writer) {
	fmt.Fprintf(w, "digraph %q {\n", p.File.Name)
	fmt.Fprintln(w, "  rankdir=LR;")
	fmt.Fprintln(w, `  node [shape=box, style="rounded", fontname="Helvetica"];`)
	fmt.Fprintln(w, `  edge [fontname="Helvetica", fontsize=10];`)
	for _, s := range p.Stages {
		label := s.ID() + "\\n" + s.kind()
		if set := s.settings(); set != "" {
			label += "\\n" + dotEscape(set)
		}
		fmt.Fprintf(w, "  %q [label=\"%s\"];\n", s.ID(), label)
	}
	for _, s := range p.Stages {
		for _, e := range s.edgesOut() {
			attr := ""
			if s.Spec != nil && e.Port != s.Spec.Outputs[0] {
				attr = fmt.Sprintf(" [label=%q]", e.Port)
			}
			fmt.Fprintf(w, "  %q -> %q%s;\n", s.ID(), e.To.ID(), attr)
		}
	}
	fmt.Fprintln(w, "}")
}

func dotEscape(s string) string {
	return strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(s)
}

// WriteMermaid prints the graph as a Mermaid flowchart (renders on GitHub).
func (p *Plan) WriteMermaid(w io.Writer) {
	fmt.Fprintln(w, "flowchart LR")
	id := func(s string) string { return "s_" + strings.NewReplacer("-", "_", ".", "_").Replace(s) }
	for _, s := range p.Stages {
		label := s.ID() + "<br/>" + s.kind()
		if set := s.settings(); set != "" {
			label += "<br/>" + set
		}
		fmt.Fprintf(w, "  %s[\"%s\"]\n", id(s.ID()), strings.ReplaceAll(label, `"`, "#quot;"))
	}
	for _, s := range p.Stages {
		for _, e := range s.edgesOut() {
			if s.Spec != nil && e.Port != s.Spec.Outputs[0] {
				fmt.Fprintf(w, "  %s -->|%s| %s\n", id(s.ID()), e.Port, id(e.To.ID()))
			} else {
				fmt.Fprintf(w, "  %s --> %s\n", id(s.ID()), id(e.To.ID()))
			}
		}
	}
}
