package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"

	"github.com/pipe-dev/pipe/pipeline"
)

// graphCmd is pipe graph and its flags.
type graphCmd struct {
	format, output string
	sets           setFlags
	from           string
}

func init() {
	register(&command{
		Name:      "graph",
		UsageLine: "pipe graph [--format text|dot|mermaid|svg] [-o FILE] FILE",
		Short:     "show a pipeline's graph",
		Long: `Graph prints the stages in dependency order with their kinds, key settings,
ports and edges. dot and mermaid are for other tools; svg is a picture: laid
out by Graphviz's dot when it is on PATH, otherwise by pipe's own small
layered layout (stderr says which).

Graph checks only the graph's shape: stage ids, kinds, inputs, ports and
cycles. It reads nothing but the pipeline file (no input files, tokenizer,
environment variables, servers or S3), so it draws a pipeline meant for
another machine; pipe check checks the rest. A problem with the shape is
reported, one per line, and exits 2, but what is sound is still drawn.`,
		New: func() runner { return &graphCmd{} },
	})
}

func (c *graphCmd) setFlags(fs *flag.FlagSet) {
	fs.StringVar(&c.format, "format", "text", "output format: text, dot, mermaid or svg")
	fs.StringVar(&c.output, "o", "", "write to `FILE` instead of standard output")
	addSetFlag(fs, &c.sets)
	fs.StringVar(&c.from, "from", "", "draw the replay of `STAGE=RUN_DIR` (as pipe run --from)")
}

func (c *graphCmd) run(ctx context.Context, std *stdio, fs *flag.FlagSet) error {
	if fs.NArg() != 1 {
		return usageErrorf("usage: pipe graph [--format text|dot|mermaid|svg] FILE")
	}
	plan, probs := loadGraph(fs.Arg(0), c.sets, c.from)
	if plan != nil {
		if err := drawGraph(ctx, std, plan, c.format, c.output); err != nil {
			return err
		}
	}
	if len(probs) > 0 {
		// One problem a line, as pipe check prints them.
		fmt.Fprintln(std.Err, probs.Error())
		return &exitError{code: exitUsage}
	}
	return nil
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
		if err := renderSVG(ctx, std, plan, &buf); err != nil {
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

// renderSVG lays the graph out with the user's own Graphviz dot when it is on
// PATH, and with the plan's built-in layout otherwise, and says which on
// stderr. Nothing is compiled or cached: pipe links no Graphviz of its own.
func renderSVG(ctx context.Context, std *stdio, plan *pipeline.Plan, out *bytes.Buffer) error {
	dotPath, err := exec.LookPath("dot")
	if err != nil {
		fmt.Fprintln(std.Err, "pipe graph: SVG laid out by pipe's built-in layout (install Graphviz for dot's layout)")
		return plan.WriteSVG(out)
	}
	var in, stderr bytes.Buffer
	plan.WriteDOT(&in)
	cmd := exec.CommandContext(ctx, dotPath, "-Tsvg")
	cmd.Stdin, cmd.Stdout, cmd.Stderr = &in, out, &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s -Tsvg: %v: %s", dotPath, err, bytes.TrimSpace(stderr.Bytes()))
	}
	fmt.Fprintf(std.Err, "pipe graph: SVG laid out by Graphviz (%s)\n", dotPath)
	return nil
}
