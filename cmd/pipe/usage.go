package main

import (
	"flag"
	"fmt"
	"io"
	"strings"
)

func printUsage(w io.Writer) {
	fmt.Fprintln(w, "pipe runs TOML-declared dataflow pipelines for LLM training data.")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Usage:")
	fmt.Fprintln(w, "  pipe COMMAND [ARGS]")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Commands:")
	for _, c := range sortedCommands() {
		fmt.Fprintf(w, "  %-10s %s\n", c.Name, c.Short)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Exit codes: 0 success, 1 run failed, 2 usage or pipeline-file error,")
	fmt.Fprintln(w, "or bad data (too many rejects, an empty output), 4 the run reached its")
	fmt.Fprintln(w, "[pipeline] budget (raise it and run the same command), 130 interrupted")
	fmt.Fprintln(w, "(in-flight work drained and committed).")
	fmt.Fprintln(w, "Run 'pipe help COMMAND' for one command's flags.")
}

func printCommandHelp(w io.Writer, c *command) {
	fmt.Fprintf(w, "usage: %s\n\n%s\n", c.UsageLine, c.Short)
	if c.Long != "" {
		fmt.Fprintf(w, "\n%s\n", strings.TrimRight(c.Long, "\n"))
	}
	fs := flag.NewFlagSet(c.Name, flag.ContinueOnError)
	c.New().setFlags(fs)
	n := 0
	fs.VisitAll(func(*flag.Flag) { n++ })
	if n == 0 {
		return
	}
	fmt.Fprintln(w, "\nFlags:")
	fs.SetOutput(w)
	fs.PrintDefaults()
}
