package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/pipe-dev/pipe/internal/numfmt"
	"github.com/pipe-dev/pipe/internal/redact"
	"github.com/pipe-dev/pipe/pipeline"
	"github.com/pipe-dev/pipe/pipeline/commitlog"
	"github.com/pipe-dev/pipe/pipeline/engine"
	"github.com/pipe-dev/pipe/pipeline/figure"
	"github.com/pipe-dev/pipe/pipeline/pipefile"
	"github.com/pipe-dev/pipe/pipeline/rundir"
	"github.com/pipe-dev/pipe/pipeline/rundir/layout"
	"github.com/pipe-dev/pipe/stages/sglang"
)

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }

// runCmd is pipe run: its flags, and the steps of a run as methods.
type runCmd struct {
	// sample and planJSON are pipe plan's: the prompts of the sample and
	// JSON output.
	sample       int64
	planJSON     bool
	dryRun       bool
	runDir       string
	sim          int
	drainTimeout time.Duration
	progress     time.Duration
	commitEvery  time.Duration
	noJournal    bool
	fresh        bool
	forceNew     bool
	shard        string
	sets         setFlags
	metricsAddr  string
	logFormat    string
	limits       warnLimits
	diskFreeGiB  float64
	detach       bool
	notify       setFlags
	verifyShards bool
	from         string
}

func init() {
	register(&command{
		Name:      "run",
		UsageLine: "pipe run [--dry-run] [--set STAGE.KEY=VALUE]... [--run-dir DIR] [--sim N] [--shard I/N] [--from STAGE=RUN_DIR] FILE",
		Short:     "run a pipeline (or plan it with --dry-run)",
		Long:      runLong,
		New:       func() runner { return &runCmd{} },
	})
}

const runLong = `Run checks the file, then runs the graph until every input is processed.
Progress is printed to stderr and appended to RUN_DIR/run.log; the summary shows,
per stage, in = out + rejected + failed. Rejected and failed records that no
stage takes are kept in RUN_DIR/rejected/ and RUN_DIR/failed/.

Resume is the same command again: a run directory that holds an earlier run
is continued. Prompts it finished are skipped (dedupe-against-progress),
completions it generated but had not yet committed everywhere are taken from
its journal, not generated again, and the outputs continue where they were
committed. A change of the settings that define the data (model, sampling,
template, validation and mask rules) is refused with the differences listed,
unless --force-new-config; --fresh moves the earlier run and its outputs
aside (PATH.prev-TIME) and starts over. One process at a time may use a run
directory, and one run an output (a lock file beside it, .NAME.lock).

On a terminal, stderr shows a live display: the input read of its size,
each stage's counts and rates, generation in flight, output tokens/s over
the last minute and 15 minutes, each server's state, and the ETA. Without
one, a compact line every --progress-every. RUN_DIR/status.json holds the
same figures, replaced every few seconds (pipe status RUN_DIR shows it);
--metrics-addr serves them to Prometheus. RUN_DIR/run.log is a log/slog
log (--log-format text or json). Warnings a user must act on — a server
ejected or re-admitted, a reject, tiny-answer or failure share past its
threshold since the start or in the last minute, a disk filling — go to
the terminal and the log.

Completions are fsynced to RUN_DIR/journal within a second of arriving;
outputs commit every --commit-every. The first Ctrl-C (or SIGTERM) commits
everything processed at once, stops reading input, lets in-flight requests
finish (up to --drain-timeout) and exits 130; a second one stops at once.
A kill -9 at any moment loses only the requests in flight. SIGHUP (a closed
SSH session or terminal) and a closed stdout/stderr do not stop a run: it
goes on, logging to RUN_DIR/run.log.

--dry-run checks the file, resolves every path, probes servers, prints the
graph and the plan, and does no work.

--from STAGE=RUN_DIR replays another run: STAGE and every stage upstream
of it are replaced by a reader of what STAGE produced there (its journal,
or else the committed output of a writer fed by STAGE alone), and the rest
of the file runs as written, --set applied: e.g. --from gen=runs/regenerate
--set check.min_answer_length=20 re-validates and re-tokenizes a run's
completions without a server. The replay is a run of its own, in
RUN_DIR-from-STAGE unless --run-dir, its outputs moved into RUN_DIR-from-STAGE/out/
unless given with --set; it resumes, locks and counts as any run.

--shard I/N (or [pipeline] shard = "I/N", e.g. "${env:SLURM_ARRAY_TASK_ID}/16")
takes only the input records whose id hashes to shard I of N (counted from
0): N such runs take every record exactly once. Each shard is an ordinary run:
shard-IIII-of-NNNN is put into its run directory, its output paths (just
above each output's name) and S3 prefixes, unless they already name it (use
${shard} to place it yourself). A run directory keeps its shard for life.
pipe merge joins the shards' outputs.

Exit codes: 0 done and every output verified; 1 failed (servers, disk, too
many failed records, an output incomplete: retryable, the same command
continues); 2 usage, pipeline file, changed settings, a refusal such as
wrong S3 credentials or every server refusing the key, or bad data — more rejects than [pipeline]
max_rejected, an output of accepted records with 0 rows — (not retryable
until the file, the command, the credentials or the cause is fixed); 130
interrupted by a signal (retryable: the same command continues).`

