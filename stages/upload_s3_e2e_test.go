//go:build e2e

package stages

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/pipe-dev/pipe/internal/testrig/testenv"
	"github.com/pipe-dev/pipe/pipeline"
	"github.com/pipe-dev/pipe/pipeline/figure"
	"github.com/pipe-dev/pipe/pipeline/filecommit"
	"github.com/pipe-dev/pipe/pipeline/output"
	"github.com/pipe-dev/pipe/pipeline/record"
	"github.com/pipe-dev/pipe/stages/s3up"
)

func newShardDir(t *testing.T, parent, name string) *shardDir {
	d := &shardDir{t: t, dir: filepath.Join(parent, name), m: filecommit.Manifest{Format: "parquet", Shards: []filecommit.ShardInfo{}}}
	if err := os.MkdirAll(d.dir, 0o755); err != nil {
		t.Fatal(err)
	}
	d.writeManifest()
	return d
}

func s3Config(srv *testenv.S3, prefix string) uploadS3Config {
	return uploadS3Config{URI: "s3://" + srv.Bucket + "/" + prefix, Endpoint: srv.Endpoint, Region: srv.Region, ForcePathStyle: true,
		PartSize: 64 * mib, PartConcurrency: 4, ShardConcurrency: 2, MaxAttempts: 5}
}

func openS3Stage(t *testing.T, cfg uploadS3Config, runDir string) (*s3Stage, error) {
	t.Helper()
	st := &s3Stage{uploadS3: &uploadS3{cfg: cfg}, log: &syncBuffer{}, runDir: runDir, em: &s3Emitter{}}
	if errs := cfg.Validate(); len(errs) > 0 {
		t.Fatal(errs)
	}
	err := st.Open(context.Background(), &pipeline.Env{StageID: "up", RunDir: runDir, Log: st.log})
	if err == nil {
		t.Cleanup(func() { st.Close() })
	}
	return st, err
}

func mustOpenS3Stage(t *testing.T, cfg uploadS3Config, runDir string) *s3Stage {
	t.Helper()
	st, err := openS3Stage(t, cfg, runDir)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// getObject returns the object's bytes, or nil if there is none.
func getObject(t *testing.T, c *s3.Client, bucket, key string) []byte {
	t.Helper()
	out, err := c.GetObject(context.Background(), &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)})
	var nk *types.NoSuchKey
	if errors.As(err, &nk) {
		return nil
	}
	if err != nil {
		t.Fatalf("GetObject %s: %v", key, err)
	}
	defer out.Body.Close()
	b, err := io.ReadAll(out.Body)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// uploadLog reads the run directory's upload log.
func uploadLog(t *testing.T, runDir string) []uploadLine {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(runDir, "uploads", "up.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	var lines []uploadLine
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var u uploadLine
		if err := json.Unmarshal([]byte(l), &u); err != nil {
			t.Fatalf("upload log line %q: %v", l, err)
		}
		lines = append(lines, u)
	}
	return lines
}

// A small shard goes in one PutObject, a large one in parts; both arrive
// byte for byte, with their SHA-256 as metadata and the server's checksum
// (whole-object, or composite over the parts) verified; the manifest goes
// last, and the upload log lists what was uploaded.
func TestUploadS3SinglePartAndMultipart(t *testing.T) {
	srv := testenv.StartS3(t)
	srv.SetEnv(t)
	d := newShardDir(t, t.TempDir(), "train")
	small := d.add(1*mib + 3)
	large := d.add(12*mib + 7) // 3 parts of 5 MiB
	cfg := s3Config(srv, "runs/r1")
	cfg.PartSize = s3up.MinPartSize // versitygw, like S3, refuses smaller parts but the last
	runDir := t.TempDir()
	st := mustOpenS3Stage(t, cfg, runDir)
	st.process(t, small, large)
	st.finish(t)
	if len(st.em.skipped) > 0 || len(st.em.failed) > 0 {
		t.Fatalf("skipped %v, failed %v", st.em.skipped, st.em.failed)
	}

	c := srv.Client(t)
	for _, r := range []*record.Record{small, large} {
		local, err := os.ReadFile(r.Shard.Path)
		if err != nil {
			t.Fatal(err)
		}
		key := "runs/r1/train/" + r.Shard.Name
		got := getObject(t, c, srv.Bucket, key)
		if got == nil || sha256Hex(got) != r.Shard.SHA256 || !bytes.Equal(got, local) {
			t.Fatalf("%s: %d bytes in the bucket, sha256 %s; want %d bytes, %s", key, len(got), sha256Hex(got), len(local), r.Shard.SHA256)
		}
		h, err := c.HeadObject(context.Background(), &s3.HeadObjectInput{Bucket: aws.String(srv.Bucket), Key: aws.String(key), ChecksumMode: types.ChecksumModeEnabled})
		if err != nil {
			t.Fatal(err)
		}
		if h.Metadata[s3up.MetaSHA256] != r.Shard.SHA256 {
			t.Errorf("%s: metadata %v", key, h.Metadata)
		}
		wantType, suffix := types.ChecksumTypeFullObject, ""
		if r == large {
			wantType, suffix = types.ChecksumTypeComposite, "-3"
		}
		if h.ChecksumType != wantType || aws.ToString(h.ChecksumSHA256) == "" || !strings.HasSuffix(aws.ToString(h.ChecksumSHA256), suffix) {
			t.Errorf("%s: checksum %s %q, want %s …%s", key, h.ChecksumType, aws.ToString(h.ChecksumSHA256), wantType, suffix)
		}
	}
	if n := srv.Requests(t, "UploadPart"); n != 3 {
		t.Errorf("%d UploadPart requests, want 3", n)
	}
	if n := srv.Requests(t, "CreateMultipartUpload"); n != 1 {
		t.Errorf("%d CreateMultipartUpload requests, want 1", n)
	}

	// The manifest: the local bytes, uploaded after every shard.
	manifest, _ := os.ReadFile(filepath.Join(d.dir, filecommit.ManifestName))
	if got := getObject(t, c, srv.Bucket, "runs/r1/train/.pipe/manifest.json"); !bytes.Equal(got, manifest) {
		t.Fatalf("manifest in the bucket: %q, want %q", got, manifest)
	}
	if ops := writeOrder(t, srv); ops[len(ops)-1] != "runs/r1/train/.pipe/manifest.json" {
		t.Errorf("objects written in the order %v: the manifest is not last", ops)
	}

	lines := uploadLog(t, runDir)
	if len(lines) != 2 {
		t.Fatalf("upload log: %+v", lines)
	}
	byID := map[string]uploadLine{}
	for _, l := range lines {
		byID[l.ID] = l
	}
	for _, r := range []*record.Record{small, large} {
		l := byID[r.ID]
		if l.Key != "runs/r1/train/"+r.Shard.Name || l.Bytes != r.Shard.Bytes || l.SHA256 != r.Shard.SHA256 || l.Verified != "size, sha256" {
			t.Errorf("upload log for %s: %+v", r.Shard.Name, l)
		}
	}
	if l := byID[large.ID]; l.Parts != 3 {
		t.Errorf("large shard logged with %d parts", l.Parts)
	}
	rep := reportText(st.Report())
	if !strings.Contains(rep, "uploaded_shards: 2\n") || !strings.Contains(rep, "uploaded_bytes: 13.0 MiB\n") || !strings.Contains(rep, "upload_bytes_per_second_while_busy: ") || !strings.Contains(rep, "already_uploaded_shards: 0\n") {
		t.Errorf("report: %s", rep)
	}
	t.Logf("report: %s", rep)
}

