package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/pipe-dev/pipe/cmd/pipe/internal/cmdline"
	"github.com/pipe-dev/pipe/cmd/pipe/runreport"
	"github.com/pipe-dev/pipe/pipeline"
	"github.com/pipe-dev/pipe/pipeline/commitlog"
	"github.com/pipe-dev/pipe/pipeline/engine"
	"github.com/pipe-dev/pipe/pipeline/output"
	"github.com/pipe-dev/pipe/pipeline/rundir"
	"github.com/pipe-dev/pipe/stages/sglang"
)

// finish records the run's end (status, notification, metrics, display),
// prints the summary and the report, verifies the outputs of a finished
// run, and returns the command's outcome.
func (r *runSession) finish(ctx context.Context, sum *engine.Summary, runErr error) error {
	state := endState(sum, runErr)
	ls := r.recordEnd(state, sum, runErr)
	if state != stateFailed || sum.Started() {
		printSummary(r.std.Err, r.plan, sum)
		printSummary(r.log, r.plan, sum)
	}
	rep := r.report(ctx, state, sum)
	if _, budget := budgetReached(runErr); state == stateFinished || budget {
		// Finished means complete: every output checked against its
		// manifest, here and in a bucket, before exit 0. A run stopped
		// by its budget has its outputs checked too: what it says it
		// wrote is there.
		verified, err := verifyAtEnd(ctx, r.std.Err, r.log, r.plan)
		if err != nil {
			r.rl.Error("outputs not verified", "err", err)
			r.status.base.OutputsUnverified = true // the next start reads them whole
			r.writeStatus(stateFailed, ls, err)
			return err
		}
		r.rl.Info("outputs verified")
		if state == stateFinished {
			if err := publishAtEnd(ctx, io.MultiWriter(r.std.Err, r.log), r.plan, verified, rep, sum); err != nil {
				r.rl.Error("not published", "err", err)
				r.writeStatus(stateFailed, ls, err)
				return err
			}
		}
		if r.rs.sample.Max > 0 {
			if err := printPlan(r.std.Err, r.std.Out, r.rs.planJSON, r.plan, sum, r.rs.sample, r.rs.work); err != nil {
				return err
			}
		}
	}
	return r.outcome(state, sum, runErr)
}

// recordEnd takes the final snapshot and tells everyone of the end state:
// notifications, status.json, the metrics, the display and runEnded.
func (r *runSession) recordEnd(state string, sum *engine.Summary, runErr error) *liveStatus {
	r.lv.add(sum)
	ls := r.lv.status()
	ls.State = state
	r.nowStatus.Store(ls)
	r.nowState.Store(state)
	r.warner.check(r.lv, ls)
	ls.Warnings = r.warner.recent()
	ls.Dead = sum.DeadLetters
	event := map[string]string{stateFinished: notifyFinished, stateStopped: notifyStopped, stateFailed: notifyFailed}[state]
	var failure error
	if state == stateFailed {
		failure = runErr
	}
	r.notes.send(r.about.message(event, state, ls, nil, failure))
	written := state
	if _, ok := budgetReached(runErr); ok {
		written = rundir.StateBudget // not a failure: what it was allowed to spend is spent
	}
	r.writeStatus(written, ls, runErr)
	addr := ""
	if r.metrics != nil {
		r.metrics.set(state, ls)
		addr = r.metrics.Addr()
	}
	if r.term != nil {
		r.term.stop(ls)
	}
	if runEnded != nil {
		runEnded(addr)
	}
	return ls
}

// report writes the end-of-run report. It reads every output, minutes for
// a large run: a signal (Ctrl-C, pipe stop) ends it; the run itself is over
// and committed.
func (r *runSession) report(ctx context.Context, state string, sum *engine.Summary) *runreport.Report {
	repCtx, repCancel := context.WithCancel(context.WithoutCancel(ctx))
	defer repCancel()
	go func() {
		select {
		case <-r.stop:
			repCancel()
		case <-repCtx.Done():
		}
	}()
	return reportAtEnd(repCtx, r.std.Err, r.log, r.plan, state, sum)
}