func (c *runCmd) setFlags(fs *flag.FlagSet) {
	fs.BoolVar(&c.dryRun, "dry-run", false, "check, resolve paths, print the graph and plan; do no work")
	fs.Int64Var(&c.sample, "sample", 0, "pipe plan: run a spread sample of `N` prompts of the work left (kept) and project the rest (with --dry-run too: the plan is the dry run that measures)")
	fs.StringVar(&c.runDir, "run-dir", "", "run directory (overrides [pipeline] run_dir)")
	fs.IntVar(&c.sim, "sim", 0, "replace every generate stage's servers with `N` simulated servers started in-process")
	fs.DurationVar(&c.drainTimeout, "drain-timeout", 10*time.Minute, "after the first Ctrl-C, how long in-flight work may take before stopping at once")
	fs.DurationVar(&c.progress, "progress-every", 30*time.Second, "without a terminal, how often a progress line is printed (and logged)")
	fs.DurationVar(&c.progress, "progress", 30*time.Second, "the same as --progress-every")
	fs.StringVar(&c.metricsAddr, "metrics-addr", "", "serve Prometheus metrics on `HOST:PORT` (e.g. 127.0.0.1:9090) at /metrics")
	fs.StringVar(&c.logFormat, "log-format", "text", "RUN_DIR/run.log format: text or json")
	c.limits = warnLimits{RejectShare: 0.2, TinyShare: 0.2, FailShare: 0.05}
	fs.Var((*shareFlag)(&c.limits.RejectShare), "warn-rejects", "warn when a stage rejects this share of records (since the start or in the last minute); 0 turns it off")
	fs.Var((*shareFlag)(&c.limits.TinyShare), "warn-tiny", "warn when this share of generated answers is tiny (under 8 characters); 0 turns it off")
	fs.Var((*shareFlag)(&c.limits.FailShare), "warn-failures", "warn when a stage fails this share of records in a minute; 0 turns it off")
	fs.Float64Var(&c.diskFreeGiB, "warn-disk-free", 2, "warn when the disk of the run directory or an output has less than this many GiB free (or under 2%)")
	fs.DurationVar(&c.commitEvery, "commit-every", time.Minute, "how often outputs commit what they have (a stop commits at once)")
	fs.BoolVar(&c.noJournal, "no-journal", false, "do not journal completions (for measuring its cost: a crash then loses completions not yet committed)")
	fs.BoolVar(&c.fresh, "fresh", false, "start over: move an existing run directory and its outputs aside (PATH.prev-TIME)")
	fs.StringVar(&c.shard, "shard", "", "take only shard `I/N` of the input (0 <= I < N; overrides [pipeline] shard)")
	fs.BoolVar(&c.forceNew, "force-new-config", false, "resume even though the settings that define the data changed (recorded in RUN_DIR/run.json)")
	addSetFlag(fs, &c.sets)
	fs.Var(&c.notify, "notify", "say each warning (at most one per 10 minutes), the stop, a failure and the end to `TARGET`: an http(s) URL (JSON POSTed, Slack's text included) or a shell command (the JSON on its stdin); repeatable; added to [pipeline] notify")
	fs.BoolVar(&c.verifyShards, "verify-shards", false, "before building on committed shards, check their SHA-256, not only their sizes (done anyway after a run that did not end cleanly)")
	fs.StringVar(&c.from, "from", "", "replay `STAGE=RUN_DIR`: STAGE and its upstream read what STAGE produced in that run; the rest runs as the file says, in a run directory of its own")
	fs.BoolVar(&c.detach, "detach", false, "run in the background, in its own session (survives the terminal and SSH session); output to RUN_DIR/detached.log; see pipe stop")
}