// writeOrder lists the keys of the objects written (PutObject, or the
// CompleteMultipartUpload that creates them), in the access log's order.
func writeOrder(t *testing.T, srv *testenv.S3) []string {
	t.Helper()
	b, err := os.ReadFile(srv.AccessLog)
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) > 10 && (f[7] == "s3_PutObject" || f[7] == "s3_CompleteMultipartUpload") && f[10] == "200" {
			keys = append(keys, f[8])
		}
	}
	return keys
}

func reportText(figs []figure.Figure) string {
	var b strings.Builder
	for _, s := range figs {
		fmt.Fprintf(&b, "%s: %s\n", s.Name, s.FormatValue())
	}
	return b.String()
}

// A shard already in the bucket (same size, same sha256) is skipped
// without a write: the object on the server's disk is not touched.
func TestUploadS3IdempotentReupload(t *testing.T) {
	srv := testenv.StartS3(t)
	srv.SetEnv(t)
	d := newShardDir(t, t.TempDir(), "train")
	a := d.add(256 << 10)
	runDir := t.TempDir()
	cfg := s3Config(srv, "p")
	st := mustOpenS3Stage(t, cfg, runDir)
	st.process(t, a)
	st.finish(t)
	st.Close()
	onDisk := srv.ObjectPath(srv.Bucket, "p/train/"+a.Shard.Name)
	fi1, err := os.Stat(onDisk)
	if err != nil {
		t.Fatal(err)
	}
	before := writes(t, srv)

	time.Sleep(20 * time.Millisecond) // a rewrite would change the mtime
	st2 := mustOpenS3Stage(t, cfg, runDir)
	st2.process(t, a)
	if want := []string{a.ID + ":already_uploaded"}; !slices.Equal(st2.em.skipped, want) {
		t.Fatalf("skipped %v, want %v", st2.em.skipped, want)
	}
	if after := writes(t, srv); after != before {
		t.Errorf("writes went from %d to %d for a shard already uploaded", before, after)
	}
	fi2, err := os.Stat(onDisk)
	if err != nil {
		t.Fatal(err)
	}
	if !fi2.ModTime().Equal(fi1.ModTime()) {
		t.Errorf("the object's file was rewritten: mtime %v, then %v", fi1.ModTime(), fi2.ModTime())
	}
	if lines := uploadLog(t, runDir); len(lines) != 1 {
		t.Errorf("the upload log has %d lines for one shard: %+v", len(lines), lines)
	}

	// A different object under the key (another size or sha256) is not
	// taken for the shard: it is replaced.
	if _, err := srv.Client(t).PutObject(context.Background(), &s3.PutObjectInput{Bucket: aws.String(srv.Bucket),
		Key: aws.String("p/train/" + a.Shard.Name), Body: strings.NewReader("something else")}); err != nil {
		t.Fatal(err)
	}
	st3 := mustOpenS3Stage(t, cfg, runDir)
	st3.process(t, a)
	if len(st3.em.skipped) != 0 {
		t.Fatalf("a different object was taken for the shard: %v", st3.em.skipped)
	}
	local, _ := os.ReadFile(a.Shard.Path)
	if got := getObject(t, srv.Client(t), srv.Bucket, "p/train/"+a.Shard.Name); !bytes.Equal(got, local) {
		t.Fatal("the shard was not uploaded over a different object")
	}
}

