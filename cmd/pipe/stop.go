package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/pipe-dev/pipe/cmd/pipe/internal/cmdline"
	"github.com/pipe-dev/pipe/pipeline"
	"github.com/pipe-dev/pipe/pipeline/commitlog"
	"github.com/pipe-dev/pipe/pipeline/rundir"
)

// stopCmd is pipe stop and its flags.
type stopCmd struct {
	now bool
}

func init() {
	register(&command{
		Name:      "stop",
		UsageLine: "pipe stop [--now] RUN_DIR",
		Short:     "stop the run in a run directory: commit, drain, and wait for it",
		Long: `Stop asks the pipe run that holds RUN_DIR's lock (started with --detach or
in another terminal) to stop as a first Ctrl-C does: it commits everything
processed at once, stops reading input and lets requests in flight finish (up
to its --drain-timeout). Stop waits until the run has exited, then prints what
it committed and the command that continues it. Ctrl-C stops the waiting, not
the stop.

--now stops at once, as a second Ctrl-C does: requests in flight are
abandoned (and redone by the next run); everything processed is committed.`,
		New: func() runner { return &stopCmd{} },
	})
}

func (c *stopCmd) setFlags(fs *flag.FlagSet) {
	fs.BoolVar(&c.now, "now", false, "stop at once instead of draining requests in flight")
}

func (c *stopCmd) run(ctx context.Context, std *stdio, fs *flag.FlagSet) error {
	if fs.NArg() != 1 {
		return usageErrorf("usage: pipe stop [--now] RUN_DIR")
	}
	return stopRun(std, fs.Arg(0), c.now, 200*time.Millisecond)
}

// stopRun signals the run holding dir's lock and waits for it to exit,
// checking every poll.
func stopRun(std *stdio, dir string, now bool, poll time.Duration) error {
	h, err := liveHolder(dir)
	if err != nil {
		return err
	}
	pid := h.PID
	// --now is SIGUSR1, which the run obeys once however often it is sent;
	// a plain stop is one SIGTERM (drain), not sent again to a run that was
	// asked before or drains already: a second SIGTERM would stop it at once.
	key := fmt.Sprintf("%d %s", pid, h.Started.UTC().Format(time.RFC3339))
	draining := writtenState(dir) == stateDraining || stopRequested(dir) == key
	sig := syscall.SIGTERM
	switch {
	case now:
		sig = syscall.SIGUSR1
	case draining:
		sig = 0
	}
	if sig != 0 {
		if err := syscall.Kill(pid, sig); err != nil {
			return signalError(dir, pid, err)
		}
	}
	os.WriteFile(filepath.Join(dir, stopRequestFile), []byte(key+"\n"), 0o644)
	what := "commit everything processed and drain requests in flight (up to its --drain-timeout)"
	if sig == 0 {
		what = "stop (asked before; it is draining)"
	}
	if now {
		what = "stop at once (requests in flight are abandoned and redone by the next run; everything processed is committed)"
	}
	fmt.Fprintf(std.Err, "pipe stop: asked the run in %s (pid %d) to %s; waiting for it to exit (Ctrl-C stops waiting, not the stop)\n",
		pipeline.DisplayPath(dir), pid, what)
	if err := waitForExit(std, dir, pid, poll); err != nil {
		return err
	}
	printStopped(std, dir, pid)
	return nil
}

// waitForExit waits, checking every poll, until pid no longer holds dir's
// lock; a signal (Ctrl-C) stops the waiting, not the stop.
func waitForExit(std *stdio, dir string, pid int, poll time.Duration) error {
	for {
		select {
		case <-std.Signals:
			fmt.Fprintf(std.Err, "pipe stop: no longer waiting; pid %d is still stopping (pipe status %s)\n", pid, cmdline.Join([]string{dir}))
			return &exitError{code: exitInterrupted}
		case <-time.After(poll):
		}
		h, err := rundir.ReadHolder(dir)
		if err != nil {
			return fmt.Errorf("%s: %w", dir, err)
		}
		if h == nil || !h.Alive || h.PID != pid {
			return nil
		}
	}
}