// run is pipe run FILE: load the plan, check the flags, take the run
// directory and the outputs, record the run, then run it (runPlan).
func (c *runCmd) run(ctx context.Context, std *stdio, fs *flag.FlagSet) error {
	if fs.NArg() != 1 {
		return usageErrorf("usage: pipe run [flags] FILE")
	}
	// A detached child (its notify descriptor set) never detaches
	// again, whatever spelling of --detach it was handed.
	detached := os.Getenv(detachNotifyEnv) != ""
	if c.detach && !c.dryRun && !detached {
		return startDetached(std, std.Args)
	}
	plan, err := c.loadPlan(fs.Arg(0))
	if err != nil {
		return err
	}
	if c.dryRun && c.sample <= 0 {
		return dryRunPlan(ctx, std, plan)
	}
	if err := c.checkFlags(); err != nil {
		return err
	}
	if err := rundir.CheckShardLayout(plan.File.RunDir, plan.File.Shard); err != nil {
		return &exitError{code: exitUsage, err: err}
	}
	var sample pipeline.Sample
	var work planWork
	if c.sample > 0 {
		if work, err = countWork(ctx, plan); err != nil {
			return err
		}
		if work.Records <= work.Finished {
			return fmt.Errorf("nothing left to plan: the %d prompts of the input are finished in %s", work.Records, pipeline.DisplayPath(plan.File.RunDir))
		}
		sample = sampleOf(work, c.sample)
	}
	lock, release, err := c.takeRunDir(std, plan)
	if err != nil {
		return err
	}
	defer release()
	cmdline, again := commandLine(std.Args, detached)
	r, err := c.record(std, plan, cmdline, again)
	if err != nil {
		return err
	}
	if err := notifyDetached(plan.File.RunDir); err != nil {
		return err
	}
	return runPlan(ctx, std, plan, runSettings{
		sample: sample, work: work, planJSON: c.planJSON,
		drainTimeout: c.drainTimeout, progressEvery: c.progress, commitEvery: c.commitEvery, noJournal: c.noJournal,
		again: again, metricsAddr: c.metricsAddr, logFormat: c.logFormat, warn: c.limits,
		fingerprint: rundir.Fingerprint(r.Settings), terminal: canDraw(std.Err),
		notify:    append(append([]string(nil), plan.File.Notify...), c.notify...),
		detached:  detached,
		readWhole: c.verifyShards || lastUnverified(std, plan.File.RunDir),
		tookOver:  lock.TookOver != "",
	})
}

// lastUnverified reports whether the run's last start found its outputs
// not as committed: this start then reads them whole before building on
// them (as --verify-shards), so the same command mends what it can
// instead of failing the same way again.
func lastUnverified(std *stdio, dir string) bool {
	st, err := rundir.ReadStatus[json.RawMessage](dir)
	if err != nil || st == nil || !st.OutputsUnverified {
		return false
	}
	fmt.Fprintf(std.Err, "pipe: the last start found outputs not as committed: each is read whole before the run builds on it (as --verify-shards)\n")
	return true
}

// takeRunDir moves the run directory aside for --fresh, then locks it and
// the outputs; release unlocks both.
func (c *runCmd) takeRunDir(std *stdio, plan *pipeline.Plan) (lock *rundir.Locked, release func(), err error) {
	if c.fresh {
		if err := moveAside(std, plan); err != nil {
			return nil, nil, err
		}
	}
	lock, err = rundir.Lock(plan.File.RunDir)
	if err != nil {
		return nil, nil, err
	}
	// Two runs in different run directories must not write one
	// output either.
	outLocks, err := rundir.LockOutputs(plan.File.RunDir, outputPaths(plan))
	if err != nil {
		lock.Release()
		return nil, nil, err
	}
	if lock.TookOver != "" {
		fmt.Fprintf(std.Err, "pipe: %s\n", lock.TookOver)
	}
	return lock, func() { outLocks.Release(); lock.Release() }, nil
}