// A run killed after write-arrow committed shards but before they were all
// uploaded leaves B committed and not in the bucket. The end of a run
// checks every shard the manifest names in the bucket (not its own record
// of what it uploaded) and uploads B from the local copy, then the
// manifest. A shard neither in the bucket nor local fails Finish, named,
// and the manifest is held back.
func TestUploadS3ResumeAfterKillBeforeUpload(t *testing.T) {
	srv := testenv.StartS3(t)
	srv.SetEnv(t)
	d := newShardDir(t, t.TempDir(), "train")
	a := d.add(300 << 10)
	runDir := t.TempDir()
	cfg := s3Config(srv, "p")

	// First run: A committed and uploaded; B committed, then the process
	// died before upload-s3 got it (no Finish, no Close).
	st := mustOpenS3Stage(t, cfg, runDir)
	st.process(t, a)
	b := d.add(400 << 10)
	c := srv.Client(t)
	if got := getObject(t, c, srv.Bucket, "p/train/"+b.Shard.Name); got != nil {
		t.Fatal("B in the bucket before its upload")
	}

	// The resumed run is sent A only (say): B is found missing at the end
	// and uploaded from the local shard, then the manifest.
	st2 := mustOpenS3Stage(t, cfg, runDir)
	st2.process(t, d.rec(0))
	st2.finish(t)
	if want := []string{a.ID + ":already_uploaded"}; !slices.Equal(st2.em.skipped, want) {
		t.Fatalf("skipped %v, want %v", st2.em.skipped, want)
	}
	for _, r := range []*record.Record{a, b} {
		if got := getObject(t, c, srv.Bucket, "p/train/"+r.Shard.Name); sha256Hex(got) != r.Shard.SHA256 {
			t.Errorf("%s not in the bucket after the resume", r.Shard.Name)
		}
	}
	if log := st2.log.String(); !strings.Contains(log, "part-00001.parquet was not in the bucket: uploaded again from") {
		t.Errorf("run log: %q", log)
	}
	manifest, _ := os.ReadFile(filepath.Join(d.dir, filecommit.ManifestName))
	if got := getObject(t, c, srv.Bucket, "p/train/.pipe/manifest.json"); !bytes.Equal(got, manifest) {
		t.Fatalf("manifest after the resume: %q", got)
	}
	if rep := reportText(st2.Report()); !strings.Contains(rep, "uploaded_shards: 1\n") || !strings.Contains(rep, "already_uploaded_shards: 1\n") || !strings.Contains(rep, "shards_uploaded_again_at_the_end: 1\n") {
		t.Errorf("report: %s", rep)
	}
	if lines := uploadLog(t, runDir); len(lines) != 2 {
		t.Errorf("upload log: %+v", lines)
	}

	// B gone from the bucket and from the disk: Finish fails naming it,
	// and the manifest in the bucket stays the one before.
	if _, err := c.DeleteObject(context.Background(), &s3.DeleteObjectInput{Bucket: aws.String(srv.Bucket), Key: aws.String("p/train/" + b.Shard.Name)}); err != nil {
		t.Fatal(err)
	}
	os.Remove(b.Shard.Path)
	d.add(100 << 10) // C: a new manifest that would go up
	st3 := mustOpenS3Stage(t, cfg, runDir)
	st3.process(t, d.rec(2))
	err := st3.Finish(context.Background(), st3.em)
	if err == nil || !strings.Contains(err.Error(), "1 of its 3 shards (10 rows) are neither in the bucket nor in") || !strings.Contains(err.Error(), "part-00001.parquet (10 rows)") {
		t.Fatalf("Finish with B lost: %v", err)
	}
	if got := getObject(t, c, srv.Bucket, "p/train/"+filecommit.ManifestName); !bytes.Equal(got, manifest) {
		t.Fatalf("manifest replaced while B is missing: %q", got)
	}
	if rep := reportText(st3.Report()); !strings.Contains(rep, "manifest_held_back: ") {
		t.Errorf("report: %s", rep)
	}
}

// Two writers' directories under one prefix keep apart (PREFIX/DIRNAME/…),
// each with its manifest; a shard of a directory's manifest that was not
// sent in this run (uploaded by an earlier one) is found by HeadObject.
func TestUploadS3TwoDirectoriesOnePrefix(t *testing.T) {
	srv := testenv.StartS3(t)
	srv.SetEnv(t)
	parent := t.TempDir()
	d1, d2 := newShardDir(t, parent, "train"), newShardDir(t, parent, "eval")
	a1, a2 := d1.add(1000), d2.add(2000)
	cfg := s3Config(srv, "")
	cfg.URI = "s3://" + srv.Bucket
	st := mustOpenS3Stage(t, cfg, t.TempDir())
	st.process(t, a1, a2)
	st.finish(t)
	b1 := d1.add(3000)
	st2 := mustOpenS3Stage(t, cfg, t.TempDir())
	st2.process(t, b1) // a1 is not sent again
	st2.finish(t)
	c := srv.Client(t)
	for _, k := range []string{"train/part-00000.parquet", "train/part-00001.parquet", "eval/part-00000.parquet", "train/.pipe/manifest.json", "eval/.pipe/manifest.json"} {
		if getObject(t, c, srv.Bucket, k) == nil {
			t.Errorf("%s not in the bucket", k)
		}
	}
	manifest, _ := os.ReadFile(filepath.Join(d1.dir, filecommit.ManifestName))
	if got := getObject(t, c, srv.Bucket, "train/.pipe/manifest.json"); !bytes.Equal(got, manifest) {
		t.Errorf("train manifest in the bucket is not the local one")
	}
}

