package main

import (
	"context"
	"flag"
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/pipe-dev/pipe/internal/suggest"
	"github.com/pipe-dev/pipe/pipeline"
)

func init() {
	register(&command{
		Name:      "stages",
		UsageLine: "pipe stages [KIND]",
		Short:     "list stage kinds, or document one",
		Long:      "With no argument, lists every stage kind with its summary. With a kind,\nprints its ports, keys with types, defaults and allowed values, and an example.",
		Run: func(_ context.Context, std *stdio, fs *flag.FlagSet) error {
			reg := pipeline.DefaultRegistry
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
		},
	})
}
