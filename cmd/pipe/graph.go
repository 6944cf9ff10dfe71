package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"

	"github.com/goccy/go-graphviz"

	"github.com/pipe-dev/pipe/pipeline"
)

func init() {
	var (
		format, output string
		sets           setFlags
		from           string
	)
	register(&command{
		Name:      "graph",
		UsageLine: "pipe graph [--format text|dot|mermaid|svg] [-o FILE] FILE",
		Short:     "show a pipeline's graph",
		Long: `Graph prints the stages in dependency order with their kinds, key settings,
ports and edges. dot and mermaid are for other tools; svg is a picture rendered
in-process (no Graphviz install needed).

Graph checks only the graph's shape: stage ids, kinds, inputs, ports and
cycles. It reads nothing but the pipeline file (no input files, tokenizer,
environment variables, servers or S3), so it draws a pipeline meant for
another machine; pipe check checks the rest. A problem with the shape is
reported, one per line, and exits 2, but what is sound is still drawn.`,
		SetFlags: func(fs *flag.FlagSet) {
			sets = nil
			fs.StringVar(&format, "format", "text", "output format: text, dot, mermaid or svg")
			fs.StringVar(&output, "o", "", "write to `FILE` instead of standard output")
			addSetFlag(fs, &sets)
			fs.StringVar(&from, "from", "", "draw the replay of `STAGE=RUN_DIR` (as pipe run --from)")
		},
		Run: func(ctx context.Context, std *stdio, fs *flag.FlagSet) error {
			if fs.NArg() != 1 {
				return usageErrorf("usage: pipe graph [--format text|dot|mermaid|svg] FILE")
			}
			plan, probs := loadGraph(fs.Arg(0), sets, from)
			if plan != nil {
				if err := drawGraph(ctx, std, plan, format, output); err != nil {
					return err
				}
			}
			if len(probs) > 0 {
				// One problem a line, as pipe check prints them.
				fmt.Fprintln(std.Err, probs.Error())
				return &exitError{code: exitUsage}
			}
			return nil
		},
	})
}

// drawGraph writes plan in format to output, or standard output if "".
func drawGraph(ctx context.Context, std *stdio, plan *pipeline.Plan, format, output string) error {
	var buf bytes.Buffer
	switch format {
	case "text":
		plan.WriteText(&buf)
	case "dot":
		plan.WriteDOT(&buf)
	case "mermaid":
		plan.WriteMermaid(&buf)
	case "svg":
		var dot bytes.Buffer
		plan.WriteDOT(&dot)
		if err := renderSVG(ctx, dot.Bytes(), &buf); err != nil {
			return fmt.Errorf("rendering SVG: %w", err)
		}
	default:
		return usageErrorf("unknown --format %q: want text, dot, mermaid or svg", format)
	}
	if output != "" {
		return os.WriteFile(output, buf.Bytes(), 0o644)
	}
	_, err := std.Out.Write(buf.Bytes())
	return err
}

// renderSVG lays out DOT with Graphviz compiled to WebAssembly.
func renderSVG(ctx context.Context, dot []byte, out *bytes.Buffer) error {
	g, err := graphviz.New(ctx)
	if err != nil {
		return err
	}
	defer g.Close()
	graph, err := graphviz.ParseBytes(dot)
	if err != nil {
		return err
	}
	defer graph.Close()
	return g.Render(ctx, graph, graphviz.SVG, out)
}
