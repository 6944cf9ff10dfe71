package main

import (
	"context"
	"flag"
	"fmt"
)

func init() {
	var sets setFlags
	register(&command{
		Name:      "check",
		UsageLine: "pipe check [--set STAGE.KEY=VALUE]... FILE...",
		Short:     "check pipeline files without running them",
		Long: `Check decodes each file and reports every problem at once, one per line,
position first: unknown keys, wrong types, out-of-range values, unknown kinds,
duplicate ids, dangling inputs, unknown ports, cycles, unconnected outputs,
record fields no upstream stage produces, missing input files and output
paths that cannot be created. It prints "FILE: OK" for a clean file and exits
2 if any file has a problem.`,
		SetFlags: func(fs *flag.FlagSet) { sets = nil; addSetFlag(fs, &sets) },
		Run: func(_ context.Context, std *stdio, fs *flag.FlagSet) error {
			if fs.NArg() == 0 {
				return usageErrorf("usage: pipe check FILE...")
			}
			bad := false
			for _, path := range fs.Args() {
				_, probs := loadPlan(path, sets, "")
				if len(probs) > 0 {
					bad = true
					fmt.Fprintln(std.Err, probs.Error())
					continue
				}
				fmt.Fprintf(std.Out, "%s: OK\n", path)
			}
			if bad {
				return &exitError{code: exitUsage}
			}
			return nil
		},
	})
}
