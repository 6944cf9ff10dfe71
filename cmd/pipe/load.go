package main

import (
	"flag"
	"fmt"
	"strings"

	"github.com/pipe-dev/pipe/pipeline"
	"github.com/pipe-dev/pipe/pipeline/pipefile"
	_ "github.com/pipe-dev/pipe/stages" // registers the stage kinds
)

// setFlags collects repeated --set STAGE.KEY=VALUE (or pipeline.KEY=VALUE,
// vars.NAME=VALUE) flags.
type setFlags []string

func (s *setFlags) String() string     { return strings.Join(*s, " ") }
func (s *setFlags) Set(v string) error { *s = append(*s, v); return nil }

func addSetFlag(fs *flag.FlagSet, s *setFlags) {
	fs.Var(s, "set", "override one value: `STAGE.KEY=VALUE`, pipeline.KEY=VALUE, trainer.KEY=VALUE or vars.NAME=VALUE (VALUE in TOML syntax or a bare string; a relative path resolves against the current directory; repeatable)")
}

// loadPlan reads, decodes and checks a pipeline file, including that no two
// paths conflict (one output for two writers, an output that is an input)
// and that its outputs can be created. runDir, if not empty, overrides
// [pipeline] run_dir.
func loadPlan(path string, sets []string, runDir string) (*pipeline.Plan, pipefile.Problems) {
	return loadShardPlan(path, sets, runDir, "", "")
}

// loadShardPlan is loadPlan for one shard ("I/N", as --shard; "" means
// the file's [pipeline] shard, if any), replaying from another run with
// from ("STAGE=RUN_DIR", see pipefile.From; "" for none).
func loadShardPlan(path string, sets []string, runDir, shard, from string) (*pipeline.Plan, pipefile.Problems) {
	if runDir != "" {
		sets = append(append([]string(nil), sets...), fmt.Sprintf("pipeline.run_dir=%q", runDir))
	}
	f, probs := pipefile.Load(path, pipefile.Options{Set: sets, Shard: shard, From: from})
	if f == nil {
		return nil, probs
	}
	plan, bprobs := pipeline.Build(f, pipeline.DefaultRegistry)
	probs = append(probs, bprobs...)
	probs = append(probs, plan.CheckPathConflicts()...)
	if len(probs) == 0 {
		probs = append(probs, plan.CheckOutputs()...)
	}
	probs.Sort()
	return plan, probs
}

// loadGraph reads and decodes a pipeline file for drawing: only the graph's
// shape is checked (ids, kinds, inputs, ports, cycles), and nothing but the
// file itself is read, so a picture needs neither the data, the model nor
// the environment the run will have. The plan is nil only when the file
// cannot be decoded at all.
func loadGraph(path string, sets []string, from string) (*pipeline.Plan, pipefile.Problems) {
	f, probs := pipefile.Load(path, pipefile.Options{Set: sets, From: from})
	if f == nil {
		return nil, probs
	}
	plan, bprobs := pipeline.BuildGraph(f, pipeline.DefaultRegistry)
	probs = append(probs.Structural(), bprobs...)
	probs.Sort()
	return plan, probs
}
