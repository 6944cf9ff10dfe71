package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"

	"github.com/pipe-dev/pipe/deploy"
	"github.com/pipe-dev/pipe/stages"
)

// deployCmd is pipe deploy slurm and its flags.
type deployCmd struct {
	sets  setFlags
	out   string
	array int
}

func init() {
	register(&command{
		Name:      "deploy",
		UsageLine: "pipe deploy slurm FILE [-o SCRIPT] [--array N]",
		Short:     "write the Slurm job-array script that runs a pipeline file, asking for the GPUs its servers need",
		Long: `Deploy slurm writes deploy/slurm/pipe-array.sbatch for FILE (one array task
per shard, requeued on a retryable failure; see docs/clusters.md), with
#SBATCH --gres=gpu:N set to the GPUs FILE's launch tables take at once
(count × gpus_per_server): each task's pipe run launches the servers on its
own node, with that node's GPUs when a table says gpus = "visible". It
prints the sbatch command that submits it.`,
		New: func() runner { return &deployCmd{} },
	})
}

func (c *deployCmd) setFlags(fs *flag.FlagSet) {
	addSetFlag(fs, &c.sets)
	fs.StringVar(&c.out, "o", "pipe-array.sbatch", "the script to write (never overwritten)")
	fs.IntVar(&c.array, "array", 4, "the array's tasks (shards of the input) in the sbatch command shown")
}

func (c *deployCmd) run(ctx context.Context, std *stdio, fs *flag.FlagSet) error {
	if fs.NArg() != 2 || fs.Arg(0) != "slurm" {
		return usageErrorf("usage: pipe deploy slurm FILE [-o SCRIPT] [--array N]")
	}
	file := fs.Arg(1)
	plan, probs := loadPlan(file, c.sets, "")
	if plan == nil || len(probs) > 0 {
		return &exitError{code: exitUsage, err: errors.New(probs.Error())}
	}
	gpus := stages.LaunchedGPUs(plan)
	script, err := deploy.SlurmArray(file, gpus)
	if err != nil {
		return err
	}
	f, err := os.OpenFile(c.out, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o755)
	if err != nil {
		return usageErrorf("-o %s: %v", c.out, err)
	}
	if _, err := f.WriteString(script); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	what := "no GPUs asked for (the file's servers run elsewhere, or its launch tables name no gpus)"
	if gpus > 0 {
		what = fmt.Sprintf("each task asks for %d GPUs (#SBATCH --gres=gpu:%d) and launches its servers on its own node", gpus, gpus)
	}
	fmt.Fprintf(std.Out, "wrote %s: %s. Submit it:\n  sbatch --array=0-%d %s %s\n", c.out, what, max(c.array, 1)-1, c.out, file)
	return nil
}
