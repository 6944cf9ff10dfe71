package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/pipe-dev/pipe/cmd/pipe/internal/textfmt"
	"github.com/pipe-dev/pipe/pipeline"
	"github.com/pipe-dev/pipe/pipeline/engine"
	"github.com/pipe-dev/pipe/pipeline/rundir"
)

// endState is the state a run ended in, for status.json and the
// notifications.
func endState(sum *engine.Summary, runErr error) string {
	_, budget := budgetReached(runErr)
	switch {
	case runErr != nil && errors.Is(runErr, engine.ErrStopped) && !budget:
		return stateStopped
	case runErr != nil:
		return stateFailed
	case sum.Drained:
		return stateStopped
	}
	return stateFinished
}

// statusEvery is how often status.json is replaced during a run.
const statusEvery = 2 * time.Second

// runEnded, if set (by tests), is called when the run has ended and
// status.json and the metrics hold its last figures, before the metrics
// server stops.
var runEnded func(metricsAddr string)

// runPlan runs plan to its end: the log, notifications, live display,
// status.json and metrics around engine.Run, then the summary, the report,
// the verification of the outputs and the exit status.
func runPlan(ctx context.Context, std *stdio, plan *pipeline.Plan, rs runSettings) error {
	// A closed terminal or SSH session (SIGHUP) and a closed stdout/stderr
	// (EPIPE instead of SIGPIPE) must not end a two-day run.
	signal.Ignore(syscall.SIGHUP, syscall.SIGPIPE)
	if err := os.MkdirAll(plan.File.RunDir, 0o755); err != nil {
		return fmt.Errorf("run directory: %w", err)
	}
	r, err := openRunSession(std, plan, rs)
	if err != nil {
		return err
	}
	defer r.rl.Close()
	defer r.notes.close(notifyTimeout)
	if r.metrics, err = serveMetrics(r.errOut, r.rl, rs.metricsAddr); err != nil {
		if r.term != nil {
			r.term.stop(nil)
		}
		return &exitError{code: exitUsage, err: err}
	}
	if r.metrics != nil {
		defer r.metrics.close()
	}

	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	r.stop = make(chan struct{})
	// giveUp is closed when a stage ignores the second Ctrl-C for
	// stopGrace, or on a third one: the command then returns without waiting
	// for the run (what was committed stays committed).
	giveUp := make(chan struct{})
	var giveUpOnce sync.Once
	closeGiveUp := func() { giveUpOnce.Do(func() { close(giveUp) }) }
	grace := time.AfterFunc(time.Duration(math.MaxInt64), closeGiveUp) // armed by the second Ctrl-C
	defer grace.Stop()
	sigDone := make(chan struct{})
	defer close(sigDone)
	go handleSignals(std, r.errOut, signalActions{
		detached: rs.detached, runDir: plan.File.RunDir, done: sigDone,
		drain: func() { close(r.stop) },
		now: func() {
			cancel()
			grace.Reset(stopGrace)
		},
		giveUp: closeGiveUp,
	})

	opts := r.runOptions()
	if opts.Limit != nil {
		// A budget spent by earlier starts stops this one before it
		// sends a request (or says it is running).
		if err := opts.Limit(&engine.Summary{}); err != nil {
			be, _ := budgetReached(err)
			// pipe status says so too, not the state the last start left.
			if st, rerr := rundir.ReadStatus[liveFleet](plan.File.RunDir); rerr == nil {
				st.State, st.Error, st.Updated = rundir.StateBudget, err.Error()+" by its earlier starts", time.Now().UTC().Format(time.RFC3339)
				st.Write(plan.File.RunDir)
			}
			return &exitError{code: exitBudget, err: fmt.Errorf("%w by its earlier starts; nothing was done.\nTo go on, raise [pipeline] budget (e.g. --set pipeline.budget.%s=...) and run the same command: %s", err, be.What, r.rs.again)}
		}
	}
	r.status = newStatusWriter(plan, rs.fingerprint)
	r.opened = make(chan struct{})
	r.starting.Add(1)
	go r.sayRunning(sigDone)
	r.warner = newWarner(rs.warn, append([]string{plan.File.RunDir}, outputPaths(plan)...), r.warned)
	done := make(chan runResult, 1)
	go func() {
		sum, err := engine.Run(runCtx, plan, opts)
		done <- runResult{sum, err}
	}()
	select {
	case res := <-done:
		r.markOpened()
		r.starting.Wait() // no "running" after the final state
		return r.finish(ctx, res.sum, res.err)
	case <-giveUp:
		return r.gaveUp()
	}
}