// outcome is the command's result for a run that ended in state.
func (r *runSession) outcome(state string, sum *engine.Summary, runErr error) error {
	switch state {
	case stateFailed:
		if be, ok := budgetReached(runErr); ok {
			// What was spent in the end, in flight included: the figure
			// the next start reads, not the one at the moment of reaching.
			if fin, ok := budgetReached(r.finalSpend(sum)); ok && fin.What == be.What {
				be = fin
			}
			r.rl.Info("budget reached", "what", be.What, "spent", be.Spent)
			inFlight := "what was in flight finished"
			if errors.Is(runErr, engine.ErrStopped) {
				inFlight = fmt.Sprintf("what was in flight past the grace (--drain-timeout %s) was cancelled, and the next start does it", r.rs.drainTimeout)
			}
			return &exitError{code: exitBudget, err: fmt.Errorf("%w; nothing more was sent, %s, and everything is committed (%d ids finished).\n"+
				"To go on, raise [pipeline] budget (e.g. --set pipeline.budget.%s=...) and run the same command: %s", be, inFlight, sum.Finished, be.What, r.rs.again)}
		}
		r.rl.Error("run failed", "err", runErr)
		err := fmt.Errorf("run failed: %w\nEverything committed so far is kept (%d ids finished). Log: %s\nTo continue once the cause is fixed: %s%s",
			runErr, sum.Finished, r.logPath, r.rs.again, settingsHint(r.plan, sum, r.rs.again))
		if notRetryable(runErr) {
			return &exitError{code: exitUsage, err: err}
		}
		return err
	case stateStopped:
		what := "in-flight requests finished and everything was committed"
		if runErr != nil {
			what = "stopped at once; everything processed was committed, requests in flight were abandoned"
		}
		fmt.Fprintf(r.std.Err, "pipe: interrupted (%s). To continue where it stopped: %s\n", what, r.rs.again)
		r.rl.Info("interrupted", "what", what, "continue_with", r.rs.again)
		return &exitError{code: exitInterrupted}
	}
	r.rl.Info("done")
	return nil
}

// settingsHint is the second way to continue after records failed in a
// stage whose fix is its own settings (a filter's rule, a map's
// assignment, an exec's program): a changed setting is refused unless
// --force-new-config says it is meant. "" when no such stage failed.
func settingsHint(plan *pipeline.Plan, sum *engine.Summary, again string) string {
	if sum == nil {
		return ""
	}
	for _, st := range sum.Stages {
		ps := plan.Lookup(st.ID)
		if st.Failed == 0 || ps == nil || ps.Spec.Expensive {
			continue
		}
		return fmt.Sprintf("\nIf the fix is in stage %q's settings (a rule, an assignment, a program), say the change is meant: %s",
			st.ID, strings.Replace(again, "pipe run ", "pipe run --force-new-config ", 1))
	}
	return ""
}

// notRetryable reports a failure that running the same command again
// repeats: a refusal (every server refusing the credentials too), or bad
// data (the same rejects), so a scheduler must not retry it.
func notRetryable(runErr error) bool {
	if commitlog.TransientIO(runErr) {
		return false
	}
	ae := (*sglang.AuthError)(nil)
	return errors.As(runErr, &ae) || pipeline.IsPermanent(runErr) ||
		errors.Is(runErr, engine.ErrTooManyRejected) || errors.Is(runErr, engine.ErrNoTrainingRows)
}

