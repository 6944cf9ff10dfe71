package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/pipe-dev/pipe/pipeline"
)

func init() {
	var (
		dryRun       bool
		runDir       string
		sim          int
		drainTimeout time.Duration
		progress     time.Duration
		sets         setFlags
	)
	register(&command{
		Name:      "run",
		UsageLine: "pipe run [--dry-run] [--set STAGE.KEY=VALUE]... [--run-dir DIR] [--sim N] FILE",
		Short:     "run a pipeline (or plan it with --dry-run)",
		Long: `Run checks the file, then runs the graph until every input is processed.
Progress is printed to stderr and appended to RUN_DIR/run.log; the summary shows,
per stage, in = out + rejected + failed. Rejected and failed records that no
stage takes are kept in RUN_DIR/rejected/ and RUN_DIR/failed/.

The first Ctrl-C (or SIGTERM) stops reading input, lets in-flight work finish
and commits the outputs (exit 130); a second one stops at once.

--dry-run checks the file, resolves every path, probes servers, prints the
graph and the plan, and does no work.`,
		SetFlags: func(fs *flag.FlagSet) {
			sets = nil
			fs.BoolVar(&dryRun, "dry-run", false, "check, resolve paths, print the graph and plan; do no work")
			fs.StringVar(&runDir, "run-dir", "", "run directory (overrides [pipeline] run_dir)")
			fs.IntVar(&sim, "sim", 0, "replace every generate stage's servers with `N` simulated servers started in-process")
			fs.DurationVar(&drainTimeout, "drain-timeout", 10*time.Minute, "after the first Ctrl-C, how long in-flight work may take before stopping at once")
			fs.DurationVar(&progress, "progress", 0, "progress line interval (default 5s on a terminal, 30s otherwise)")
			addSetFlag(fs, &sets)
		},
		Run: func(ctx context.Context, std *stdio, fs *flag.FlagSet) error {
			if fs.NArg() != 1 {
				return usageErrorf("usage: pipe run [flags] FILE")
			}
			path := fs.Arg(0)
			all := append([]string(nil), sets...)
			if sim > 0 {
				ids, err := stageIDsOfKind(path, "generate")
				if err != nil {
					return &exitError{code: exitUsage, err: err}
				}
				for _, id := range ids {
					all = append(all, fmt.Sprintf(`%s.servers=["sim:%d"]`, id, sim))
				}
			}
			plan, probs := loadPlan(path, all, runDir)
			if len(probs) > 0 {
				return &exitError{code: exitUsage, err: probs}
			}
			if dryRun {
				return dryRunPlan(ctx, std, plan)
			}
			every := progress
			if every == 0 {
				every = 30 * time.Second
				if isTerminal(std.Err) {
					every = 5 * time.Second
				}
			}
			return runPlan(ctx, std, plan, drainTimeout, every)
		},
	})
}

// stageIDsOfKind lists the ids of a file's stages of one kind.
func stageIDsOfKind(path, kind string) ([]string, error) {
	f, probs := pipeline.LoadFile(path, pipeline.LoadOptions{})
	if f == nil {
		return nil, probs
	}
	var ids []string
	for _, s := range f.Stages {
		if s.Kind == kind {
			ids = append(ids, s.ID)
		}
	}
	if len(ids) == 0 {
		return nil, fmt.Errorf("%s: --sim given, but the pipeline has no %s stage", path, kind)
	}
	return ids, nil
}

func dryRunPlan(ctx context.Context, std *stdio, plan *pipeline.Plan) error {
	plan.WriteText(std.Out)
	fmt.Fprintln(std.Out, "\nplan:")
	for _, u := range plan.Paths() {
		who := "pipeline"
		if u.Stage != "" {
			who = "stage " + u.Stage
		}
		fmt.Fprintf(std.Out, "  %-22s %-8s %s  (%s)\n", who, u.Key, u.Path, describePath(u))
	}
	var failed []string
	for _, s := range plan.Stages {
		st, err := s.Spec.New(s.Config)
		if err != nil {
			return &pipeline.StageError{Stage: s.ID(), Kind: s.Spec.Kind, Err: err}
		}
		dr, ok := st.(pipeline.DryRunner)
		if !ok {
			continue
		}
		res := pipeline.NewResources()
		out, err := dr.DryRun(ctx, &pipeline.Env{StageID: s.ID(), RunDir: plan.File.RunDir, Log: io.Discard, Resources: res})
		res.Close()
		fmt.Fprintf(std.Out, "\nstage %s (%s):\n%s", s.ID(), s.Spec.Kind, indentLines(out, "  "))
		if err != nil {
			failed = append(failed, fmt.Sprintf("stage %q (%s): %v", s.ID(), s.Spec.Kind, err))
		}
	}
	if len(failed) > 0 {
		return errors.New(strings.Join(failed, "\n"))
	}
	fmt.Fprintln(std.Out, "\ndry run: nothing was done. Run without --dry-run to start.")
	return nil
}