// delete_local_after_upload removes a shard file once its upload is
// verified, never before; a resume finds it in the bucket without it.
func TestUploadS3DeleteLocalAfterUpload(t *testing.T) {
	srv := testenv.StartS3(t)
	srv.SetEnv(t)
	d := newShardDir(t, t.TempDir(), "train")
	a := d.add(6*mib + 1)
	cfg := s3Config(srv, "p")
	cfg.PartSize = s3up.MinPartSize
	cfg.DeleteLocal = true
	runDir := t.TempDir()
	st := mustOpenS3Stage(t, cfg, runDir)
	local, _ := os.ReadFile(a.Shard.Path)
	st.process(t, a)
	st.finish(t)
	if _, err := os.Stat(a.Shard.Path); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the uploaded shard file is still there: %v", err)
	}
	if _, err := os.Stat(filepath.Join(d.dir, filecommit.ManifestName)); err != nil {
		t.Fatal("the manifest was removed")
	}
	if got := getObject(t, srv.Client(t), srv.Bucket, "p/train/"+a.Shard.Name); !bytes.Equal(got, local) {
		t.Fatal("the bucket does not hold the deleted shard")
	}
	if l := uploadLog(t, runDir); len(l) != 1 || !l[0].Deleted {
		t.Errorf("upload log: %+v", l)
	}
	st2 := mustOpenS3Stage(t, cfg, runDir)
	st2.process(t, d.rec(0))
	if len(st2.em.skipped) != 1 {
		t.Fatalf("a deleted, uploaded shard sent again: skipped %v", st2.em.skipped)
	}

	// A shard whose file is gone and which is not in the bucket is an
	// error naming both.
	gone := d.add(100)
	os.Remove(gone.Shard.Path)
	err := st2.Process(context.Background(), gone, st2.em)
	if err == nil || !strings.Contains(err.Error(), "its file is gone") || !strings.Contains(err.Error(), "is not in the bucket") {
		t.Fatalf("err = %v", err)
	}
}

// A shard file that changed after it was committed is refused, not
// uploaded: its SHA-256 is not the manifest's.
func TestUploadS3RefusesAChangedShard(t *testing.T) {
	srv := testenv.StartS3(t)
	srv.SetEnv(t)
	d := newShardDir(t, t.TempDir(), "train")
	a := d.add(4096)
	// Flip one byte (a fixed "X" was already there once in 256 random
	// shards, and the test failed).
	f, _ := os.OpenFile(a.Shard.Path, os.O_RDWR, 0)
	b := make([]byte, 1)
	f.ReadAt(b, 100)
	f.WriteAt([]byte{^b[0]}, 100)
	f.Close()
	st := mustOpenS3Stage(t, s3Config(srv, "p"), t.TempDir())
	err := st.Process(context.Background(), a, st.em)
	if err == nil || !strings.Contains(err.Error(), "changed since") {
		t.Fatalf("err = %v", err)
	}
	if getObject(t, srv.Client(t), srv.Bucket, "p/train/"+a.Shard.Name) != nil {
		t.Fatal("a changed shard was uploaded")
	}
}

// A bucket that does not exist, wrong credentials or none stop the stage
// at Open — before any work — and in a dry run, with a message that names
// the bucket and what to do, and never the secret.
func TestUploadS3OpenErrors(t *testing.T) {
	srv := testenv.StartS3(t)
	srv.SetEnv(t)
	cfg := s3Config(srv, "p")

	missing := cfg
	missing.URI = "s3://no-such-bucket/p"
	_, err := openS3Stage(t, missing, t.TempDir())
	want := "bucket no-such-bucket does not exist at " + srv.Endpoint
	if err == nil || err.Error() != want {
		t.Fatalf("missing bucket: err = %v, want %q", err, want)
	}
	if _, err := (&uploadS3{cfg: missing}).DryRun(context.Background(), &pipeline.Env{}); err == nil || err.Error() != want {
		t.Fatalf("missing bucket, dry run: err = %v", err)
	}

	wrongSecret := "wrong" + srv.SecretKey
	t.Setenv("AWS_SECRET_ACCESS_KEY", wrongSecret)
	_, err = openS3Stage(t, cfg, t.TempDir())
	want = "access denied to bucket " + srv.Bucket + " at " + srv.Endpoint + " (SignatureDoesNotMatch): check the AWS credentials (AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY or AWS_PROFILE)"
	if err == nil || err.Error() != want {
		t.Fatalf("wrong secret: err = %v, want %q", err, want)
	}
	// versitygw answers an unknown access key with 404, which a HEAD alone
	// cannot tell from a missing bucket.
	t.Setenv("AWS_ACCESS_KEY_ID", "AKNOSUCHKEY")
	_, err = openS3Stage(t, cfg, t.TempDir())
	if err == nil || !strings.HasPrefix(err.Error(), "access denied to bucket "+srv.Bucket) {
		t.Fatalf("unknown key: err = %v", err)
	}
	out, err := (&uploadS3{cfg: cfg}).DryRun(context.Background(), &pipeline.Env{})
	if err == nil || !strings.HasPrefix(err.Error(), "access denied to bucket "+srv.Bucket) {
		t.Fatalf("unknown key, dry run: %q, err = %v", out, err)
	}
	if strings.Contains(err.Error(), wrongSecret) || strings.Contains(out, wrongSecret) {
		t.Fatal("the secret is in the error")
	}

	t.Setenv("AWS_ACCESS_KEY_ID", "")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "")
	_, err = openS3Stage(t, cfg, t.TempDir())
	if err == nil || !strings.HasPrefix(err.Error(), "no AWS credentials for bucket "+srv.Bucket+": set AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY or AWS_PROFILE") {
		t.Fatalf("no credentials: err = %v", err)
	}
}