// loadPlan loads and checks the file with the flags that change it (--set,
// --sim, --run-dir, --shard, --from).
func (c *runCmd) loadPlan(path string) (*pipeline.Plan, error) {
	all := append([]string(nil), c.sets...)
	if c.sim > 0 {
		sets, err := simSettings(path, c.sim)
		if err != nil {
			return nil, &exitError{code: exitUsage, err: err}
		}
		all = append(all, sets...)
	}
	plan, probs := loadShardPlan(path, all, c.runDir, c.shard, c.from)
	if len(probs) > 0 {
		return nil, &exitError{code: exitUsage, err: probs}
	}
	return plan, nil
}

// checkFlags checks the flags a real run uses (a dry run ignores them).
func (c *runCmd) checkFlags() error {
	if c.progress <= 0 {
		return usageErrorf("--progress-every must be more than 0, got %s", c.progress)
	}
	if c.metricsAddr != "" {
		addr, err := metricsListenAddr(c.metricsAddr)
		if err != nil {
			return usageErrorf("%v", err)
		}
		c.metricsAddr = addr
	}
	if c.logFormat != "text" && c.logFormat != "json" {
		return usageErrorf("--log-format must be text or json, got %q", c.logFormat)
	}
	c.limits.MinFree = int64(c.diskFreeGiB * (1 << 30))
	for _, t := range c.notify {
		if err := pipefile.ParseNotify(t); err != nil {
			return usageErrorf("--%v", err)
		}
	}
	return nil
}

// moveAside is --fresh: the run directory and the outputs are moved aside
// (PATH.prev-TIME), never those of another live run.
func moveAside(std *stdio, plan *pipeline.Plan) error {
	guard, err := rundir.LockOutputs(plan.File.RunDir, outputPaths(plan))
	var busy *rundir.OutputBusyError
	if err != nil && !(errors.As(err, &busy) && busy.RunDir == absPath(plan.File.RunDir)) {
		return err
	} // a run in this run directory: MoveAside says so
	moved, err := rundir.MoveAside(plan.File.RunDir, outputPaths(plan))
	guard.Release() // taken again by the run: some lock files may have moved
	for _, m := range moved {
		fmt.Fprintf(std.Err, "pipe: --fresh: kept %s\n", m)
	}
	return err
}

// commandLine is the command as recorded in run.json and the command that
// continues the run, shown to the user: never with a password given in a
// server URL or a --notify URL on the command line.
func commandLine(args []string, detached bool) (cmdline []string, again string) {
	typed := append([]string{"pipe"}, args...)
	if detached && len(typed) > 1 {
		// As the user typed it: the child was started without
		// --detach, which the same command needs to continue alike.
		typed = append([]string{"pipe", typed[1], "--detach"}, typed[2:]...)
	}
	cmdline, redacted := redact.Args(typed)
	cmdline, redactedNotify := redactNotifyFlags(cmdline)
	again = shellJoin(resumeCommand(cmdline))
	switch {
	case redacted && redactedNotify:
		again += "   (with the credentials you gave in server URLs and the --notify URLs, removed here)"
	case redacted:
		again += "   (with the credentials you gave in server URLs, removed here)"
	case redactedNotify:
		again += "   (with the --notify URLs you gave, removed here)"
	}
	return cmdline, again
}

// record checks the run directory's settings against the plan's
// (--force-new-config) and records this start; it says what changed and
// whether the run resumes.
func (c *runCmd) record(std *stdio, plan *pipeline.Plan, cmdline []string, again string) (*rundir.Run, error) {
	r, diffs, err := rundir.Check(plan.File.RunDir, plan, c.forceNew, cmdline)
	if commitlog.TransientIO(err) {
		// A full disk or a failing device at the start is what it is in
		// the middle of a run: the same command goes on once it passes.
		return nil, fmt.Errorf("%w\nNothing was lost. Once there is room (or the device answers): %s", err, again)
	}
	if err != nil {
		return nil, &exitError{code: exitUsage, err: err}
	}
	if r.Recovered != "" {
		fmt.Fprintf(std.Err, "pipe: warning: %s\n", r.Recovered)
	}
	switch {
	case len(diffs) > 0 && c.forceNew:
		fmt.Fprintf(std.Err, "pipe: --force-new-config: continuing with changed settings (recorded in run.json):\n  %s\n", strings.Join(diffs, "\n  "))
	case len(diffs) > 0:
		fmt.Fprintf(std.Err, "pipe: the settings changed, but nothing was done under the old ones: using the new ones (recorded in run.json):\n  %s\n", strings.Join(diffs, "\n  "))
	}
	if len(r.History) > 1 {
		fmt.Fprintf(std.Err, "pipe: resuming the run in %s (started %s; this is start %d)\n",
			pipeline.DisplayPath(plan.File.RunDir), r.Created.Local().Format(time.DateTime), len(r.History))
	}
	return r, nil
}

