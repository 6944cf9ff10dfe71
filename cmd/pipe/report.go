package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"

	"github.com/pipe-dev/pipe/internal/runreport"
	"github.com/pipe-dev/pipe/pipeline"
)

func init() {
	var (
		tokenizer string
		asJSON    bool
	)
	register(&command{
		Name:      "report",
		UsageLine: "pipe report [--tokenizer DIR] [--json] RUN_DIR",
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
the report says which.`,
		SetFlags: func(fs *flag.FlagSet) {
			fs.StringVar(&tokenizer, "tokenizer", "", "model `DIR` whose </think> splits output ids into thinking and answer tokens")
			fs.BoolVar(&asJSON, "json", false, "print the report as JSON instead of text (report.html is written either way)")
		},
		Run: func(ctx context.Context, std *stdio, fs *flag.FlagSet) error {
			if fs.NArg() != 1 {
				return usageErrorf("usage: pipe report [--tokenizer DIR] [--json] RUN_DIR")
			}
			r, err := runreport.Build(ctx, fs.Arg(0), runreport.Options{Tokenizer: tokenizer})
			if err != nil {
				return err
			}
			if asJSON {
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
		},
	})
}

// recordTimeline adds a progress snapshot to RUN_DIR/timeline.jsonl, for
// the report's throughput over time (runreport.RecordPoint says how often).
func recordTimeline(plan *pipeline.Plan, s *pipeline.Summary) {
	runreport.RecordPoint(plan.File.RunDir, s, false)
}

// reportAtEnd is pipe run's last word: the final point of the timeline,
// then, for a run that completed (state "finished"), the report on the terminal,
// in the log and in RUN_DIR/report.html. A stopped run gets none: reading
// every output could outlast the grace a scheduler gives after SIGTERM
// (pipe report makes it on demand). It never fails the run: a report it
// cannot make is a line saying why. ctx ends it early (a Ctrl-C, pipe stop
// while the report is read: the run's data is all committed by then).
func reportAtEnd(ctx context.Context, term, log io.Writer, plan *pipeline.Plan, state string, sum *pipeline.Summary) {
	dir := plan.File.RunDir
	runreport.RecordPoint(dir, sum, true)
	if state != stateFinished || sum == nil || !sum.Started() {
		return
	}
	r, err := runreport.Build(ctx, dir, runreport.Options{})
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
}
