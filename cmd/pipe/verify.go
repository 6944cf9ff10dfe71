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
