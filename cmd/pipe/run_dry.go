package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/pipe-dev/pipe/internal/numfmt"
	"github.com/pipe-dev/pipe/pipeline"
	"github.com/pipe-dev/pipe/pipeline/commitlog"
	"github.com/pipe-dev/pipe/pipeline/engine"
	"github.com/pipe-dev/pipe/pipeline/rundir"
)

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
