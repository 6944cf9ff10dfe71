package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"
	"strings"
	"syscall"

	"github.com/pipe-dev/pipe/internal/suggest"
	"github.com/pipe-dev/pipe/internal/termsafe"
)

// A command is one `pipe` subcommand. Each lives in its own file and registers
// itself from init(), so adding a command never edits another file.
type command struct {
	Name      string
	UsageLine string // e.g. "pipe check FILE..."
	Short     string // one line for `pipe help`
	Long      string // shown by `pipe help NAME` above the flags
	// New makes the runner of one invocation. It is called afresh for
	// each, so no flag's value carries over to the next run in the same
	// process (tests run many).
	New func() runner
}

// runner is one invocation of a command: its flags' values live in it,
// made fresh by command.New for every invocation.
type runner interface {
	// setFlags declares the command's flags on fs, bound to the runner.
	setFlags(fs *flag.FlagSet)
	// run does the work once fs is parsed. It returns an error instead of
	// exiting; wrap it in exitError to choose the exit code (default 1).
	run(ctx context.Context, std *stdio, fs *flag.FlagSet) error
}

// stdio carries the streams a command may use, so tests run commands in-process.
type stdio struct {
	In       io.Reader
	Out, Err io.Writer
	// Signals delivers SIGINT/SIGTERM; commands that drain on the first signal
	// and stop on the second read from it.
	Signals <-chan os.Signal
	// StopNow delivers SIGUSR1, `pipe stop --now`'s request to stop at once
	// (nil in tests that do not use it). Unlike a counted second SIGTERM it
	// is idempotent: asked twice, a run still commits before it exits.
	StopNow <-chan os.Signal
	// Args is the command line after "pipe", to tell the user how to run
	// the same command again (resume).
	Args []string
}

// Exit codes, as documented in `pipe help`.
const (
	exitOK          = 0
	exitFailed      = 1
	exitUsage       = 2
	exitInterrupted = 130
)

// exitError carries the process exit code chosen by a command.
type exitError struct {
	code int
	err  error // may be nil: the command already printed what the user needs
}

func (e *exitError) Error() string {
	if e.err == nil {
		return fmt.Sprintf("exit %d", e.code)
	}
	return e.err.Error()
}
func (e *exitError) Unwrap() error { return e.err }

func usageErrorf(format string, args ...any) error {
	return &exitError{code: exitUsage, err: fmt.Errorf(format, args...)}
}

var commands = map[string]*command{}

func register(c *command) {
	if _, dup := commands[c.Name]; dup {
		panic("pipe: command registered twice: " + c.Name)
	}
	commands[c.Name] = c
}

func sortedCommands() []*command {
	out := make([]*command, 0, len(commands))
	for _, c := range commands {
		out = append(out, c)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Main runs the CLI with the process's arguments and streams and returns the
// exit code.
func Main() int {
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)
	now := make(chan os.Signal, 1)
	signal.Notify(now, syscall.SIGUSR1)
	defer signal.Stop(now)
	defer startProfiles()()
	return run(os.Args[1:], &stdio{In: os.Stdin, Out: os.Stdout, Err: os.Stderr, Signals: sigs, StopNow: now})
}

// run is Main without process globals.
func run(args []string, std *stdio) int {
	if std.Args == nil {
		std.Args = args
	}
	// Whatever a command prints may hold text from outside (a server's
	// error body, a prompt id, a model name): it reaches the terminal
	// escaped. The live display draws on the writer underneath.
	std.Out, std.Err = termsafe.NewWriter(std.Out), termsafe.NewWriter(std.Err)
	if len(args) == 0 {
		printUsage(std.Err)
		return exitUsage
	}
	name := args[0]
	if name == "-h" || name == "--help" || name == "-help" {
		name = "help"
	}
	c, ok := commands[name]
	if !ok {
		fmt.Fprintf(std.Err, "pipe: unknown command %q%s\nRun 'pipe help' for the list.\n", name, suggestCommand(name))
		return exitUsage
	}
	fs := flag.NewFlagSet("pipe "+c.Name, flag.ContinueOnError)
	fs.SetOutput(std.Err)
	// The flag package prints a bad flag's error itself; the full help is
	// shown only when asked for, so the error stays in sight.
	fs.Usage = func() {}
	r := c.New()
	r.setFlags(fs)
	if err := parseInterspersed(fs, args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			printCommandHelp(std.Out, c)
			return exitOK
		}
		fmt.Fprintf(std.Err, "Run 'pipe help %s' for usage.\n", c.Name)
		return exitUsage
	}
	err := r.run(context.Background(), std, fs)
	if err == nil {
		return exitOK
	}
	code := exitFailed
	var ee *exitError
	if errors.As(err, &ee) {
		code = ee.code
		if ee.err == nil {
			return code
		}
	}
	msg := err.Error()
	if !strings.HasPrefix(msg, "pipe") && !looksPositioned(msg) {
		msg = "pipe " + c.Name + ": " + msg
	}
	fmt.Fprintln(std.Err, msg)
	return code
}

// parseInterspersed lets flags follow positional arguments
// (`pipe run x.toml --dry-run`), as users type them.
func parseInterspersed(fs *flag.FlagSet, args []string) error {
	var positional []string
	for {
		if err := fs.Parse(args); err != nil {
			return err
		}
		args = fs.Args()
		if len(args) == 0 {
			break
		}
		if args[0] == "--" {
			positional = append(positional, args[1:]...)
			break
		}
		positional = append(positional, args[0])
		args = args[1:]
	}
	return fs.Parse(append([]string{"--"}, positional...))
}

// looksPositioned reports whether msg starts with "file:line:" so it is
// printed as is.
func looksPositioned(msg string) bool {
	first, _, _ := strings.Cut(msg, " ")
	return strings.Count(first, ":") >= 2
}

func suggestCommand(name string) string {
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	return suggest.DidYouMean(name, names)
}