// The credentials, given in the environment, appear in nothing the stage
// writes: not the run directory, not the run log, not the report.
func TestUploadS3CredentialsNeverWritten(t *testing.T) {
	srv := testenv.StartS3(t)
	srv.SetEnv(t)
	d := newShardDir(t, t.TempDir(), "train")
	recs := []*record.Record{d.add(1000), d.add(6*mib + 5)}
	cfg := s3Config(srv, "p")
	cfg.PartSize = s3up.MinPartSize
	runDir := t.TempDir()
	st := mustOpenS3Stage(t, cfg, runDir)
	st.process(t, recs...)
	st.finish(t)
	st2 := mustOpenS3Stage(t, cfg, runDir)
	st2.process(t, recs...)
	dry, _ := (&uploadS3{cfg: cfg}).DryRun(context.Background(), &pipeline.Env{})
	missing := cfg
	missing.URI = "s3://no-such-bucket/p"
	_, oerr := openS3Stage(t, missing, runDir)

	texts := map[string]string{"run log": st.log.String() + st2.log.String(), "report": reportText(st.Report()) + reportText(st2.Report()),
		"dry run": dry, "error": fmt.Sprint(oerr)}
	assertNoSecrets(t, srv, texts, runDir)
}

// assertNoSecrets fails if the secret key (or the access key id) is in
// any of texts or any file under dirs.
func assertNoSecrets(t *testing.T, srv *testenv.S3, texts map[string]string, dirs ...string) {
	t.Helper()
	secrets := map[string]string{"secret key": srv.SecretKey, "access key id": srv.AccessKey}
	for what, text := range texts {
		for name, s := range secrets {
			if strings.Contains(text, s) {
				t.Errorf("the %s is in the %s", name, what)
			}
		}
	}
	files := 0
	for _, dir := range dirs {
		filepath.WalkDir(dir, func(path string, e os.DirEntry, err error) error {
			if err != nil || e.IsDir() {
				return err
			}
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			files++
			for name, s := range secrets {
				if bytes.Contains(b, []byte(s)) {
					t.Errorf("the %s is in %s", name, path)
				}
			}
			return nil
		})
	}
	if files == 0 {
		t.Fatal("no files to check")
	}
}

