package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/pipe-dev/pipe/cmd/pipe/internal/cmdline"
	"github.com/pipe-dev/pipe/pipeline/commitlog"
	"github.com/pipe-dev/pipe/pipeline/shardruns"
	"github.com/pipe-dev/pipe/stages/s3up"
)

// mergeCmd is pipe merge and its flags.
type mergeCmd struct {
	out, endpoint, region string
	pathStyle             bool
}

func init() {
	register(&command{
		Name:      "merge",
		UsageLine: "pipe merge --out DIR|s3://BUCKET/PREFIX RUN_DIR...",
		Short:     "join the shards of a sharded run into one manifest (no data copied)",
		Long: `Merge reads the run directories of a sharded run's shards (pipe run --shard
I/N, one directory each, or a glob of them) and writes one manifest,
merged.json, into --out: every shard's committed output files (path, rows,
bytes, sha256, and the s3:// URL where an upload-s3 stage put them), per
output stage, with totals. No data is copied.

It refuses (exit 1, nothing written) shards of different counts, shards
whose data-defining settings differ (run.json; each shard's own name is
compared as ${shard}) and any id found in two shards' outputs or done.ids.
Shards not given and shards not done are listed in the manifest
("complete": false) and on stderr, and make the exit code 3, so a
scheduler's merge step can wait and run it again.`,
		New: func() runner { return &mergeCmd{} },
	})
}

func (c *mergeCmd) setFlags(fs *flag.FlagSet) {
	fs.StringVar(&c.out, "out", "", "directory or s3://bucket/prefix to write merged.json into (required)")
	fs.StringVar(&c.endpoint, "endpoint", "", "s3:// --out: the S3 endpoint URL of an S3-compatible server (default: AWS, or AWS_ENDPOINT_URL_S3)")
	fs.StringVar(&c.region, "region", "", "s3:// --out: the region (default: the AWS configuration's, else us-east-1)")
	fs.BoolVar(&c.pathStyle, "force-path-style", false, "s3:// --out: address the bucket as ENDPOINT/BUCKET")
}

func (c *mergeCmd) run(ctx context.Context, std *stdio, fs *flag.FlagSet) error {
	if fs.NArg() == 0 || c.out == "" {
		return usageErrorf("usage: pipe merge --out DIR|s3://BUCKET/PREFIX RUN_DIR...")
	}
	dirs, err := cmdline.ExpandGlobs(fs.Args())
	if err != nil {
		return usageErrorf("pipe merge: %v", err)
	}
	runs, err := shardruns.OpenAll(dirs)
	if err != nil {
		return usageErrorf("pipe merge: %v", err)
	}
	m, err := shardruns.Merge(runs)
	if err != nil {
		return fmt.Errorf("pipe merge: %w", err)
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(m); err != nil {
		return err
	}
	where, err := writeMerged(ctx, c.out, buf.Bytes(), s3up.Config{URI: c.out, Endpoint: c.endpoint, Region: c.region, PathStyle: c.pathStyle})
	if err != nil {
		return err
	}
	var rows int64
	for _, o := range m.Outputs {
		rows += o.Rows
		fmt.Fprintf(std.Err, "pipe merge: %s (%s): %d rows in %d files\n", o.Stage, o.Format, o.Rows, len(o.Files))
	}
	fmt.Fprintf(std.Err, "pipe merge: wrote %s: %d of %d shards\n", where, len(m.Runs), m.Shards)
	if !m.Complete {
		var what []string
		if len(m.Missing) > 0 {
			what = append(what, "missing: "+strings.Join(m.Missing, ", "))
		}
		if len(m.Unfinished) > 0 {
			what = append(what, "not done: "+strings.Join(m.Unfinished, ", "))
		}
		return &exitError{code: exitIncomplete, err: fmt.Errorf("pipe merge: incomplete (%s); run it again once every shard is done", strings.Join(what, "; "))}
	}
	return nil
}

// writeMerged writes merged.json (data) into out, a directory or, with
// s3 as its client's settings, an s3:// prefix; where names what it wrote.
func writeMerged(ctx context.Context, out string, data []byte, s3 s3up.Config) (where string, err error) {
	if !strings.HasPrefix(out, "s3://") {
		where = filepath.Join(out, shardruns.MergedName)
		if err := os.MkdirAll(out, 0o755); err != nil {
			return "", fmt.Errorf("pipe merge: %w", err)
		}
		if err := commitlog.WriteFileAtomic(where, data); err != nil {
			return "", fmt.Errorf("pipe merge: %w", err)
		}
		return where, nil
	}
	c, err := s3up.New(ctx, s3)
	if err != nil {
		return "", usageErrorf("pipe merge: %v", err)
	}
	defer c.Close()
	if _, err := c.PutBytes(ctx, c.Key(shardruns.MergedName), data, "application/json"); err != nil {
		return "", fmt.Errorf("pipe merge: %w", err)
	}
	return c.URL(c.Key(shardruns.MergedName)), nil
}

// exitIncomplete is pipe merge's exit code when shards are missing or not
// done: the manifest was written, and is worth writing again later.
const exitIncomplete = 3
