package main

import (
	"context"
	"flag"
	"fmt"
	"strings"
)

// checkCmd is pipe check and its flags.
type checkCmd struct {
	sets setFlags
	data bool
}

func init() {
	register(&command{
		Name:      "check",
		UsageLine: "pipe check [--data] [--set STAGE.KEY=VALUE]... FILE...",
		Short:     "check pipeline files (and with --data their inputs) without running them",
		Long: `Check decodes each file and reports every problem at once, one per line,
position first: unknown keys, wrong types, out-of-range values, unknown kinds,
duplicate ids, dangling inputs, unknown ports, cycles, unconnected outputs,
record fields no upstream stage produces, missing input files, output
paths that cannot be created, and what only a stage's constructor (which
has no side effects) rejects. It prints "FILE: OK" for a clean file and exits
2 if any file has a problem.

--data also reads every input file the way its reader will, without building
records, and prints per problem (bad_line, empty_prompt, duplicate_id,
empty_input) how many lines have it and the first few as FILE:LINE. It exits
1 if an input has a problem that would stop the run (a bad line under
on_bad_line = "fail", an empty input without allow_empty); the others are
set aside by the run and only counted.`,
		New: func() runner { return &checkCmd{} },
	})
}

func (c *checkCmd) setFlags(fs *flag.FlagSet) {
	fs.BoolVar(&c.data, "data", false, "also read every input the way the run will and report its problems")
	addSetFlag(fs, &c.sets)
}

func (c *checkCmd) run(ctx context.Context, std *stdio, fs *flag.FlagSet) error {
	if fs.NArg() == 0 {
		return usageErrorf("usage: pipe check [--data] FILE...")
	}
	code := exitOK
	for _, path := range fs.Args() {
		plan, probs := loadPlan(path, c.sets, "")
		if len(probs) > 0 {
			code = exitUsage
			fmt.Fprintln(std.Err, probs.Error())
			continue
		}
		if c.data {
			fatal, err := checkInputs(ctx, std.Out, plan)
			if err != nil {
				return err
			}
			if len(fatal) > 0 {
				code = max(code, exitFailed)
				fmt.Fprintf(std.Err, "%s: %s\n", path, strings.Join(fatal, "\n"+path+": "))
				continue
			}
		}
		fmt.Fprintf(std.Out, "%s: OK\n", path)
	}
	if code != exitOK {
		return &exitError{code: code}
	}
	return nil
}