// simSettings are the --set values that point every stage of path whose
// kind calls servers (Spec.SimSettings) at n simulated servers.
func simSettings(path string, n int) ([]string, error) {
	f, probs := pipefile.Load(path, pipefile.Options{})
	if f == nil {
		return nil, probs
	}
	var sets []string
	for _, s := range f.Stages {
		if spec := pipeline.DefaultRegistry.Lookup(s.Kind); spec != nil && spec.SimSettings != nil {
			for _, kv := range spec.SimSettings(n) {
				sets = append(sets, s.ID+"."+kv)
			}
		}
	}
	if len(sets) == 0 {
		return nil, fmt.Errorf("%s: --sim given, but no stage of the pipeline calls servers", path)
	}
	return sets, nil
}

// dryRunPlan is pipe run --dry-run: the plan, the paths it uses, the run
// directory and the input, and each stage's own dry run; what would stop
// the run fails it.
func dryRunPlan(ctx context.Context, std *stdio, plan *pipeline.Plan) error {
	plan.WriteText(std.Out)
	busy := dryRunPaths(std.Out, plan)
	fmt.Fprintf(std.Out, "\nrun directory: %s\n", indentLines(rundir.Describe(plan.File.RunDir, plan), "  ")[2:])
	// The input is read as the run will read it: what would stop the run
	// fails the dry run.
	var inputs strings.Builder
	failed, err := checkInputs(ctx, &inputs, plan)
	if err != nil {
		return err
	}
	failed = append(busy, failed...)
	if inputs.Len() > 0 {
		fmt.Fprintf(std.Out, "input:\n%s", indentLines(inputs.String(), "  "))
	}
	stageFailed, refused, err := dryRunStages(ctx, std.Out, plan)
	if err != nil {
		return err
	}
	failed = append(failed, stageFailed...)
	if len(failed) > 0 {
		if refused { // the run would be refused the same way: exit 2
			return &exitError{code: exitUsage, err: errors.New(strings.Join(failed, "\n"))}
		}
		return errors.New(strings.Join(failed, "\n"))
	}
	fmt.Fprintln(std.Out, "\ndry run: nothing was done. Run without --dry-run to start.")
	return nil
}

// dryRunPaths writes the paths the plan uses and its shard; it returns the
// outputs another run directory's run is writing (the run would be refused).
func dryRunPaths(out io.Writer, plan *pipeline.Plan) (busy []string) {
	fmt.Fprintln(out, "\nplan:")
	for _, u := range plan.Paths() {
		who := "pipeline"
		if u.Stage != "" {
			who = "stage " + u.Stage
		}
		fmt.Fprintf(out, "  %-22s %-8s %s  (%s)\n", who, u.Key, u.Path, describePath(u))
		if (u.Mode == "out" || u.Mode == "dir") && u.Stage != "" {
			if w := rundir.OutputWriter(u.Path); w != nil && w.RunDir != absPath(plan.File.RunDir) {
				fmt.Fprintf(out, "    REFUSED: %v\n", w)
				busy = append(busy, w.Error())
			}
		}
	}
	if sh := plan.File.Shard; sh != nil {
		fmt.Fprintf(out, "\nshard: %s: only input records whose id hashes there; %s is in the run directory and every output\n", sh, sh.Name())
		if err := rundir.CheckShardLayout(plan.File.RunDir, sh); err != nil {
			fmt.Fprintf(out, "  REFUSED: %v\n", err)
		}
	}
	return busy
}

