package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"

	"github.com/pipe-dev/pipe/cmd/pipe/runreport"
	"github.com/pipe-dev/pipe/pipeline"
	"github.com/pipe-dev/pipe/pipeline/engine"
)

// reportCmd is pipe report and its flags.
type reportCmd struct {
	tokenizer string
	asJSON    bool
}

func init() {
	register(&command{
		Name:      "report",
		UsageLine: "pipe report [--tokenizer DIR] [--json] RUN_DIR [RUN_DIR_B]",
		Short:     "report what a run produced: counts, throughput, rejects, token distributions",
		Long: `Report reads what a run directory committed — its outputs (write-arrow
shards, write-jsonl files), rejected/ and failed/, done.ids, status.json and
timeline.jsonl — and prints counts, throughput over time, reject reasons and,
per output, the distributions of prompt, thinking, answer and loss tokens per
row. It also writes RUN_DIR/report.html: the same with plots, one file that
needs no network to view. pipe run writes both at the end of every run; the
report works on a live run too (it reads only what is committed).

Thinking and answer tokens come from the server's reasoning_tokens, else from
the output ids split at </think> (with --tokenizer, or a tokenizer a stage of
the run names), else from the completion tokens split by the texts' lengths;
the report says which.

With two run directories (a run and its replay, pipe run --from, or any
two runs of the same prompts), report says what changed from the first to
the second: each verdict's count in both (accepted, rejected by reason,
failed) and the ids that moved between them, e.g.
"accepted → rejected answer_too_short: 1,204  e.g. p1, p17, p9". An id is
accepted when an output holds it and no rejection or failure of it was
committed. It writes no HTML then.`,
		New: func() runner { return &reportCmd{} },
	})
}

func (c *reportCmd) setFlags(fs *flag.FlagSet) {
	fs.StringVar(&c.tokenizer, "tokenizer", "", "model `DIR` whose </think> splits output ids into thinking and answer tokens")
	fs.BoolVar(&c.asJSON, "json", false, "print the report as JSON instead of text (report.html is written either way)")
}

func (c *reportCmd) run(ctx context.Context, std *stdio, fs *flag.FlagSet) error {
	if fs.NArg() == 2 {
		return compareRuns(ctx, std, fs.Arg(0), fs.Arg(1), c.asJSON)
	}
	if fs.NArg() != 1 {
		return usageErrorf("usage: pipe report [--tokenizer DIR] [--json] RUN_DIR [RUN_DIR_B]")
	}
	r, err := runreport.Build(ctx, fs.Arg(0), runreport.Options{Tokenizer: c.tokenizer})
	if err != nil {
		return err
	}
	if c.asJSON {
		e := json.NewEncoder(std.Out)
		e.SetIndent("", "  ")
		if err := e.Encode(r); err != nil {
			return err
		}
	} else {
		r.WriteText(std.Out)
	}
	path, err := r.WriteHTMLFile()
	if err != nil {
		return fmt.Errorf("writing the HTML report: %w", err)
	}
	fmt.Fprintf(std.Err, "pipe report: wrote %s\n", pipeline.DisplayPath(path))
	return nil
}

// compareRuns prints what changed from run directory a to b.
func compareRuns(ctx context.Context, std *stdio, a, b string, asJSON bool) error {
	c, err := compare(ctx, a, b)
	if err != nil {
		return err
	}
	if asJSON {
		e := json.NewEncoder(std.Out)
		e.SetIndent("", "  ")
		return e.Encode(c)
	}
	c.WriteText(std.Out, pipeline.DisplayPath(a), pipeline.DisplayPath(b))
	return nil
}

func compare(ctx context.Context, a, b string) (*runreport.Comparison, error) {
	ra, err := runreport.Build(ctx, a, runreport.Options{VerdictsOnly: true})
	if err != nil {
		return nil, err
	}
	rb, err := runreport.Build(ctx, b, runreport.Options{VerdictsOnly: true})
	if err != nil {
		return nil, err
	}
	return runreport.Compare(ra, rb)
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
func reportAtEnd(ctx context.Context, term, log io.Writer, plan *pipeline.Plan, state string, sum *engine.Summary) {
	dir := plan.File.RunDir
	runreport.RecordPoint(dir, sum, true)
	if state != stateFinished || sum == nil || !sum.Started() {
		return
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
			err = fmt.Errorf("stopped (pipe report %s makes it)", shellJoin([]string{pipeline.DisplayPath(dir)}))
		}
		fmt.Fprintf(term, "pipe: no run report: %v\n", err)
		return
	}
	path, err := r.WriteHTMLFile()
	for _, w := range []io.Writer{term, log} {
		fmt.Fprintln(w)
		r.WriteText(w)
		if err != nil {
			fmt.Fprintf(w, "pipe: the HTML report could not be written: %v\n", err)
		} else {
			fmt.Fprintf(w, "report with plots: %s (pipe report %s writes it again)\n", pipeline.DisplayPath(path), shellJoin([]string{pipeline.DisplayPath(dir)}))
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
			fmt.Fprintf(w, "(pipe report %s %s shows it again)\n", shellJoin([]string{pipeline.DisplayPath(fr.RunDir)}), shellJoin([]string{pipeline.DisplayPath(dir)}))
		}
	}
}
