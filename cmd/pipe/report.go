package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"

	"github.com/pipe-dev/pipe/cmd/pipe/runreport"
	"github.com/pipe-dev/pipe/pipeline"
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