// runResult is what engine.Run returned.
type runResult struct {
	sum *engine.Summary
	err error
}

// runSession is one pipe run's state around engine.Run: where its lines,
// snapshots and notifications go. Its methods are runPlan's steps.
type runSession struct {
	std  *stdio
	plan *pipeline.Plan
	rs   runSettings
	// limit is the run's budget check (nil without a budget).
	limit func(*engine.Summary) error

	rl      *runLog
	logPath string
	log     io.Writer // rl at level info, for the summary and the report
	about   *notifyBase
	notes   *notifier
	// errOut is the terminal: on one, lines go above the live display.
	errOut  io.Writer
	term    *termView // nil when not on a terminal
	metrics *runMetrics
	lv      *live
	status  *statusWriter
	warner  *warner

	stop chan struct{} // closed by the first Ctrl-C: drain
	// opened is closed by the first snapshot (the stages are open) or the
	// end; starting is the goroutine saying "running" until then.
	opened     chan struct{}
	openedOnce sync.Once
	starting   sync.WaitGroup

	// nowStatus and nowState are the figures the warnings are judged on,
	// for their notifications.
	// (atomic: the give-up path reads them while the run may still run).
	nowStatus            atomic.Pointer[liveStatus]
	nowState             atomic.Value
	lastLine, lastStatus time.Duration
}

// openRunSession opens the run log, says where it is, and sets up the
// notifier and the terminal display.
func openRunSession(std *stdio, plan *pipeline.Plan, rs runSettings) (*runSession, error) {
	r := &runSession{std: std, plan: plan, rs: rs, logPath: filepath.Join(plan.File.RunDir, runLogFile)}
	rl, err := openRunLog(r.logPath, rs.logFormat)
	if err != nil {
		return nil, err
	}
	r.rl = rl
	r.log = rl.Writer(slog.LevelInfo)
	rl.Info("run started", "pipeline", plan.File.Name, "file", plan.File.Path, "run_dir", plan.File.RunDir,
		"pid", os.Getpid(), "config_fingerprint", rs.fingerprint)
	host, _ := os.Hostname()
	r.about = &notifyBase{plan: plan, again: rs.again, host: host, pid: os.Getpid()}
	r.notes = newNotifier(rs.notify, func(msg string, args ...any) { rl.Warn(msg, args...) })
	if r.notes != nil {
		shown := make([]string, len(rs.notify))
		for i, t := range rs.notify {
			shown[i] = redactTarget(t)
		}
		rl.Info("notifying of warnings, the stop, a failure and the end", "targets", strings.Join(shown, " | "))
	}
	r.errOut = std.Err
	if rs.terminal {
		r.term = newTermView(std.Err)
		r.errOut = r.term
	}
	fmt.Fprintf(r.errOut, "pipe: running %s; log in %s\n", plan.File.Path, r.logPath)
	r.lv = newLive(plan)
	r.nowState.Store(stateRunning)
	return r, nil
}

// writeStatus writes status.json; a failure is logged, not fatal.
func (r *runSession) writeStatus(state string, ls *liveStatus, err error) {
	if werr := r.status.write(state, ls, err); werr != nil {
		r.rl.Warn("status.json not written", "err", werr)
	}
}

func (r *runSession) markOpened() { r.openedOnce.Do(func() { close(r.opened) }) }

// sayRunning writes a "running" status.json every statusEvery until the
// stages are open (generate waits for its servers, minutes on a real fleet)
// and snapshots come, so pipe status sees this start, not the previous
// one's end.
func (r *runSession) sayRunning(sigDone <-chan struct{}) {
	defer r.starting.Done()
	t := time.NewTicker(statusEvery)
	defer t.Stop()
	for {
		r.writeStatus(stateRunning, nil, nil)
		select {
		case <-r.opened:
			return
		case <-sigDone:
			return
		case <-t.C:
		}
	}
}