func describePath(u pipeline.PathUse) string {
	st, err := os.Stat(u.Path)
	switch u.Mode {
	case "in", "indir":
		if err == nil && !st.IsDir() {
			return "input, " + pipeline.HumanBytes(st.Size())
		}
		return "input"
	case "out":
		if err == nil {
			return fmt.Sprintf("output; the existing %s file will be kept as PATH.prev-TIME", pipeline.HumanBytes(st.Size()))
		}
		return "output, will be created"
	default:
		if err == nil {
			return "directory, exists"
		}
		return "directory, will be created"
	}
}

// stopGrace is how long the second Ctrl-C waits for stages to stop before
// the command exits anyway.
const stopGrace = 30 * time.Second

func runPlan(ctx context.Context, std *stdio, plan *pipeline.Plan, drainTimeout, every time.Duration) error {
	if err := os.MkdirAll(plan.File.RunDir, 0o755); err != nil {
		return fmt.Errorf("run directory: %w", err)
	}
	logf, err := os.OpenFile(filepath.Join(plan.File.RunDir, "run.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("run log: %w", err)
	}
	defer logf.Close()
	var logMu sync.Mutex
	log := writerFunc(func(p []byte) (int, error) {
		logMu.Lock()
		defer logMu.Unlock()
		return fmt.Fprintf(logf, "%s %s", time.Now().UTC().Format(time.RFC3339), p)
	})
	fmt.Fprintf(log, "run %s (%s), run dir %s\n", plan.File.Name, plan.File.Path, plan.File.RunDir)
	fmt.Fprintf(std.Err, "pipe: running %s; log in %s\n", plan.File.Path, filepath.Join(plan.File.RunDir, "run.log"))

	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := make(chan struct{})
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
	go func() {
		n := 0
		for {
			select {
			case <-sigDone:
				return
			case <-std.Signals:
				n++
				switch n {
				case 1:
					fmt.Fprintln(std.Err, "\npipe: stopping intake and draining in-flight work; press Ctrl-C again to stop at once")
					close(stop)
				case 2:
					fmt.Fprintln(std.Err, "\npipe: stopping at once")
					cancel()
					grace.Reset(stopGrace)
				default:
					closeGiveUp()
					return
				}
			}
		}
	}()

	statusPath := filepath.Join(plan.File.RunDir, "status.json")
	prog := &progress{}
	type result struct {
		sum *pipeline.Summary
		err error
	}
	done := make(chan result, 1)
	go func() {
		sum, err := pipeline.Run(runCtx, plan, pipeline.RunOptions{
			Stop:          stop,
			DrainTimeout:  drainTimeout,
			Log:           log,
			ProgressEvery: every,
			Progress: func(s *pipeline.Summary) {
				line := prog.line(s)
				fmt.Fprintln(std.Err, line)
				fmt.Fprintln(log, line)
				writeStatus(statusPath, "running", s, nil)
			},
		})
		done <- result{sum, err}
	}()
	var res result
	select {
	case res = <-done:
	case <-giveUp:
		fmt.Fprintf(std.Err, "pipe: a stage did not stop within %s of the second Ctrl-C; exiting without waiting for it. Outputs committed so far are kept.\n", stopGrace)
		fmt.Fprintln(log, "gave up waiting for the run to stop")
		return &exitError{code: exitInterrupted}
	}
	sum, runErr := res.sum, res.err
	state := "done"
	switch {
	case runErr != nil && errors.Is(runErr, pipeline.ErrStopped):
		state = "stopped"
	case runErr != nil:
		state = "failed"
	case sum.Drained:
		state = "drained"
	}
	writeStatus(statusPath, state, sum, runErr)
	if state != "failed" || sum.Started() {
		printSummary(std.Err, plan, sum)
		printSummary(log, plan, sum)
	}
	switch state {
	case "failed":
		fmt.Fprintf(log, "failed: %v\n", runErr)
		return fmt.Errorf("run failed: %w\nOutputs committed so far are kept; records in flight will be redone. Log: %s",
			runErr, filepath.Join(plan.File.RunDir, "run.log"))
	case "stopped", "drained":
		what := "drained and committed"
		if state == "stopped" {
			what = "stopped at once; in-flight records were abandoned"
		}
		fmt.Fprintf(std.Err, "pipe: interrupted (%s). Running the same command again starts over (resume is not implemented yet); previous outputs are kept as PATH.prev-TIME.\n", what)
		fmt.Fprintf(log, "interrupted: %s\n", what)
		return &exitError{code: exitInterrupted}
	}
	fmt.Fprintln(log, "done")
	return nil
}

// progress turns periodic snapshots into one compact line each: elapsed,
// then per stage its output count, its rate since the last line, and its
// rejections as a share of what it took in — so an 87%-empty dataset shows
// in the first minute, not after two days.
type progress struct {
	prev *pipeline.Summary
}

func (p *progress) line(s *pipeline.Summary) string {
	var b strings.Builder
	fmt.Fprintf(&b, "[%s]", s.Elapsed.Round(time.Second))
	for i, st := range s.Stages {
		fmt.Fprintf(&b, " %s %d", st.ID, st.Out)
		if p.prev != nil && i < len(p.prev.Stages) {
			if dt := (s.Elapsed - p.prev.Elapsed).Seconds(); dt > 0 {
				fmt.Fprintf(&b, " (%.1f/s)", float64(st.Out-p.prev.Stages[i].Out)/dt)
			}
		}
		if st.Rejected > 0 && st.In > 0 {
			fmt.Fprintf(&b, " rej %d=%.1f%%", st.Rejected, 100*float64(st.Rejected)/float64(st.In))
		}
		if st.Failed > 0 {
			fmt.Fprintf(&b, " FAILED %d", st.Failed)
		}
		b.WriteString(" |")
	}
	p.prev = s
	return strings.TrimSuffix(b.String(), " |")
}

func printSummary(w io.Writer, plan *pipeline.Plan, s *pipeline.Summary) {
	if s == nil || len(s.Stages) == 0 {
		return
	}
	fmt.Fprintf(w, "\nsummary of %s after %s:\n", plan.File.Name, s.Elapsed.Round(time.Millisecond))
	idw, kw := len("stage"), len("kind")
	for _, st := range s.Stages {
		idw, kw = max(idw, len(st.ID)), max(kw, len(st.Kind))
	}
	fmt.Fprintf(w, "  %-*s  %-*s  %9s  %9s  %9s  %9s  %9s  %s\n", idw, "stage", kw, "kind", "in", "out", "rejected", "failed", "skipped", "balanced")
	for _, st := range s.Stages {
		bal := "yes"
		if !st.Balanced() {
			bal = fmt.Sprintf("no (%d abandoned)", st.Abandoned)
		}
		fmt.Fprintf(w, "  %-*s  %-*s  %9d  %9d  %9d  %9d  %9d  %s\n", idw, st.ID, kw, st.Kind, st.In, st.Out, st.Rejected, st.Failed, st.Skipped, bal)
	}
	for _, st := range s.Stages {
		if st.Abandoned > 0 {
			fmt.Fprintf(w, "%s: %d records not started when the run stopped; the next run does them\n", st.ID, st.Abandoned)
		}
		if st.Replayed > 0 {
			fmt.Fprintf(w, "%s: %d records taken from its journal (done by an earlier run, not redone)\n", st.ID, st.Replayed)
		}
		if len(st.Reasons) > 0 {
			fmt.Fprintf(w, "rejected by %s: %s\n", st.ID, countsByValue(st.Reasons))
		}
		if len(st.Skips) > 0 {
			fmt.Fprintf(w, "skipped by %s: %s\n", st.ID, countsByValue(st.Skips))
		}
		for _, stat := range st.Stats {
			fmt.Fprintf(w, "%s: %s: %s\n", st.ID, stat.Name, stat.Value)
		}
	}
	for _, p := range s.DeadLetters {
		fmt.Fprintf(w, "kept: %s\n", p)
	}
	fmt.Fprintf(w, "finished ids in %s: %d (%d before this run, %d in it)\n",
		pipeline.DisplayPath(plan.File.RunDir), s.Finished, s.FinishedAtStart, s.Finished-s.FinishedAtStart)
}

// countsByValue prints counts largest first: "empty_answer 126, think_unclosed 23".
func countsByValue(m map[string]int64) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		return m[keys[i]] > m[keys[j]] || (m[keys[i]] == m[keys[j]] && keys[i] < keys[j])
	})
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s %d", k, m[k])
	}
	return strings.Join(parts, ", ")
}

// writeStatus records the run's state for `pipe status` and other tools,
// replacing the file atomically.
func writeStatus(path, state string, s *pipeline.Summary, runErr error) {
	doc := map[string]any{"state": state, "updated": time.Now().UTC().Format(time.RFC3339), "pid": os.Getpid()}
	if s != nil {
		doc["elapsed_s"] = s.Elapsed.Seconds()
		doc["stages"] = s.Stages
		doc["dead_letters"] = s.DeadLetters
	}
	if runErr != nil {
		doc["error"] = runErr.Error()
	}
	data, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return
	}
	tmp := path + ".tmp"
	if os.WriteFile(tmp, data, 0o644) == nil {
		os.Rename(tmp, path)
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

func indentLines(s, prefix string) string {
	if s == "" {
		return ""
	}
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return prefix + strings.Join(lines, "\n"+prefix) + "\n"
}
