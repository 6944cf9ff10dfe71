package main

import (
	"fmt"
	"io"
	"syscall"
	"time"

	"github.com/pipe-dev/pipe/cmd/pipe/internal/cmdline"
	"github.com/pipe-dev/pipe/pipeline"
)

// stopGrace is how long the second Ctrl-C waits for stages to stop before
// the command exits anyway.
const stopGrace = 30 * time.Second

// signalActions is what the signals of a run do: the first Ctrl-C (or
// SIGTERM) drains, the second (or pipe stop --now) stops at once, the
// third Ctrl-C gives up waiting (a SIGTERM never does).
type signalActions struct {
	detached bool   // started by --detach: pipe stop, not Ctrl-C
	runDir   string // for the pipe stop --now hint
	done     <-chan struct{}
	drain    func() // stop intake, commit what was processed
	now      func() // stop at once
	giveUp   func() // return without waiting for the run
}

// handleSignals runs the actions for the signals and stop requests of
// std, until a.done is closed or it gave up.
func handleSignals(std *stdio, errOut io.Writer, a signalActions) {
	n := 0
	stopAtOnce := func() {
		fmt.Fprintln(errOut, "\npipe: stopping at once")
		a.now()
	}
	for {
		select {
		case <-a.done:
			return
		case <-std.StopNow:
			// pipe stop --now: at once, however often asked.
			if n < 2 {
				if n == 0 {
					a.drain() // commit what was processed first
				}
				n = 2
				stopAtOnce()
			}
		case sig := <-std.Signals:
			if sig == syscall.SIGTERM && n >= 2 {
				// A SIGTERM asks for a stop that is already under way at
				// once: `pipe stop` then `pipe stop --now` deliver theirs in
				// either order, and a scheduler may repeat its SIGTERM.
				// Only a third Ctrl-C gives up the last commit.
				continue
			}
			n++
			switch n {
			case 1:
				again := "press Ctrl-C again to stop at once"
				if a.detached {
					again = "pipe stop --now " + cmdline.Join([]string{pipeline.DisplayPath(a.runDir)}) + " stops at once"
				}
				fmt.Fprintf(errOut, "\npipe: stopping intake and draining in-flight work; %s\n", again)
				a.drain()
			case 2:
				stopAtOnce()
			default:
				a.giveUp()
				return
			}
		}
	}
}