// warned shows, logs and notifies one warning.
func (r *runSession) warned(w runWarning) {
	fmt.Fprintf(r.errOut, "pipe: warning [%s]: %s\n", textfmt.Elapsed(w.ElapsedS), w.Text)
	r.rl.Warn(w.Text, "kind", w.Kind, "elapsed_s", math.Round(w.ElapsedS*10)/10)
	r.notes.warning(r.about.message(notifyWarning, r.nowState.Load().(string), r.nowStatus.Load(), &w, nil))
}

func (r *runSession) runOptions() engine.Options {
	var limit func(*engine.Summary) error
	if b := r.plan.File.Budget; !b.IsZero() {
		points, _ := rundir.ReadTimeline(r.plan.File.RunDir) // unreadable: nothing spent before, as a new run
		limit = budgetLimit(b, rundir.SpentBy(points))
		r.limit = limit
		var once sync.Once
		limit = func(s *engine.Summary) error {
			err := r.limit(s)
			if be, ok := budgetReached(err); ok {
				once.Do(func() {
					r.rl.Info("budget reached while running: no request is sent from here", "what", be.What, "spent", be.Spent,
						"answers", be.Answers, "in_flight", be.InFlight)
				})
			}
			return err
		}
	}
	return engine.Options{
		Sample:       r.rs.sample,
		Limit:        limit,
		Stop:         r.stop,
		DrainTimeout: r.rs.drainTimeout,
		CommitEvery:  r.rs.commitEvery,
		NoJournal:    r.rs.noJournal,
		HashCheck:    r.rs.readWhole || r.rs.tookOver,
		ReadWhole:    r.rs.readWhole,
		Log:          r.log,
		// The stages' own warnings (a stalled or never-ready server)
		// take the warner's path: terminal, log, status.json, notify.
		Warn: func(stage, kind, text string) {
			elapsed := time.Duration(0)
			if ls := r.nowStatus.Load(); ls != nil {
				elapsed = time.Duration(ls.ElapsedS * float64(time.Second))
			}
			r.warner.warn(elapsed, kind, "stage %q: %s", stage, text)
		},
		Notice: writerFunc(func(p []byte) (int, error) {
			r.errOut.Write(p) // a closed terminal is not an error
			return r.rl.Writer(slog.LevelWarn).Write(p)
		}),
		// Snapshots every second feed the display, the warnings,
		// status.json (every statusEvery) and the metrics; the progress
		// line is written every rs.progressEvery.
		ProgressEvery: min(time.Second, r.rs.progressEvery),
		Progress:      r.progress,
	}
}

// progress takes one snapshot of the running pipeline.
func (r *runSession) progress(s *engine.Summary) {
	r.markOpened()
	r.lv.add(s)
	ls := r.lv.status()
	state := stateRunning
	if s.Drained {
		state = stateDraining
	}
	r.nowStatus.Store(ls)
	r.nowState.Store(state)
	r.warner.check(r.lv, ls)
	ls.Warnings = r.warner.recent()
	if r.term != nil {
		r.term.update(ls)
	}
	if s.Elapsed-r.lastLine >= r.rs.progressEvery {
		r.lastLine = s.Elapsed
		line := progressLine(ls)
		if r.term == nil {
			fmt.Fprintln(r.std.Err, line)
		}
		r.rl.Info(line)
	}
	if s.Elapsed-r.lastStatus >= statusEvery {
		r.lastStatus = s.Elapsed
		r.writeStatus(state, ls, nil)
	}
	if r.metrics != nil {
		r.metrics.set(state, ls)
	}
	recordTimeline(r.plan, s)
}

// gaveUp ends the command while a stage still runs: a stage ignored the
// second Ctrl-C for stopGrace, or a third came.
func (r *runSession) gaveUp() error {
	if r.term != nil {
		r.term.stop(nil)
	}
	fmt.Fprintf(r.std.Err, "pipe: a stage did not stop within %s of the second Ctrl-C; exiting without waiting for it. Outputs committed so far are kept.\n", stopGrace)
	r.rl.Warn("gave up waiting for the run to stop")
	r.markOpened()
	r.starting.Wait()
	gaveUp := errors.New("gave up waiting for a stage to stop")
	r.writeStatus(stateStopped, nil, gaveUp)
	r.notes.send(r.about.message(notifyStopped, stateStopped, r.nowStatus.Load(), nil, gaveUp))
	return &exitError{code: exitInterrupted}
}