// The whole graph as a user runs it, `pipe run` as a process:
// read-prompts → generate (simulated servers) → write-arrow → upload-s3 of
// its shards port. Every shard and the manifest arrive with the right
// SHA-256; the secret is nowhere in the output or the run directory; a
// second run uploads nothing again.
func TestUploadS3PipeRunEndToEnd(t *testing.T) {
	srv := testenv.StartS3(t)
	bin := testenv.PipeBinary(t)
	dir := t.TempDir()
	var prompts strings.Builder
	for i := range 120 {
		fmt.Fprintf(&prompts, `{"id":"p%d","prompt":"Question %d: what is %d + %d?"}`+"\n", i, i, i, i)
	}
	if err := os.WriteFile(filepath.Join(dir, "prompts.jsonl"), []byte(prompts.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	toml := fmt.Sprintf(`[pipeline]
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
max_rows = 50

[[stage]]
id               = "up"
kind             = "upload-s3"
input            = "train.shards"
uri              = "s3://%s/runs/e2e"
endpoint         = "%s"
force_path_style = true
region           = "us-east-1"
`, srv.Bucket, srv.Endpoint)
	path := filepath.Join(dir, "up.toml")
	if err := os.WriteFile(path, []byte(toml), 0o644); err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(bin, append([]string{"run"}, args...)...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), srv.Env()...)
		cmd.Env = append(cmd.Env, "AWS_PROFILE=")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("pipe run %v: %v\n%s", args, err, out)
		}
		return string(out)
	}

	dry := run("--dry-run", path)
	if !strings.Contains(dry, "bucket "+srv.Bucket+" reachable") {
		t.Errorf("dry run:\n%s", dry)
	}
	// A missing bucket or a wrong secret: exit 2 (a refusal, not worth a
	// retry) before any generation,
	// in a dry run too, with the bucket named and the secret nowhere.
	fails := func(env []string, args ...string) string {
		t.Helper()
		cmd := exec.Command(bin, append([]string{"run"}, args...)...)
		cmd.Dir = dir
		cmd.Env = append(append(append(os.Environ(), srv.Env()...), "AWS_PROFILE="), env...)
		out, err := cmd.CombinedOutput()
		if cmd.ProcessState == nil || cmd.ProcessState.ExitCode() != 2 {
			t.Fatalf("pipe run %v: %v, want exit 2\n%s", args, err, out)
		}
		return string(out)
	}
	var failed string
	for _, args := range [][]string{{"--dry-run"}, {"--run-dir", "other"}} {
		out := fails(nil, append(args, "--set", `up.uri="s3://no-such-bucket/x"`, path)...)
		if !strings.Contains(out, "bucket no-such-bucket does not exist at "+srv.Endpoint) {
			t.Errorf("missing bucket, %v:\n%s", args, out)
		}
		wrong := "wrong-" + srv.SecretKey
		out2 := fails([]string{"AWS_SECRET_ACCESS_KEY=" + wrong}, append(args, path)...)
		if !strings.Contains(out2, "access denied to bucket "+srv.Bucket) || strings.Contains(out2, wrong) {
			t.Errorf("wrong secret, %v:\n%s", args, out2)
		}
		failed += out + out2
	}
	if m, _ := filecommit.ReadManifest(filepath.Join(dir, "out", "train")); m != nil && len(m.Shards) > 0 {
		t.Fatalf("a run that failed at the bucket check wrote shards: %+v", m)
	}
	if n := srv.Requests(t, "PutObject"); n != 0 {
		t.Fatalf("%d PutObject requests from runs that failed at the bucket check", n)
	}
	out := run(path)
	m, err := filecommit.ReadManifest(filepath.Join(dir, "out", "train"))
	if err != nil || m == nil {
		t.Fatalf("manifest: %v\n%s", err, out)
	}
	if len(m.Shards) != 3 || m.Rows != 120 {
		t.Fatalf("manifest: %d shards, %d rows; want 3 shards (max_rows 50), 120 rows\n%s", len(m.Shards), m.Rows, out)
	}
	c := srv.Client(t)
	for _, sh := range m.Shards {
		got := getObject(t, c, srv.Bucket, "runs/e2e/train/"+sh.Name)
		if got == nil || sha256Hex(got) != sh.SHA256 || int64(len(got)) != sh.Bytes {
			t.Errorf("%s: %d bytes, sha256 %s in the bucket; want %d, %s", sh.Name, len(got), sha256Hex(got), sh.Bytes, sh.SHA256)
		}
	}
	manifest, _ := os.ReadFile(filepath.Join(dir, "out", "train", filecommit.ManifestName))
	if got := getObject(t, c, srv.Bucket, "runs/e2e/train/.pipe/manifest.json"); !bytes.Equal(got, manifest) {
		t.Errorf("manifest in the bucket:\n%s\nwant\n%s", got, manifest)
	}
	if !strings.Contains(out, "uploaded shards 3, ") {
		t.Errorf("run output does not report the uploads:\n%s", out)
	}
	// pipe inspect reads the uploaded directory: the manifest there, each
	// shard checked (--verify: downloaded and hashed), the first rows.
	insp := exec.Command(bin, "inspect", "--verify", "--rows", "1", "--endpoint", srv.Endpoint, "--force-path-style",
		"s3://"+srv.Bucket+"/runs/e2e/train")
	insp.Env = append(append(os.Environ(), srv.Env()...), "AWS_PROFILE=")
	inspOut, err := insp.CombinedOutput()
	if err != nil || strings.Count(string(inspOut), " ok") != 3 || !strings.Contains(string(inspOut), "120") || !strings.Contains(string(inspOut), "part-00000.parquet") {
		t.Errorf("pipe inspect s3://…: %v\n%s", err, inspOut)
	}
	runDir := filepath.Join(dir, "runs", "up")
	if lines := uploadLog(t, runDir); len(lines) != 3 {
		t.Errorf("upload log: %+v", lines)
	}

	// Again: nothing new to generate; the committed shards are sent again
	// (if the writer commits) and found in the bucket: no new writes.
	before := writes(t, srv)
	out2 := run(path)
	if after := writes(t, srv); after != before {
		t.Errorf("the second run wrote %d objects or parts again:\n%s", after-before, out2)
	}
	assertNoSecrets(t, srv, map[string]string{"pipe run output": dry + failed + out + out2}, runDir, filepath.Join(dir, "other"), filepath.Join(dir, "out"))
	t.Logf("failing runs:\n%s\npipe run output:\n%s\nsecond run:\n%s", failed, out, out2)
}

