package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/pipe-dev/pipe/internal/suggest"
	"github.com/pipe-dev/pipe/pipeline"
)

// stagesCmd is pipe stages and its flags.
type stagesCmd struct {
	markdown bool
}

func init() {
	register(&command{
		Name:      "stages",
		UsageLine: "pipe stages [--markdown] [KIND]",
		Short:     "list stage kinds, or document one",
		Long: "With no argument, lists every stage kind with its summary. With a kind,\nprints its ports, keys with types, defaults and allowed values, and an example.\n\n" +
			"--markdown prints every kind's (or KIND's) documentation as Markdown: docs/stages.md is its output.",
		New: func() runner { return &stagesCmd{} },
	})
}

func (c *stagesCmd) setFlags(fs *flag.FlagSet) {
	fs.BoolVar(&c.markdown, "markdown", false, "print the documentation as Markdown (docs/stages.md)")
}

func (c *stagesCmd) run(_ context.Context, std *stdio, fs *flag.FlagSet) error {
	reg := pipeline.DefaultRegistry
	if c.markdown {
		return writeStagesMarkdown(std.Out, reg, fs.Args())
	}
	switch fs.NArg() {
	case 0:
		tw := tabwriter.NewWriter(std.Out, 2, 4, 2, ' ', 0)
		for _, k := range reg.Kinds() {
			fmt.Fprintf(tw, "%s\t%s\n", k, reg.Lookup(k).Summary)
		}
		tw.Flush()
		fmt.Fprintln(std.Out, "\nRun 'pipe stages KIND' for a kind's keys and an example.")
		return nil
	case 1:
		spec := reg.Lookup(fs.Arg(0))
		if spec == nil {
			return usageErrorf("unknown kind %q%s; known kinds: %s", fs.Arg(0), suggest.DidYouMean(fs.Arg(0), reg.Kinds()), strings.Join(reg.Kinds(), ", "))
		}
		spec.WriteDoc(std.Out)
		return nil
	}
	return usageErrorf("usage: pipe stages [KIND]")
}

// writeStagesMarkdown prints the kinds' documentation (every kind, or
// those named) as Markdown, as docs/stages.md holds it.
func writeStagesMarkdown(w io.Writer, reg *pipeline.Registry, kinds []string) error {
	if len(kinds) == 0 {
		kinds = reg.Kinds()
		fmt.Fprintf(w, "# Stage kinds\n\n<!-- Made by `pipe stages --markdown > docs/stages.md`; a test keeps it current. -->\n\n")
		for _, k := range kinds {
			fmt.Fprintf(w, "- [`%s`](#%s): %s\n", k, k, reg.Lookup(k).Summary)
		}
		fmt.Fprintln(w)
	}
	for i, k := range kinds {
		spec := reg.Lookup(k)
		if spec == nil {
			return usageErrorf("unknown kind %q%s; known kinds: %s", k, suggest.DidYouMean(k, reg.Kinds()), strings.Join(reg.Kinds(), ", "))
		}
		if i > 0 {
			fmt.Fprintln(w)
		}
		spec.WriteMarkdown(w)
	}
	return nil
}