// verifyAtEnd checks every output of a finished run (verifyPlan: local
// shards by size and SHA-256, objects in a bucket by size and checksum,
// mending a bucket from the local copy), printing one line per output.
func verifyAtEnd(ctx context.Context, term, log io.Writer, plan *pipeline.Plan) ([]*output.Verified, error) {
	res, err := verifyPlan(ctx, plan, true, true, log)
	if err != nil {
		err = fmt.Errorf("the run finished, but its outputs could not be verified: %w", err)
		return nil, verifyExit(err)
	}
	if len(res) == 0 {
		return nil, nil
	}
	var buf strings.Builder
	err = reportVerified(&buf, res)
	fmt.Fprintf(term, "\nverified against the manifests:\n%s", indentLines(buf.String(), "  "))
	fmt.Fprintf(log, "verified against the manifests:\n%s", indentLines(buf.String(), "  "))
	if err != nil {
		var ee *exitError
		if errors.As(err, &ee) {
			ee.err = fmt.Errorf("the run finished, but its outputs are not complete (above); %w", ee.err)
			if ee.code == exitFailed {
				ee.err = fmt.Errorf("%w\nThe next start reads every output whole before it builds on it, sets damage aside and writes again what was lost: run the same command", ee.err)
			}
		}
		return nil, err
	}
	return res, nil
}

// recordTimeline adds a progress snapshot to RUN_DIR/timeline.jsonl, for
// the report's throughput over time (runreport.RecordPoint says how often).
func recordTimeline(plan *pipeline.Plan, s *engine.Summary) {
	runreport.RecordPoint(plan.File.RunDir, s, false)
}

// reportAtEnd is pipe run's last word: the final point of the timeline,
// then, for a run that completed (state "finished"), the report on the terminal,
// in the log and in RUN_DIR/report.html. A stopped run gets none: reading
// every output could outlast the grace a scheduler gives after SIGTERM
// (pipe report makes it on demand). It never fails the run: a report it
// cannot make is a line saying why. ctx ends it early (a Ctrl-C, pipe stop
// while the report is read: the run's data is all committed by then).
func reportAtEnd(ctx context.Context, term, log io.Writer, plan *pipeline.Plan, state string, sum *engine.Summary) *runreport.Report {
	dir := plan.File.RunDir
	runreport.RecordPoint(dir, sum, true)
	if state != stateFinished || sum == nil || !sum.Started() {
		return nil
	}
	// The handoff first: the report shows it.
	files, err := writeHandoffs(ctx, plan)
	for _, w := range []io.Writer{term, log} {
		for _, f := range files {
			fmt.Fprintf(w, "pipe: SpecForge data: block in %s\n", pipeline.DisplayPath(f))
		}
		if err != nil {
			fmt.Fprintf(w, "pipe: %v\n", err)
		}
	}
	// A replay keeps its verdicts for the comparison below.
	fr := plan.File.From
	r, err := runreport.Build(ctx, dir, runreport.Options{Verdicts: fr != nil})
	if err != nil {
		if ctx.Err() != nil {
			err = fmt.Errorf("stopped (pipe report %s makes it)", cmdline.Join([]string{pipeline.DisplayPath(dir)}))
		}
		fmt.Fprintf(term, "pipe: no run report: %v\n", err)
		return nil
	}
	path, err := r.WriteHTMLFile()
	for _, w := range []io.Writer{term, log} {
		fmt.Fprintln(w)
		r.WriteText(w)
		if err != nil {
			fmt.Fprintf(w, "pipe: the HTML report could not be written: %v\n", err)
		} else {
			fmt.Fprintf(w, "report with plots: %s (pipe report %s writes it again)\n", pipeline.DisplayPath(path), cmdline.Join([]string{pipeline.DisplayPath(dir)}))
		}
	}
	// A replay says what changed from the run it replays.
	if fr != nil {
		var c *runreport.Comparison
		orig, err := runreport.Build(ctx, fr.RunDir, runreport.Options{VerdictsOnly: true})
		if err == nil {
			c, err = runreport.Compare(orig, r)
		}
		for _, w := range []io.Writer{term, log} {
			fmt.Fprintln(w)
			if err != nil {
				fmt.Fprintf(w, "pipe: no comparison with %s: %v\n", pipeline.DisplayPath(fr.RunDir), err)
				continue
			}
			c.WriteText(w, pipeline.DisplayPath(fr.RunDir), pipeline.DisplayPath(dir))
			fmt.Fprintf(w, "(pipe report %s %s shows it again)\n", cmdline.Join([]string{pipeline.DisplayPath(fr.RunDir)}), cmdline.Join([]string{pipeline.DisplayPath(dir)}))
		}
	}
	return r
}