// dryRunStages runs the dry run of each stage that has one and writes what
// it says. failed lists the stages that would fail; refused is true when one
// of them would be refused as permanent. err is a stage that cannot be built.
func dryRunStages(ctx context.Context, w io.Writer, plan *pipeline.Plan) (failed []string, refused bool, err error) {
	for _, s := range plan.Stages {
		st, err := s.Spec.New.Stage(s.Config)
		if err != nil {
			return nil, false, &engine.StageError{Stage: s.ID(), Kind: s.Spec.Kind, Err: err}
		}
		dr, ok := st.(pipeline.DryRunner)
		if !ok {
			continue
		}
		res := pipeline.NewResources()
		out, err := dr.DryRun(ctx, &pipeline.Env{StageID: s.ID(), RunDir: plan.File.RunDir, Log: io.Discard, Resources: res})
		res.Close()
		fmt.Fprintf(w, "\nstage %s (%s):\n%s", s.ID(), s.Spec.Kind, indentLines(out, "  "))
		if err != nil {
			failed = append(failed, fmt.Sprintf("stage %q (%s): %v", s.ID(), s.Spec.Kind, err))
			refused = refused || pipeline.IsPermanent(err)
		}
	}
	return failed, refused, nil
}

func describePath(u pipeline.PathUse) string {
	st, err := os.Stat(u.Path)
	if pipeline.IsInputMode(u.Mode) {
		if err == nil && !st.IsDir() {
			return "input, " + numfmt.Bytes(st.Size())
		}
		return "input"
	}
	if u.Mode == "out" {
		switch {
		case err != nil:
			return "output, will be created"
		case fileExists(commitlog.IndexPath(u.Path)):
			return fmt.Sprintf("output, %s committed; continued", numfmt.Bytes(st.Size()))
		}
		return fmt.Sprintf("output; the existing %s file, not written by pipe, will be kept as PATH.prev-TIME", numfmt.Bytes(st.Size()))
	}
	if err == nil {
		return "directory, exists"
	}
	return "directory, will be created"
}

// stopGrace is how long the second Ctrl-C waits for stages to stop before
// the command exits anyway.
const stopGrace = 30 * time.Second

// runSettings are pipe run's flags that shape a run.
type runSettings struct {
	drainTimeout, progressEvery, commitEvery time.Duration
	noJournal                                bool
	// again is the command that continues this run.
	again string
	// metricsAddr, if set, is where Prometheus metrics are served.
	metricsAddr string
	logFormat   string // run.log: "text" or "json"
	warn        warnLimits
	// fingerprint identifies the settings that define the data (run.json).
	fingerprint string
	// terminal: stderr is a terminal, so the live display is drawn there.
	terminal bool
	// notify are the notification targets ([pipeline] notify, --notify).
	notify []string
	// detached: started by --detach, so no terminal and no Ctrl-C; it
	// is stopped with pipe stop.
	detached bool
	// readWhole: writers read what they committed whole before they
	// build on it (--verify-shards, or the last start found outputs not
	// as committed); tookOver: the last start did not end cleanly, so
	// shards are checked by their SHA-256 too.
	readWhole, tookOver bool
	// sample, when set, is pipe plan's: the run reads this sample of the
	// work (counted in work) and ends with the projection (JSON on stdout
	// with planJSON).
	sample   pipeline.Sample
	work     planWork
	planJSON bool
}

// serveMetrics serves the Prometheus metrics on addr (--metrics-addr),
// if given, and says where; nil when not asked for.
func serveMetrics(errOut io.Writer, rl *runLog, addr string) (*runMetrics, error) {
	if addr == "" {
		return nil, nil
	}
	metrics, err := startMetrics(addr)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(errOut, "pipe: metrics on http://%s/metrics\n", metrics.Addr())
	rl.Info("serving metrics", "addr", metrics.Addr())
	if w := metricsExposure(addr); w != "" {
		fmt.Fprintf(errOut, "pipe: warning: %s\n", w)
		rl.Warn(w)
	}
	return metrics, nil
}

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
					again = "pipe stop --now " + shellJoin([]string{pipeline.DisplayPath(a.runDir)}) + " stops at once"
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

// outputPaths lists the plan's output files and directories.
func outputPaths(plan *pipeline.Plan) []string {
	var out []string
	for _, u := range plan.Paths() {
		if (u.Mode == "out" || u.Mode == "dir") && u.Stage != "" {
			out = append(out, u.Path)
		}
	}
	return out
}

// resumeCommand is the command line that continues a run: the same one,
// without the flags that only make sense once.
func resumeCommand(args []string) []string {
	var out []string
	for _, a := range args {
		switch strings.TrimLeft(a, "-") {
		case "fresh", "force-new-config", "fresh=true", "force-new-config=true":
			if strings.HasPrefix(a, "-") {
				continue
			}
		}
		out = append(out, a)
	}
	return out
}

