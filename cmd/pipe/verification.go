package main

import (
	"context"
	"fmt"
	"io"

	"github.com/pipe-dev/pipe/internal/numfmt"
	"github.com/pipe-dev/pipe/pipeline"
	"github.com/pipe-dev/pipe/pipeline/output"
	"github.com/pipe-dev/pipe/stages/s3up"
)

// verifyExit is the exit of a verify that could not check: 2 for a
// refusal or damaged bookkeeping, else 1.
func verifyExit(err error) error {
	if pipeline.IsPermanent(err) || s3up.Refused(err) {
		return &exitError{code: exitUsage, err: err}
	}
	return err
}

// verifyPlan runs each output stage's own Verify (Spec.Verify), upstream
// first, each given the results of the stages feeding it.
func verifyPlan(ctx context.Context, plan *pipeline.Plan, hash, repair bool, log io.Writer) ([]*output.Verified, error) {
	byStage := map[string]*output.Verified{}
	var out []*output.Verified
	for _, ps := range plan.Stages {
		if ps.Spec.Verify == nil {
			continue
		}
		env := &output.VerifyEnv{StageID: ps.ID(), RunDir: plan.File.RunDir, Hash: hash, Repair: repair, Log: log}
		for _, e := range ps.Inputs {
			if v := byStage[e.From.ID()]; v != nil {
				env.Inputs = append(env.Inputs, v)
			}
		}
		v, err := ps.Spec.Verify(ctx, ps.Config, env)
		if err != nil {
			return nil, fmt.Errorf("verifying stage %q (%s): %w", ps.ID(), ps.Spec.Kind, err)
		}
		v.Stage = ps.ID()
		byStage[ps.ID()] = v
		out = append(out, v)
	}
	resolveGone(out)
	return out, nil
}

// reportVerified prints one line per output and each problem; the error
// (and exit code) says whether everything checked out.
func reportVerified(w io.Writer, res []*output.Verified) error {
	var bad, lost int
	for _, v := range res {
		name := v.Where
		if v.Stage != "" {
			name = fmt.Sprintf("%s (stage %q)", v.Where, v.Stage)
		}
		state := "ok"
		if !v.OK() {
			state = "NOT OK"
		}
		unit := v.Unit
		if unit == "" {
			unit = "shards"
		}
		fmt.Fprintf(w, "%s: %s: %d %s, %s checked (%s)\n", state, name, v.Items, unit, numfmt.Bytes(v.Bytes), v.How)
		for _, r := range v.Repaired {
			fmt.Fprintf(w, "  repaired: %s\n", r)
		}
		for _, p := range v.Problems {
			fmt.Fprintf(w, "  %s\n", p)
		}
		if len(v.Lost) > 0 {
			fmt.Fprintf(w, "  %d rows of damaged shards were not written again (their data is gone here; the journal or the input no longer had them):\n", len(v.Lost))
			for i, id := range v.Lost {
				if i == 20 {
					fmt.Fprintf(w, "    … (%d in all)\n", len(v.Lost))
					break
				}
				fmt.Fprintf(w, "    %s\n", id)
			}
		}
		bad += len(v.Problems)
		lost += len(v.Lost)
	}
	switch {
	case lost > 0:
		return &exitError{code: exitUsage, err: fmt.Errorf("verify: %d rows lost, %d problems", lost, bad)}
	case bad > 0:
		return &exitError{code: exitFailed, err: fmt.Errorf("verify: %d problems", bad)}
	}
	return nil
}

// resolveGone turns each local file that is missing into a problem unless
// another output verified a copy of it (an upload, with
// delete_local_after_upload).
func resolveGone(res []*output.Verified) {
	for _, v := range res {
		for _, path := range v.Gone {
			covered := false
			for _, o := range res {
				covered = covered || o.Covers[path]
			}
			if !covered {
				v.Problems = append(v.Problems, pipeline.DisplayPath(path)+" is missing, and no verified copy of it is known")
			}
		}
	}
}