// The server goes away mid-run: the upload of a committed shard fails
// past upload_timeout, the run stops as a stop request does and fails with
// exit 1, keeping what it committed. With the server back, the same command uploads the committed
// shards that were not uploaded — and only those — then the manifest.
func TestUploadS3PipeRunServerLostThenResume(t *testing.T) {
	srv := testenv.StartS3(t)
	bin := testenv.PipeBinary(t)
	dir := t.TempDir()
	var prompts strings.Builder
	for i := range 300 {
		fmt.Fprintf(&prompts, `{"id":"p%d","prompt":"Question %d: what is %d + %d?"}`+"\n", i, i, i, i)
	}
	if err := os.WriteFile(filepath.Join(dir, "prompts.jsonl"), []byte(prompts.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	toml := fmt.Sprintf(`[pipeline]
name = "up"

[[stage]]
id   = "prompts"
kind = "read-prompts"
path = "prompts.jsonl"

[[stage]]
id                = "gen"
kind              = "generate"
input             = "prompts"
servers           = ["sim:1?speed=200"]
concurrency       = 2
max_output_tokens = 256

[[stage]]
id       = "train"
kind     = "write-arrow"
input    = "gen"
path     = "out/train"
max_rows = 50

[[stage]]
id               = "up"
kind             = "upload-s3"
input            = "train.shards"
uri              = "s3://%s/runs/crash"
endpoint         = "%s"
force_path_style = true
max_attempts     = 2
upload_timeout   = "2s"
`, srv.Bucket, srv.Endpoint)
	path := filepath.Join(dir, "up.toml")
	if err := os.WriteFile(path, []byte(toml), 0o644); err != nil {
		t.Fatal(err)
	}
	start := func() (*exec.Cmd, *syncBuffer) {
		cmd := exec.Command(bin, "run", path, "--commit-every", "500ms")
		cmd.Dir = dir
		cmd.Env = append(append(os.Environ(), srv.Env()...), "AWS_PROFILE=")
		out := &syncBuffer{}
		cmd.Stdout, cmd.Stderr = out, out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		return cmd, out
	}
	c := srv.Client(t)
	inBucket := func() map[string]bool {
		got := map[string]bool{}
		out, err := c.ListObjectsV2(context.Background(), &s3.ListObjectsV2Input{Bucket: aws.String(srv.Bucket), Prefix: aws.String("runs/crash/train/")})
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range out.Contents {
			got[strings.TrimPrefix(aws.ToString(o.Key), "runs/crash/train/")] = true
		}
		return got
	}

	// Run 1: once a shard is in the bucket, the server dies.
	cmd, out1 := start()
	deadline := time.Now().Add(60 * time.Second)
	for len(inBucket()) == 0 {
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatalf("no shard uploaded within 60s:\n%s", out1)
		}
		time.Sleep(20 * time.Millisecond)
	}
	srv.Stop()
	if err := cmd.Wait(); cmd.ProcessState.ExitCode() != 1 {
		t.Fatalf("run 1 with the server gone: %v, want exit 1\n%s", err, out1)
	}
	if !strings.Contains(out1.String(), `stage "up" (upload-s3)`) || !strings.Contains(out1.String(), "(upload_timeout)") {
		t.Errorf("run 1 does not say the upload failed past upload_timeout:\n%s", out1)
	}
	// It stopped as a stop request does: requests in flight finished,
	// everything processed committed, none abandoned after generation.
	ab := regexp.MustCompile(`gen +generate .*\((\d+) abandoned\)`).FindStringSubmatch(out1.String())
	if ab != nil && !strings.Contains(out1.String(), "not started: "+ab[1]+" records") {
		t.Errorf("run 1 abandoned records at or after generation:\n%s", out1)
	}
	srv.Restart(t)
	before := inBucket()
	m, err := filecommit.ReadManifest(filepath.Join(dir, "out", "train"))
	if err != nil || m == nil {
		t.Fatal(err)
	}
	if before[filecommit.ManifestName] || len(before) >= len(m.Shards) {
		t.Fatalf("after run 1: %d objects in the bucket (%v) for %d committed shards: want fewer, no manifest\n%s", len(before), before, len(m.Shards), out1)
	}
	t.Logf("run 1: %d of %d committed shards uploaded when the server died", len(before), len(m.Shards))

	// Run 2, the same command: the rest, then the manifest.
	cmd, out2 := start()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("run 2: %v\n%s", err, out2)
	}
	m, err = filecommit.ReadManifest(filepath.Join(dir, "out", "train"))
	if err != nil || m.Rows != 300 {
		t.Fatalf("manifest after run 2: %+v, %v", m, err)
	}
	for _, sh := range m.Shards {
		got := getObject(t, c, srv.Bucket, "runs/crash/train/"+sh.Name)
		if sha256Hex(got) != sh.SHA256 {
			t.Errorf("%s: %d bytes, sha256 %s in the bucket; want %d, %s", sh.Name, len(got), sha256Hex(got), sh.Bytes, sh.SHA256)
		}
	}
	manifest, _ := os.ReadFile(filepath.Join(dir, "out", "train", filecommit.ManifestName))
	if got := getObject(t, c, srv.Bucket, "runs/crash/train/.pipe/manifest.json"); !bytes.Equal(got, manifest) {
		t.Errorf("manifest in the bucket is not the local one")
	}
	if want := fmt.Sprintf("already_uploaded %d", len(before)); !strings.Contains(out2.String(), want) {
		t.Errorf("run 2 does not skip the %d shards uploaded by run 1 (%q):\n%s", len(before), want, out2)
	}
	assertNoSecrets(t, srv, map[string]string{"pipe run output": out1.String() + out2.String()}, filepath.Join(dir, "runs"))
	t.Logf("run 1:\n%s\nrun 2:\n%s", out1, out2)
}

// Two shard directories of the same name would upload to the same keys:
// refused. A resume with another uri uploads there (uri is operational).
func TestUploadS3DirectoryClashAndNewURI(t *testing.T) {
	srv := testenv.StartS3(t)
	srv.SetEnv(t)
	d1 := newShardDir(t, filepath.Join(t.TempDir(), "x"), "train")
	d2 := newShardDir(t, filepath.Join(t.TempDir(), "y"), "train")
	a1, a2 := d1.add(100), d2.add(200)
	runDir := t.TempDir()
	st := mustOpenS3Stage(t, s3Config(srv, "p1"), runDir)
	st.process(t, a1)
	err := st.Process(context.Background(), a2, st.em)
	if err == nil || !strings.Contains(err.Error(), "would both upload to s3://"+srv.Bucket+"/p1/train/") {
		t.Fatalf("err = %v", err)
	}
	st.Close()

	st2 := mustOpenS3Stage(t, s3Config(srv, "p2"), runDir)
	st2.process(t, a1)
	st2.finish(t)
	if len(st2.em.skipped) != 0 || getObject(t, srv.Client(t), srv.Bucket, "p2/train/"+a1.Shard.Name) == nil {
		t.Fatalf("not uploaded to the new uri: skipped %v", st2.em.skipped)
	}
	lines := uploadLog(t, runDir)
	if len(lines) != 2 || lines[0].URL == lines[1].URL {
		t.Fatalf("upload log: %+v", lines)
	}
}