// shellJoin quotes args for a POSIX shell where needed.
func shellJoin(args []string) string {
	q := make([]string, len(args))
	for i, a := range args {
		if a != "" && strings.IndexFunc(a, needsShellQuote) < 0 {
			q[i] = a
			continue
		}
		q[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
	}
	return strings.Join(q, " ")
}

// needsShellQuote reports a rune outside the letters, digits and
// punctuation a POSIX shell takes literally in a word.
func needsShellQuote(r rune) bool {
	switch {
	case 'a' <= r && r <= 'z', 'A' <= r && r <= 'Z', '0' <= r && r <= '9':
		return false
	}
	return !strings.ContainsRune("-_./=:,@+", r)
}

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
	fmt.Fprintf(r.errOut, "pipe: warning [%s]: %s\n", fmtElapsed(w.ElapsedS), w.Text)
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
	r.report(ctx, state, sum)
	if _, budget := budgetReached(runErr); state == stateFinished || budget {
		// Finished means complete: every output checked against its
		// manifest, here and in a bucket, before exit 0. A run stopped
		// by its budget has its outputs checked too: what it says it
		// wrote is there.
		if err := verifyAtEnd(ctx, r.std.Err, r.log, r.plan); err != nil {
			r.rl.Error("outputs not verified", "err", err)
			r.status.base.OutputsUnverified = true // the next start reads them whole
			r.writeStatus(stateFailed, ls, err)
			return err
		}
		r.rl.Info("outputs verified")
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
func (r *runSession) report(ctx context.Context, state string, sum *engine.Summary) {
	repCtx, repCancel := context.WithCancel(context.WithoutCancel(ctx))
	defer repCancel()
	go func() {
		select {
		case <-r.stop:
			repCancel()
		case <-repCtx.Done():
		}
	}()
	reportAtEnd(repCtx, r.std.Err, r.log, r.plan, state, sum)
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

// printSummary writes the end-of-run summary: the stage table, then what
// was left for the next run, per-stage notes, and the totals.
func printSummary(w io.Writer, plan *pipeline.Plan, s *engine.Summary) {
	if s == nil || len(s.Stages) == 0 {
		return
	}
	fmt.Fprintf(w, "\nsummary of %s after %s:\n", plan.File.Name, s.Elapsed.Round(time.Millisecond))
	printStageTable(w, s)
	var notStarted int64
	for _, st := range s.Stages {
		notStarted += st.NotStarted
	}
	expensive := expensiveStages(plan)
	if len(expensive) == 0 {
		// Without a costly stage there is no "before it" to count; the
		// records read and not finished (below) are each counted once.
		notStarted = 0
	}
	if notStarted > 0 {
		fmt.Fprintf(w, "not started: %d records (never reached %s) when the run stopped; the next run does them\n", notStarted, strings.Join(expensive, ", "))
	}
	for _, st := range s.Stages {
		printStageNotes(w, plan, st, expensive)
	}
	if e := rundir.EconomyOf(s.Stages); e != nil {
		fmt.Fprintf(w, "economy: %s in this start\n", e)
	}
	printTotals(w, plan, s, notStarted)
}

// printStageTable writes one row of counts per stage.
// in = out + rejected + failed + skipped + abandoned: in counts every
// record that reached the stage, abandoned ones too.
func printStageTable(w io.Writer, s *engine.Summary) {
	idw, kw := len("stage"), len("kind")
	for _, st := range s.Stages {
		idw, kw = max(idw, len(st.ID)), max(kw, len(st.Kind))
	}
	fmt.Fprintf(w, "  %-*s  %-*s  %9s  %9s  %9s  %9s  %9s  %s\n", idw, "stage", kw, "kind", "in", "out", "rejected", "failed", "skipped", "balanced")
	for _, st := range s.Stages {
		bal := "yes"
		switch {
		case !st.Balanced():
			bal = "no"
		case st.Abandoned > 0:
			bal = fmt.Sprintf("yes (%d abandoned)", st.Abandoned)
		}
		fmt.Fprintf(w, "  %-*s  %-*s  %9d  %9d  %9d  %9d  %9d  %s\n", idw, st.ID, kw, st.Kind, st.In, st.Out, st.Rejected, st.Failed, st.Skipped, bal)
	}
}

// expensiveStages lists the ids of the stages whose work costs (generate).
func expensiveStages(plan *pipeline.Plan) []string {
	var expensive []string
	for _, ps := range plan.Stages {
		if ps.Spec.Expensive {
			expensive = append(expensive, ps.ID())
		}
	}
	return expensive
}

// printStageNotes writes one stage's lines under the table: abandoned and
// replayed records, reject and skip reasons, its figures.
func printStageNotes(w io.Writer, plan *pipeline.Plan, st engine.StageSummary, expensive []string) {
	switch lost := st.Abandoned - st.NotStarted; {
	case lost <= 0:
	case plan.Lookup(st.ID) != nil && plan.Lookup(st.ID).Spec.Expensive:
		fmt.Fprintf(w, "%s: %d records in flight were abandoned; the next run does them again\n", st.ID, lost)
	default:
		fmt.Fprintf(w, "%s: %d records abandoned after %s; the next run takes them from the journal\n", st.ID, lost, strings.Join(expensive, ", "))
	}
	if st.Replayed > 0 {
		fmt.Fprintf(w, "%s: %d records taken from its journal (done by an earlier run, not redone)\n", st.ID, st.Replayed)
	}
	if st.Redone > 0 {
		fmt.Fprintf(w, "%s: %d records done again, their journal entries lost to damage (the warnings above name them)\n", st.ID, st.Redone)
	}
	if len(st.Reasons) > 0 {
		fmt.Fprintf(w, "rejected by %s: %s (%.1f%% of %d)\n", st.ID, countsByValue(st.Reasons), 100*float64(st.Rejected)/float64(max(st.In, 1)), st.In)
	}
	if len(st.Skips) > 0 {
		fmt.Fprintf(w, "skipped by %s: %s\n", st.ID, countsByValue(st.Skips))
	}
	for _, line := range figure.Lines(st.Figures) {
		who := st.ID
		if line.Subject != "" {
			who += ": " + line.Subject
		}
		fmt.Fprintf(w, "%s: %s\n", who, strings.Join(line.Parts, ", "))
	}
}

// printTotals writes the dead letters kept, the finished ids, the failed
// records and what was read but not finished.
func printTotals(w io.Writer, plan *pipeline.Plan, s *engine.Summary, notStarted int64) {
	for _, p := range s.DeadLetters {
		fmt.Fprintf(w, "kept: %s\n", p)
	}
	fmt.Fprintf(w, "finished ids in %s: %d (%d before this run, %d in it)\n",
		pipeline.DisplayPath(plan.File.RunDir), s.Finished, s.FinishedAtStart, s.Finished-s.FinishedAtStart)
	var failed int64
	for _, st := range s.Stages {
		failed += st.Failed
	}
	if failed > 0 {
		fmt.Fprintf(w, "failed: %d records (retries exhausted or a panic; [pipeline] max_failed = %s), kept in %s\n",
			failed, plan.File.MaxFailed.Text, pipeline.DisplayPath(layout.DeadLetterDir(plan.File.RunDir, layout.Failed)))
	}
	if s.Unfinished > 0 && s.Unfinished != notStarted {
		from := ""
		if expensive := expensiveStages(plan); len(expensive) > 0 {
			from = fmt.Sprintf(" (from %s's journal where it holds them)", strings.Join(expensive, ", "))
		}
		fmt.Fprintf(w, "not finished: %d records read in this run; the next run does them%s\n", s.Unfinished, from)
	}
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

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

func indentLines(s, prefix string) string {
	if s == "" {
		return ""
	}
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return prefix + strings.Join(lines, "\n"+prefix) + "\n"
}

// verifyAtEnd checks every output of a finished run (verifyPlan: local
// shards by size and SHA-256, objects in a bucket by size and checksum,
// mending a bucket from the local copy), printing one line per output.
func verifyAtEnd(ctx context.Context, term, log io.Writer, plan *pipeline.Plan) error {
	res, err := verifyPlan(ctx, plan, true, true, log)
	if err != nil {
		err = fmt.Errorf("the run finished, but its outputs could not be verified: %w", err)
		return verifyExit(err)
	}
	if len(res) == 0 {
		return nil
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
		return err
	}
	return nil
}
