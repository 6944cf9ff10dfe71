package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/pipe-dev/pipe/internal/numfmt"
	"github.com/pipe-dev/pipe/pipeline"
	"github.com/pipe-dev/pipe/pipeline/commitlog"
	"github.com/pipe-dev/pipe/pipeline/filecommit"
	"github.com/pipe-dev/pipe/pipeline/output"
	"github.com/pipe-dev/pipe/pipeline/rundir"
	"github.com/pipe-dev/pipe/stages"
	"github.com/pipe-dev/pipe/stages/s3up"
)

// verifyCmd is pipe verify and its flags.
type verifyCmd struct {
	sizeOnly, repair bool
	endpoint, region string
	pathStyle        bool
}

func init() {
	register(&command{
		Name:      "verify",
		UsageLine: "pipe verify [--size-only] [--repair] [--endpoint URL] [--force-path-style] PATH|RUN_DIR|FILE|s3://BUCKET/PREFIX/DIR",
		Short:     "check every output against its manifest: local shards by size and sha256, S3 objects by size and checksum",
		Long: `Verify checks what was committed against the manifest that names it, and
needs no generation server. A shard directory (PATH with manifest.json):
each shard's size and SHA-256. A run directory or a pipeline file: every
output of the pipeline (each writer's and upload's own check), and an
upload's objects in the bucket: there, with the size, pipe-sha256 and the
checksum the server computed (a multipart object's composite checksum
against the local file; where the server keeps none, a download). An
s3:// URI: the manifest there and each shard it names, downloaded where
the server keeps no whole-object checksum.

--repair uploads again, from the local shard, what is missing or
different in a bucket, then the manifest. --size-only skips the SHA-256
of local shards.

Exit 0: everything checked out. 1: something is missing or different
(listed, with the rows it holds; the same pipe run writes or uploads it
again). 2: rows of damaged shards that were never written again (by id
hash), a damaged manifest, or refused credentials.`,
		New: func() runner { return &verifyCmd{} },
	})
}

func (c *verifyCmd) setFlags(fs *flag.FlagSet) {
	fs.BoolVar(&c.sizeOnly, "size-only", false, "check local shards by size only, without reading them")
	fs.BoolVar(&c.repair, "repair", false, "upload again from the local copy what is missing or different in the bucket, then the manifest")
	fs.StringVar(&c.endpoint, "endpoint", "", "S3 endpoint for an s3:// URI (default: AWS, or AWS_ENDPOINT_URL_S3)")
	fs.StringVar(&c.region, "region", "", "S3 region for an s3:// URI")
	fs.BoolVar(&c.pathStyle, "force-path-style", false, "address the bucket as ENDPOINT/BUCKET (most S3-compatible servers)")
}

func (c *verifyCmd) run(ctx context.Context, std *stdio, fs *flag.FlagSet) error {
	if fs.NArg() != 1 {
		return usageErrorf("usage: pipe verify [flags] PATH|RUN_DIR|FILE|s3://…")
	}
	arg := fs.Arg(0)
	var (
		res []*output.Verified
		err error
	)
	switch {
	case strings.HasPrefix(arg, "s3://"):
		var v *output.Verified
		v, err = verifyS3(ctx, arg, s3up.Config{URI: arg, Endpoint: c.endpoint, Region: c.region, PathStyle: c.pathStyle})
		res = []*output.Verified{v}
	default:
		res, err = verifyPath(ctx, arg, !c.sizeOnly, c.repair, std.Err)
	}
	if err != nil {
		return verifyExit(err)
	}
	return reportVerified(std.Out, res)
}

// verifyExit is the exit of a verify that could not check: 2 for a
// refusal or damaged bookkeeping, else 1.
func verifyExit(err error) error {
	if pipeline.IsPermanent(err) || s3up.Refused(err) {
		return &exitError{code: exitUsage, err: err}
	}
	return err
}

// verifyPath verifies a shard directory, a run directory (the pipeline
// file that made it) or a pipeline file.
func verifyPath(ctx context.Context, arg string, hash, repair bool, log io.Writer) ([]*output.Verified, error) {
	st, err := os.Stat(arg)
	if err != nil {
		return nil, usageErrorf("pipe verify: %v", err)
	}
	if st.IsDir() {
		if _, err := os.Stat(filepath.Join(arg, filecommit.ManifestName)); err == nil {
			v, err := stages.VerifyShardDir(arg, hash)
			if err != nil {
				return nil, err
			}
			resolveGone([]*output.Verified{v})
			return []*output.Verified{v}, nil
		}
		r, err := rundir.ReadRun(arg)
		if err != nil {
			return nil, err
		}
		if r == nil {
			return nil, usageErrorf("pipe verify: %s is neither a shard directory (no %s) nor a run directory (no %s)", arg, filecommit.ManifestName, rundir.RunFile)
		}
		shard := ""
		if r.Shard != nil {
			shard = fmt.Sprintf("%d/%d", r.Shard.Index, r.Shard.Count)
		}
		abs, _ := filepath.Abs(arg)
		plan, probs := loadShardPlan(r.Pipeline, nil, abs, shard, "")
		if len(probs) > 0 {
			return nil, &exitError{code: exitUsage, err: fmt.Errorf("the run's pipeline file %s: %w", r.Pipeline, probs)}
		}
		return verifyPlan(ctx, plan, hash, repair, log)
	}
	plan, probs := loadShardPlan(arg, nil, "", "", "")
	if len(probs) > 0 {
		return nil, &exitError{code: exitUsage, err: probs}
	}
	return verifyPlan(ctx, plan, hash, repair, log)
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

// verifyS3 checks a shard directory in a bucket by its manifest there.
func verifyS3(ctx context.Context, uri string, cfg s3up.Config) (*output.Verified, error) {
	c, err := s3up.New(ctx, cfg)
	if err != nil {
		return nil, usageErrorf("pipe verify: %v", err)
	}
	defer c.Close()
	if _, err := c.Check(ctx); err != nil {
		return nil, err
	}
	key := c.Key(filecommit.ManifestName)
	obj, err := c.Head(ctx, key)
	if err != nil {
		return nil, err
	}
	if obj == nil {
		return &output.Verified{Where: uri, Problems: []string{c.URL(key) + " is not in the bucket: no shard there is known to be complete"}}, nil
	}
	data, err := c.GetBytes(ctx, key)
	if err != nil {
		return nil, err
	}
	var m filecommit.Manifest
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, &commitlog.DamagedError{Path: c.URL(key), Err: err}
	}
	v := &output.Verified{Where: uri, Covers: map[string]bool{}}
	if err := stages.VerifyObjects(ctx, c, c.Prefix, &m, "", true, false, v); err != nil {
		return nil, err
	}
	return v, nil
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