// A prefix an earlier version uploaded to holds a manifest.json beside the
// shards; once the manifest in .pipe/ is uploaded, the old one is removed,
// so the prefix holds nothing but shards outside .pipe/ (what HF datasets
// reads from s3:// as it does from a local directory).
func TestUploadS3RemovesLegacyManifest(t *testing.T) {
	srv := testenv.StartS3(t)
	srv.SetEnv(t)
	c := srv.Client(t)
	if _, err := c.PutObject(context.Background(), &s3.PutObjectInput{Bucket: aws.String(srv.Bucket),
		Key: aws.String("old/train/manifest.json"), Body: strings.NewReader(`{"format":"parquet","shards":[]}`)}); err != nil {
		t.Fatal(err)
	}
	d := newShardDir(t, t.TempDir(), "train")
	a := d.add(1000)
	st := mustOpenS3Stage(t, s3Config(srv, "old"), t.TempDir())
	st.process(t, a)
	st.finish(t)
	if got := getObject(t, c, srv.Bucket, "old/train/manifest.json"); got != nil {
		t.Fatalf("the old manifest.json is still there: %q", got)
	}
	if got := getObject(t, c, srv.Bucket, "old/train/"+filecommit.ManifestName); got == nil {
		t.Fatal("no manifest in .pipe/")
	}
	if log := st.log.String(); !strings.Contains(log, "old/train/manifest.json removed: the manifest is .pipe/manifest.json now") {
		t.Fatalf("log: %s", log)
	}
}

// upload-s3's Verify against the real server: a single-part object by the
// SHA-256 the server computed, a multipart one by the server's composite
// checksum against the local file (or a download without one). An object
// replaced by other bytes of the same size, even with the right
// pipe-sha256 metadata, is found by the server's checksum; --repair
// uploads it again from the local shard.
func TestUploadS3VerifyByServerChecksum(t *testing.T) {
	srv := testenv.StartS3(t)
	srv.SetEnv(t)
	d := newShardDir(t, t.TempDir(), "train")
	small := d.add(1*mib + 3)
	large := d.add(12*mib + 7)
	cfg := s3Config(srv, "v")
	cfg.PartSize = s3up.MinPartSize
	st := mustOpenS3Stage(t, cfg, t.TempDir())
	st.process(t, small, large)
	st.finish(t)

	verify := func(repair bool) *output.Verified {
		t.Helper()
		v, err := verifyUploads(context.Background(), &cfg, &output.VerifyEnv{StageID: "up", Hash: true, Repair: repair, Inputs: []*output.Verified{{Dir: d.dir}}})
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	if v := verify(false); !v.OK() || v.Items != 2 || !v.Covers[small.Shard.Path] || !v.Covers[large.Shard.Path] {
		t.Fatalf("intact: %+v", v)
	}
	c, err := s3up.New(context.Background(), s3up.Config{URI: cfg.URI, Endpoint: cfg.Endpoint, Region: cfg.Region, PathStyle: true, PartSize: cfg.PartSize})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for _, local := range []string{large.Shard.Path, ""} {
		got, err := c.CheckObject(context.Background(), "v/train/"+large.Shard.Name, large.Shard.Bytes, large.Shard.SHA256, local, true)
		if err != nil || !got.OK {
			t.Fatalf("multipart, local %q: %+v, %v", local, got, err)
		}
		t.Logf("multipart object, local %q: checked by %s", local, got.How)
		if local == "" && got.How != "size, sha256 (downloaded)" && got.How != "size, sha256 (server checksum)" {
			t.Errorf("multipart without a local copy: %s", got.How)
		}
	}
	got, _ := c.CheckObject(context.Background(), "v/train/"+small.Shard.Name, small.Shard.Bytes, small.Shard.SHA256, "", true)
	if got == nil || got.How != "size, sha256 (server checksum)" {
		t.Errorf("single-part object checked by %+v; want the server's checksum", got)
	}

	// Forge both: other bytes, same size, the right pipe-sha256.
	s3c := srv.Client(t)
	for _, r := range []*record.Record{small, large} {
		other := make([]byte, r.Shard.Bytes)
		if _, err := s3c.PutObject(context.Background(), &s3.PutObjectInput{Bucket: aws.String(srv.Bucket), Key: aws.String("v/train/" + r.Shard.Name),
			Body: bytes.NewReader(other), Metadata: map[string]string{s3up.MetaSHA256: r.Shard.SHA256}, ChecksumAlgorithm: "SHA256"}); err != nil {
			t.Fatal(err)
		}
	}
	if v := verify(false); v.OK() || len(v.Problems) != 2 || !strings.Contains(v.Problems[0], "computed by the server") {
		t.Fatalf("forged objects: %+v", v.Problems)
	}
	if v := verify(true); !v.OK() || len(v.Repaired) != 2 {
		t.Fatalf("repair: %+v", v)
	}
	if v := verify(false); !v.OK() {
		t.Fatalf("after the repair: %+v", v.Problems)
	}
}
