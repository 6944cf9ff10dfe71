package pipeline

import (
	"fmt"
	"io"
	"reflect"
	"strings"
	"text/tabwriter"
)

// FieldDoc is one config key of a kind, as `pipe stages KIND` shows it.
type FieldDoc struct {
	Key, Type, Default, Doc string
	Required                bool
	Allowed                 string // range or enum, if any
}

// FieldDocs lists the kind's config keys in declaration order.
func (s *Spec) FieldDocs() []FieldDoc {
	fields, _ := fieldsOf(reflect.TypeOf(s.Config))
	out := make([]FieldDoc, 0, len(fields))
	for _, f := range fields {
		d := FieldDoc{Key: f.Key, Type: typeName(f.Type), Doc: f.Doc, Required: f.Required}
		if f.HasDef {
			d.Default = f.Default
			if f.Type.Kind() == reflect.String {
				d.Default = fmt.Sprintf("%q", f.Default)
			} else if f.Type.Kind() == reflect.Slice {
				d.Default = "[" + f.Default + "]"
			}
		}
		switch {
		case len(f.Enum) > 0:
			d.Allowed = strings.ReplaceAll(strings.Join(f.Enum, " | "), "| | ", `| "" | `)
			if f.Enum[0] == "" {
				d.Allowed = `""` + d.Allowed
			}
		case f.Min != nil || f.Max != nil:
			d.Allowed = f.rangeText()
		}
		out = append(out, d)
	}
	return out
}

// WriteDoc prints the kind's documentation: summary, ports, fields, example.
func (s *Spec) WriteDoc(w io.Writer) {
	fmt.Fprintf(w, "%s — %s\n", s.Kind, s.Summary)
	if s.Description != "" {
		fmt.Fprintf(w, "\n%s\n", strings.TrimRight(s.Description, "\n"))
	}
	fmt.Fprintln(w)
	for _, p := range s.portDoc(`"`) {
		fmt.Fprintf(w, "%-9s %s\n", p[0]+":", p[1])
	}
	fmt.Fprintln(w, "\nkeys:")
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  KEY\tTYPE\tDEFAULT\tALLOWED\tMEANING")
	for _, f := range s.FieldDocs() {
		def := f.Default
		if f.Required {
			def = "(required)"
		} else if def == "" {
			def = "-"
		}
		if len(def) > 32 {
			def = def[:29] + "..."
		}
		allowed := f.Allowed
		if allowed == "" {
			allowed = "-"
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\n", f.Key, f.Type, def, allowed, f.Doc)
	}
	tw.Flush()
	if s.Example != "" {
		fmt.Fprintf(w, "\nexample:\n\n%s", indent(s.Example, "    "))
	}
}

// portDoc is the kind's inputs, outputs and record fields as (what, text)
// lines, names quoted with q.
func (s *Spec) portDoc(q string) [][2]string {
	var out [][2]string
	switch {
	case s.Source:
		out = append(out, [2]string{"inputs", "none (a source)"})
	case s.MaxInputs > 0:
		out = append(out, [2]string{"inputs", fmt.Sprintf("1..%d (%sstage%s or %sstage.port%s)", s.MaxInputs, q, q, q, q)})
	default:
		out = append(out, [2]string{"inputs", fmt.Sprintf("1 or more, merged (%sstage%s or %sstage.port%s)", q, q, q, q)})
	}
	if len(s.Outputs) == 0 {
		out = append(out, [2]string{"outputs", "none (a sink)"})
	} else {
		out = append(out, [2]string{"outputs", strings.Join(s.Outputs, ", ") + " (the first is the default)"})
	}
	if len(s.Needs) > 0 {
		out = append(out, [2]string{"needs", strings.Join(s.Needs, ", ")})
	}
	if len(s.Produces) > 0 {
		out = append(out, [2]string{"produces", strings.Join(s.Produces, ", ")})
	}
	return out
}

// WriteMarkdown prints the kind's documentation as a Markdown section:
// what WriteDoc prints, with its keys as a table (docs/stages.md is every
// kind's, made by pipe stages --markdown).
func (s *Spec) WriteMarkdown(w io.Writer) {
	fmt.Fprintf(w, "## %s\n\n%s.\n", s.Kind, s.Summary)
	if s.Description != "" {
		fmt.Fprintf(w, "\n%s\n", strings.TrimRight(s.Description, "\n"))
	}
	fmt.Fprintln(w)
	for _, p := range s.portDoc("`") {
		fmt.Fprintf(w, "- %s: %s\n", p[0], p[1])
	}
	cell := func(t string) string { return strings.ReplaceAll(strings.ReplaceAll(t, "|", "\\|"), "\n", " ") }
	fmt.Fprintln(w, "\n| key | type | default | allowed | meaning |\n|---|---|---|---|---|")
	for _, f := range s.FieldDocs() {
		def := "`" + f.Default + "`"
		if f.Required {
			def = "required"
		} else if f.Default == "" {
			def = "-"
		}
		allowed := "-"
		if f.Allowed != "" {
			allowed = cell(f.Allowed)
		}
		fmt.Fprintf(w, "| `%s` | %s | %s | %s | %s |\n", f.Key, f.Type, cell(def), allowed, cell(f.Doc))
	}
	if s.Example != "" {
		fmt.Fprintf(w, "\nExample:\n\n```toml\n%s```\n", s.Example)
	}
}

func indent(s, prefix string) string {
	lines := strings.SplitAfter(s, "\n")
	var b strings.Builder
	for _, l := range lines {
		if strings.TrimSpace(l) != "" {
			b.WriteString(prefix)
		}
		b.WriteString(l)
	}
	return b.String()
}