// liveHolder is the process holding dir's lock, or an error a user can act
// on: no run there, a run that is not running, a run on another host.
func liveHolder(dir string) (*rundir.Holder, error) {
	st, err := os.Stat(dir)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return nil, fmt.Errorf("no run directory %s", dir)
	case err != nil:
		return nil, err
	case !st.IsDir():
		return nil, fmt.Errorf("%s is not a run directory (it is a file)", dir)
	}
	h, err := rundir.ReadHolder(dir)
	if err != nil {
		return nil, fmt.Errorf("run directory lock %s: %w", filepath.Join(dir, rundir.LockFile), err)
	}
	if h == nil {
		return nil, fmt.Errorf("no run in %s: it has no %s (pipe run creates it)", dir, rundir.LockFile)
	}
	host, _ := os.Hostname()
	if h.Host != "" && h.Host != host {
		return nil, fmt.Errorf("the run in %s is on host %s (pid %d); run pipe stop there", dir, h.Host, h.PID)
	}
	if !h.Alive {
		how := "did not finish cleanly (killed or crashed)"
		if !h.Released.IsZero() {
			how = "ended at " + h.Released.UTC().Format(time.RFC3339)
		}
		state := ""
		if s := writtenState(dir); s != "" {
			state = fmt.Sprintf(", state %q", s)
		}
		return nil, fmt.Errorf("no run is running in %s: its last run (pid %d) %s%s; nothing to stop", dir, h.PID, how, state)
	}
	if h.PID <= 0 {
		return nil, fmt.Errorf("the run in %s holds its lock but %s does not name its pid; stop it from its terminal", dir, filepath.Join(dir, rundir.LockFile))
	}
	return h, nil
}

func signalError(dir string, pid int, err error) error {
	if errors.Is(err, syscall.EPERM) {
		return fmt.Errorf("the run in %s (pid %d) belongs to another user: permission denied to signal it; run pipe stop as that user", dir, pid)
	}
	if errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("the run in %s (pid %d) has just exited", dir, pid)
	}
	return fmt.Errorf("signalling the run in %s (pid %d): %w", dir, pid, err)
}

// stopRequestFile records, in the run directory, the run (pid and start
// time, as its lock says) that pipe stop has signalled: a later pipe stop
// --now then sends only the one signal still needed.
const stopRequestFile = ".stop-requested"

// stopRequested is the run an earlier pipe stop signalled, or "".
func stopRequested(dir string) string {
	data, _ := os.ReadFile(filepath.Join(dir, stopRequestFile))
	return strings.TrimSpace(string(data))
}

// writtenState is the "state" of dir/status.json as written, or "".
func writtenState(dir string) string {
	st, err := rundir.ReadStatus[json.RawMessage](dir)
	if err != nil || st == nil {
		return ""
	}
	return st.State
}

// printStopped says what the stopped run left: its final state, the
// finished ids, and the command that continues it.
func printStopped(std *stdio, dir string, pid int) {
	finished, err := commitlog.CountIDs(filepath.Join(dir, pipeline.DoneFile))
	st, _ := rundir.ReadStatus[json.RawMessage](dir)
	if st == nil {
		st = &rundir.Status[json.RawMessage]{}
	}
	line := fmt.Sprintf("pipe stop: the run in %s (pid %d) has exited", pipeline.DisplayPath(dir), pid)
	if st.State != "" {
		line += fmt.Sprintf(" (state %s)", st.State)
	}
	fmt.Fprintln(std.Out, line)
	if err == nil {
		fmt.Fprintf(std.Out, "committed: %d ids finished in %s", finished, filepath.Join(pipeline.DisplayPath(dir), pipeline.DoneFile))
		if st.Raw != nil && int64(st.Before) <= finished {
			fmt.Fprintf(std.Out, " (%d in this start)", finished-int64(st.Before))
		}
		fmt.Fprintln(std.Out)
	}
	if (st.State == stateFailed || st.State == rundir.StateBudget) && st.Error != "" {
		fmt.Fprintf(std.Out, "error: %s\n", st.Error)
	}
	fmt.Fprintf(std.Out, "what it holds: pipe report %s\n", cmdline.Join([]string{pipeline.DisplayPath(dir)}))
	if r, err := rundir.ReadRun(dir); err == nil && r != nil && len(r.History) > 0 {
		if last := r.History[len(r.History)-1].Command; len(last) > 0 {
			fmt.Fprintf(std.Out, "continue with: %s\n", cmdline.Join(cmdline.Resume(last)))
		}
	}
}
