package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/pipe-dev/pipe/cmd/pipe/internal/cmdline"
	"github.com/pipe-dev/pipe/internal/redact"
	"github.com/pipe-dev/pipe/pipeline"
	"github.com/pipe-dev/pipe/pipeline/commitlog"
	"github.com/pipe-dev/pipe/pipeline/pipefile"
	"github.com/pipe-dev/pipe/pipeline/rundir"
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
	fs.BoolVar(&c.planJSON, "json", false, "with --sample: print the projection as JSON on stdout")
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
	if c.planJSON && c.sample <= 0 {
		return usageErrorf("--json prints a plan's projection: it needs --sample N (or use pipe plan)")
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
func commandLine(args []string, detached bool) (recorded []string, again string) {
	typed := append([]string{"pipe"}, args...)
	if detached && len(typed) > 1 {
		// As the user typed it: the child was started without
		// --detach, which the same command needs to continue alike.
		typed = append([]string{"pipe", typed[1], "--detach"}, typed[2:]...)
	}
	recorded, redacted := redact.Args(typed)
	recorded, redactedNotify := redactNotifyFlags(recorded)
	again = cmdline.Join(cmdline.Resume(recorded))
	switch {
	case redacted && redactedNotify:
		again += "   (with the credentials you gave in server URLs and the --notify URLs, removed here)"
	case redacted:
		again += "   (with the credentials you gave in server URLs, removed here)"
	case redactedNotify:
		again += "   (with the --notify URLs you gave, removed here)"
	}
	return recorded, again
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
