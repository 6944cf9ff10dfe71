package main

import (
	"context"
	"flag"

	"github.com/pipe-dev/pipe/pipeline/shardrun"
)

// shard-status is the several-run-directories view of pipe status: once a
// `pipe status RUN_DIR` exists, `pipe status DIR DIR...` (or a glob) is
// meant to print this (shardrun.WriteStatus).
func init() {
	register(&command{
		Name:      "shard-status",
		UsageLine: "pipe shard-status RUN_DIR...",
		Short:     "progress of a sharded run: per shard and total, with ETA",
		Long: `Shard-status reads the run directories of a sharded run's shards (or a glob
of them, e.g. 'runs/x/shard-*') and prints one line per shard — its state
(running while a pipe run holds it; killed if it stopped without saying
so), finished ids, rate and ETA — shards not given as missing, and a total.
ETA is known once a shard has read the whole input (its size, split N
ways).`,
		Run: func(ctx context.Context, std *stdio, fs *flag.FlagSet) error {
			if fs.NArg() == 0 {
				return usageErrorf("usage: pipe shard-status RUN_DIR...")
			}
			dirs, err := expandRunDirs(fs.Args())
			if err != nil {
				return usageErrorf("pipe shard-status: %v", err)
			}
			runs, err := shardrun.OpenAll(dirs)
			if err != nil {
				return usageErrorf("pipe shard-status: %v", err)
			}
			return shardrun.WriteStatus(std.Out, runs)
		},
	})
}
