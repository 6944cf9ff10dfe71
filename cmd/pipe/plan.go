package main

import (
	"context"
	"flag"
	"strconv"
)

// planCmd is pipe plan: pipe run with a sample by default. It calls the
// run command (a runner of it, from the command table) with its flags, so
// a plan is a start of the run like any other, and shares nothing else
// with it.
type planCmd struct{ inner runner }

func init() {
	register(&command{
		Name:      "plan",
		UsageLine: "pipe plan [--sample N] [--json] [--set STAGE.KEY=VALUE]... [--run-dir DIR] FILE",
		Short:     "run a spread sample of the input and project the whole run from it",
		Long:      planLong,
		New:       func() runner { return &planCmd{inner: commands["run"].New()} },
	})
}

// setFlags declares pipe run's flags, --sample set to defaultSample.
func (c *planCmd) setFlags(fs *flag.FlagSet) {
	c.inner.setFlags(fs)
	if f := fs.Lookup("sample"); f != nil {
		f.DefValue = strconv.Itoa(defaultSample)
		f.Value.Set(f.DefValue)
	}
}

func (c *planCmd) run(ctx context.Context, std *stdio, fs *flag.FlagSet) error {
	if n, err := strconv.ParseInt(fs.Lookup("sample").Value.String(), 10, 64); err != nil || n <= 0 {
		return usageErrorf("pipe plan: --sample must be at least 1")
	}
	return c.inner.run(ctx, std, fs)
}

const planLong = `Plan runs the pipeline on a sample of the work left, spread over the
input (every k-th prompt not finished yet, so a file sorted by length is
sampled over all of it), as a start of the run like any other: its
completions are committed to the outputs and kept in the journal, and the
next pipe run of the same file does not generate them again. The early
checks of a run's first completions (a tokenizer that is not the
servers', thinking that does not happen, most completions cut at the
length limit) stop it as they stop a run.

From the sample it measures each server's throughput at its concurrency
(its completions' mean latency), its time to first token where its
/metrics report it (SGLang's --enable-metrics), the output tokens per prompt, the share
cut at the length limit and the rows kept, and projects for the rest of
the input, with a 95% interval: the wall-clock time pipe run will take,
GPU-hours (servers × hours), output tokens, training rows and the decoded
tokens per trained token, and how long the slowest 1% of prompts take.
Stages before generation that reject prompts (near duplicates, benchmark
prompts) are counted in the sample and projected over the prompts left;
near duplicates are found within the sample only, so the whole input has
more. It
recommends max_output_tokens from the measured lengths. The run's ETA uses
the same model of the fleet, with its servers' latencies as they are then.

--json prints the figures on stdout: wall_seconds, gpu_hours,
output_tokens and training_rows are each {"value", "low", "high"}.

A sample of a few hundred prompts at least three times the fleet's
concurrency measures the servers busy, as the run keeps them.`

// defaultSample is pipe plan's sample when --sample is not given.
const defaultSample = 400
