package main

import (
	"context"
	"flag"
)

// helpCmd is pipe help; it has no flags.
type helpCmd struct{}

func init() {
	register(&command{
		Name:      "help",
		UsageLine: "pipe help [COMMAND]",
		Short:     "show help for pipe or one command",
		New:       func() runner { return &helpCmd{} },
	})
}

func (*helpCmd) setFlags(*flag.FlagSet) {}

func (*helpCmd) run(_ context.Context, std *stdio, fs *flag.FlagSet) error {
	switch fs.NArg() {
	case 0:
		printUsage(std.Out)
		return nil
	case 1:
		c, ok := commands[fs.Arg(0)]
		if !ok {
			return usageErrorf("unknown command %q%s", fs.Arg(0), suggestCommand(fs.Arg(0)))
		}
		printCommandHelp(std.Out, c)
		return nil
	}
	return usageErrorf("usage: pipe help [COMMAND]")
}
