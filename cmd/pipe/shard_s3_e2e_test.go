//go:build e2e

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/pipe-dev/pipe/internal/testrig/testenv"
	"github.com/pipe-dev/pipe/pipeline/shardruns"
)

// Two shards of a run that writes Parquet shards and uploads them to a
// real S3 server (versitygw): each shard uploads under its own prefix
// (uri/shard-000I-of-0002/train/…), and pipe merge --out s3://… puts one
// merged.json there naming every uploaded file, each present at its size.
func TestShardsUploadAndMergeToS3(t *testing.T) {
	if testing.Short() {
		t.Skip("runs pipe against a real S3 server; skipped with -short")
	}
	srv := testenv.StartS3(t)
	bin := testenv.PipeBinary(t)
	dir := t.TempDir()
	const n = 60
	var prompts strings.Builder
	for i := range n {
		fmt.Fprintf(&prompts, `{"id":"p%d","prompt":"Question %d"}`+"\n", i, i)
	}
	writeFile(t, filepath.Join(dir, "prompts.jsonl"), prompts.String())
	writeFile(t, filepath.Join(dir, "up.toml"), fmt.Sprintf(`[pipeline]
name = "up"

[[stage]]
id   = "prompts"
kind = "read-prompts"
path = "prompts.jsonl"

[[stage]]
id                = "gen"
kind              = "generate"
input             = "prompts"
servers           = ["sim:1?speed=1000"]
api               = "chat"
max_output_tokens = 256

[[stage]]
id       = "train"
kind     = "write-arrow"
input    = "gen"
path     = "out/train"
max_rows = 10

[[stage]]
id               = "up"
kind             = "upload-s3"
input            = "train.shards"
uri              = "s3://%s/runs/e2e"
endpoint         = "%s"
force_path_style = true
region           = "us-east-1"
`, srv.Bucket, srv.Endpoint))
	pipe := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(bin, args...)
		cmd.Dir = dir
		cmd.Env = append(append(os.Environ(), srv.Env()...), "AWS_PROFILE=")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("pipe %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	pipe("run", "--shard", "0/2", "up.toml")
	pipe("run", "--shard", "1/2", "up.toml")
	out := pipe("merge", "--out", "s3://"+srv.Bucket+"/merged", "--endpoint", srv.Endpoint, "--force-path-style", "--region", "us-east-1", "runs/up/shard-*")
	if !strings.Contains(out, "pipe merge: wrote s3://"+srv.Bucket+"/merged/merged.json: 2 of 2 shards") {
		t.Errorf("pipe merge:\n%s", out)
	}

	c := srv.Client(t)
	ctx := context.Background()
	obj, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(srv.Bucket), Key: aws.String("merged/" + shardruns.MergedName)})
	if err != nil {
		t.Fatal(err)
	}
	data, err := io.ReadAll(obj.Body)
	obj.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	var m shardruns.Merged
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	if !m.Complete || len(m.Outputs) != 1 || m.Outputs[0].Stage != "train" || m.Outputs[0].Rows != n {
		t.Fatalf("merged.json: %s", data)
	}
	for _, f := range m.Outputs[0].Files {
		prefix := fmt.Sprintf("s3://%s/runs/e2e/shard-%04d-of-0002/train/", srv.Bucket, f.Shard)
		if !strings.HasPrefix(f.URL, prefix) || !strings.HasSuffix(f.URL, filepath.Base(f.Path)) {
			t.Errorf("file %s: url %s, want %s%s", f.Path, f.URL, prefix, filepath.Base(f.Path))
			continue
		}
		key := strings.TrimPrefix(f.URL, "s3://"+srv.Bucket+"/")
		head, err := c.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(srv.Bucket), Key: aws.String(key)})
		if err != nil {
			t.Errorf("%s: %v", f.URL, err)
			continue
		}
		if aws.ToInt64(head.ContentLength) != f.Bytes {
			t.Errorf("%s: %d bytes in S3, merged.json says %d", f.URL, aws.ToInt64(head.ContentLength), f.Bytes)
		}
	}
}
