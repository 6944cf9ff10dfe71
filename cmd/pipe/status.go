package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/pipe-dev/pipe/cmd/pipe/internal/cmdline"
	"github.com/pipe-dev/pipe/cmd/pipe/internal/textfmt"
	"github.com/pipe-dev/pipe/internal/termsafe"
	"github.com/pipe-dev/pipe/pipeline/rundir"
	"github.com/pipe-dev/pipe/pipeline/shardruns"
)

// statusCmd is pipe status and its flags.
type statusCmd struct {
	asJSON bool
	watch  bool
	every  time.Duration
}

func init() {
	register(&command{
		Name:      "status",
		UsageLine: "pipe status [--json] [--watch [--every 2s]] RUN_DIR...",
		Short:     "show a run's state and live figures, and whether its process is alive",
		Long: `Status reads RUN_DIR/status.json, which pipe run replaces every few seconds,
and the run directory's lock, which tells whether the process is alive. It
prints the state (running, draining, finished, stopped, failed, or process
gone: the status says running but no process holds the run directory), the
progress, rates, ETA, servers and recent warnings.

--json prints status.json as it is, with "alive" and the inferred state
added; --watch prints it again every --every until interrupted.

With several run directories, or a glob of them ('runs/x/shard-*'): the
shards of a sharded run (pipe run --shard I/N), one line each — state,
finished ids, rate, ETA — shards not given as missing, and a total.

Exit status: 0, or 1 when the run directory has no status.json.`,
		New: func() runner { return &statusCmd{} },
	})
}

func (c *statusCmd) setFlags(fs *flag.FlagSet) {
	fs.BoolVar(&c.asJSON, "json", false, "print status.json (with alive and the inferred state)")
	fs.BoolVar(&c.watch, "watch", false, "refresh until interrupted")
	fs.DurationVar(&c.every, "every", 2*time.Second, "with --watch, how often")
}

func (c *statusCmd) run(ctx context.Context, std *stdio, fs *flag.FlagSet) error {
	if fs.NArg() == 0 {
		return usageErrorf("usage: pipe status [--json] [--watch] RUN_DIR...")
	}
	dirs, err := cmdline.ExpandGlobs(fs.Args())
	if err != nil {
		return usageErrorf("pipe status: %v", err)
	}
	if len(dirs) > 1 || dirs[0] != fs.Arg(0) {
		// The shards of a sharded run (pipe run --shard).
		if c.asJSON {
			return usageErrorf("pipe status: --json takes one RUN_DIR")
		}
		return watchStatus(ctx, std, c.watch, c.every, func() error {
			runs, err := shardruns.OpenAll(dirs)
			if err != nil {
				return err
			}
			return shardruns.WriteStatus(std.Out, runs)
		})
	}
	dir := dirs[0]
	show := func() error {
		st, err := readStatus(dir)
		if err != nil {
			return err
		}
		if c.asJSON {
			return printStatusJSON(std.Out, st)
		}
		printStatus(std.Out, st)
		return nil
	}
	return watchStatus(ctx, std, c.watch, c.every, show)
}

// watchStatus calls show once, or with watch every every until interrupted.
func watchStatus(ctx context.Context, std *stdio, watch bool, every time.Duration, show func() error) error {
	if !watch {
		return show()
	}
	term := isTerminal(std.Out)
	for {
		if term {
			fmt.Fprint(termsafe.Unwrap(std.Out), "\x1b[H\x1b[2J") // clear the screen
		}
		if err := show(); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return nil
		case <-std.Signals:
			return nil
		case <-time.After(every):
		}
		if !term {
			fmt.Fprintln(std.Out)
		}
	}
}

// runStatus is status.json as read, with the lock's verdict.
type runStatus struct {
	Dir    string
	Doc    statusDoc
	Holder *rundir.Holder
	// State is Doc.State, or stateGone when it says the run goes on but
	// no process holds the lock.
	State string
	Alive bool
}

func readStatus(dir string) (*runStatus, error) {
	doc, err := rundir.ReadStatus[liveFleet](dir)
	if err != nil {
		return nil, err
	}
	if doc == nil {
		return nil, fmt.Errorf("%s: no status.json: not a run directory, or its run has not started", dir)
	}
	st := &runStatus{Dir: dir, Doc: *doc}
	st.Holder, err = rundir.ReadHolder(dir)
	if err != nil {
		return nil, fmt.Errorf("%s: lock: %v", dir, err)
	}
	st.Alive = st.Holder.Running(doc.UpdatedAt()) && st.Holder.PID == doc.PID
	st.State = rundir.ShownState(doc.State, st.Alive)
	return st, nil
}

func printStatusJSON(w io.Writer, st *runStatus) error {
	var raw map[string]any
	if err := json.Unmarshal(st.Doc.Raw, &raw); err != nil {
		return err
	}
	raw["alive"] = st.Alive
	raw["state"] = st.State
	if st.State != st.Doc.State {
		raw["state_written"] = st.Doc.State
	}
	b, err := json.MarshalIndent(raw, "", "  ")
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", b)
	return err
}

func printStatus(w io.Writer, st *runStatus) {
	d := &st.Doc
	proc := fmt.Sprintf("pid %d", d.PID)
	if d.Host != "" {
		proc += " on " + d.Host
	}
	switch {
	case st.Alive && st.Holder.Remote && !st.Holder.Alive:
		proc += ": running (on another host: judged by its status, updated within 30 s)"
	case st.Alive:
		proc += ": alive"
	case st.Holder != nil && st.Holder.Alive:
		proc += fmt.Sprintf(": gone; pid %d holds the run directory now", st.Holder.PID)
	default:
		proc += ": not running"
	}
	textfmt.KV(w, "run dir", "%s", st.Dir)
	textfmt.KV(w, "pipeline", "%s (%s)", d.Name, d.Pipeline)
	textfmt.KV(w, "config", "%s (fingerprint of the settings that define the data, in run.json)", d.Fingerprint)
	textfmt.KV(w, "state", "%s (updated %s)", st.State, d.Updated)
	textfmt.KV(w, "process", "%s, started %s", proc, d.Started)
	if st.State == stateGone {
		textfmt.KV(w, "", "the process ended without finishing (killed or crashed); run the same command again to continue")
	}
	if d.Error != "" {
		textfmt.KV(w, "error", "%s", termsafe.Cut(strings.ReplaceAll(d.Error, "\n", " "), 300))
	}
	textfmt.KV(w, "elapsed", "%s", time.Duration(d.ElapsedS*float64(time.Second)).Round(time.Second))
	textfmt.KV(w, "finished", "%d ids (%d before this run); %d unfinished", d.Finished, d.Before, d.Unfin)
	for _, line := range liveLines(&d.Live) {
		fmt.Fprintf(w, "  %s\n", line)
	}
	if len(d.Warnings) > 0 {
		fmt.Fprintln(w, "warnings:")
		for _, x := range d.Warnings {
			fmt.Fprintf(w, "  %s [%s] %s\n", x.At, textfmt.Elapsed(x.ElapsedS), x.Text)
		}
	}
}
