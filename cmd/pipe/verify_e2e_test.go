//go:build e2e

package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/pipe-dev/pipe/internal/testrig/readers"
	"github.com/pipe-dev/pipe/internal/testrig/testenv"
	"github.com/pipe-dev/pipe/pipeline/filecommit"
)

func newVerifyRig(t *testing.T, prompts int, endpoint, extra string) *verifyRig {
	r := &verifyRig{t: t, bin: testenv.PipeBinary(t), dir: t.TempDir(), srv: testenv.StartS3(t), prefix: "runs/v", prompts: prompts}
	if endpoint == "" {
		endpoint = r.srv.Endpoint
	}
	var p strings.Builder
	for i := range prompts {
		fmt.Fprintf(&p, `{"id":"p%d","prompt":"Question %d: what is %d + %d?"}`+"\n", i, i, i, i)
	}
	writeFile(t, filepath.Join(r.dir, "prompts.jsonl"), p.String())
	r.path = filepath.Join(r.dir, "v.toml")
	writeFile(t, r.path, fmt.Sprintf(`[pipeline]
name = "v"

[[stage]]
id   = "prompts"
kind = "read-prompts"
path = "prompts.jsonl"

[[stage]]
id    = "todo"
kind  = "dedupe-against-progress"
input = "prompts"

[[stage]]
id                = "gen"
kind              = "generate"
input             = "todo"
servers           = ["sim:1?speed=300"]
concurrency       = 4
max_output_tokens = 128

[[stage]]
id       = "train"
kind     = "write-arrow"
input    = "gen"
path     = "out/train"
max_rows = 20

[[stage]]
id               = "up"
kind             = "upload-s3"
input            = "train.shards"
uri              = "s3://%s/%s"
endpoint         = "%s"
force_path_style = true
region           = "us-east-1"
max_attempts     = 2
%s
`, r.srv.Bucket, r.prefix, endpoint, extra))
	return r
}

// waitDump waits for the run; one that does not end within limit is sent
// SIGQUIT (its goroutines go to its output) and the test fails with it.
func waitDump(t *testing.T, cmd *exec.Cmd, out *syncBuffer, limit time.Duration) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		return err
	case <-time.After(limit):
		cmd.Process.Signal(syscall.SIGQUIT)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-done
		}
		t.Fatalf("the run did not end within %s:\n%s", limit, out)
		return nil
	}
}

func waitRun(t *testing.T, cmd *exec.Cmd, out *syncBuffer, limit time.Duration, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !ok() {
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatalf("waited %s for %s:\n%s", limit, what, out)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// The bucket emptied while the run goes on (objects lost server-side):
// the run ends with every shard in the bucket — the end checks the bucket,
// not its own record, and uploads again from the local shards — and exit
// 0; pipe verify s3://… then agrees with an independent listing.
func TestBucketEmptiedMidRunEndsComplete(t *testing.T) {
	r := newVerifyRig(t, 200, "", "")
	cmd, out := r.start()
	waitRun(t, cmd, out, 60*time.Second, "3 shards in the bucket", func() bool { return len(r.listing()) >= 3 })
	n := r.emptyBucket()
	err := cmd.Wait()
	if code := exitCode(cmd); code != 0 {
		t.Fatalf("run: %v (exit %d)\n%s", err, code, out)
	}
	t.Logf("emptied %d objects mid-run", n)
	if !strings.Contains(out.String(), "was not in the bucket though this run had uploaded and verified it") {
		t.Errorf("the run does not say it uploaded lost shards again:\n%s", out)
	}
	if !strings.Contains(out.String(), "verified against the manifests:") || strings.Contains(out.String(), "NOT OK") {
		t.Errorf("no verification at the end:\n%s", out)
	}
	r.checkBucket()
	r.everyIDOnce()
	vout, code := r.pipe("verify", "--endpoint", r.srv.Endpoint, "--force-path-style", "s3://"+r.srv.Bucket+"/"+r.prefix+"/train")
	m := r.manifest()
	if code != 0 || !strings.Contains(vout, fmt.Sprintf("ok: s3://%s/%s/train: %d shards", r.srv.Bucket, r.prefix, len(m.Shards))) {
		t.Fatalf("pipe verify s3://… exit %d:\n%s", code, vout)
	}
	// Lose one object again, then verify sees exactly that one missing
	// (as the listing does), and verify --repair of the run mends it.
	c := r.srv.Client(t)
	lost := m.Shards[1].Name
	if _, err := c.DeleteObject(context.Background(), &s3.DeleteObjectInput{Bucket: aws.String(r.srv.Bucket), Key: aws.String(r.prefix + "/train/" + lost)}); err != nil {
		t.Fatal(err)
	}
	if _, ok := r.listing()[lost]; ok {
		t.Fatal("deleted object still listed")
	}
	vout, code = r.pipe("verify", "--endpoint", r.srv.Endpoint, "--force-path-style", "s3://"+r.srv.Bucket+"/"+r.prefix+"/train")
	if code != 1 || !strings.Contains(vout, lost+" is not in the bucket") || strings.Count(vout, "is not in the bucket") != 1 {
		t.Fatalf("pipe verify with %s deleted: exit %d\n%s", lost, code, vout)
	}
	vout, code = r.pipe("verify", "--repair", filepath.Join(r.dir, "runs", "v"))
	if code != 0 || !strings.Contains(vout, "repaired: ") {
		t.Fatalf("pipe verify --repair RUN_DIR: exit %d\n%s", code, vout)
	}
	r.checkBucket()
	t.Logf("run:\n%s\nverify --repair:\n%s", out, vout)
}

// A committed shard truncated while the run was stopped: the resume finds
// it by its size, moves it aside, and its rows are written again from the
// journal (no generation, no server up); every id is in the outputs
// exactly once, as DuckDB reads them, and in the bucket.
func TestTruncatedShardRewrittenOnResume(t *testing.T) {
	r := newVerifyRig(t, 120, "", "")
	// A finished run deletes its journal segments unless told to keep
	// them; kept, the damaged shard's rows come from it, with no server.
	cmd, out := r.start("--set", "pipeline.keep_journal=true")
	if err := cmd.Wait(); err != nil {
		t.Fatalf("run 1: %v\n%s", err, out)
	}
	m := r.manifest()
	victim := m.Shards[2]
	if err := os.Truncate(filepath.Join(r.dir, "out", "train", victim.Name), victim.Bytes/2); err != nil {
		t.Fatal(err)
	}
	vout, code := r.pipe("verify", filepath.Join(r.dir, "out", "train"))
	if code != 1 || !strings.Contains(vout, victim.Name+" has ") {
		t.Fatalf("pipe verify of the damaged directory: exit %d\n%s", code, vout)
	}
	// Run 2 has no generation server (nothing listens there; a wait for
	// one would fail in 5 s): nothing is left to generate, so none is
	// needed, also to upload again what the bucket lost meanwhile.
	lost := r.emptyBucket()
	cmd, out2 := r.start("--set", `gen.servers=["http://127.0.0.1:9"]`, "--set", `gen.ready_timeout="5s"`)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("run 2: %v\n%s", err, out2)
	}
	t.Logf("bucket emptied before run 2: %d objects", lost)
	if !strings.Contains(out2.String(), "damaged committed shards (["+victim.Name+"]") {
		t.Errorf("run 2 does not name the damaged shard:\n%s", out2)
	}
	if !strings.Contains(out2.String(), fmt.Sprintf("gen: %d records taken from its journal", victim.Rows)) {
		t.Errorf("run 2 did not take the %d rows from the journal:\n%s", victim.Rows, out2)
	}
	r.everyIDOnce()
	r.checkBucket()
	if got := r.manifest().Rows; got != int64(r.prompts) {
		t.Errorf("manifest rows %d, want %d", got, r.prompts)
	}
	vout, code = r.pipe("verify", filepath.Join(r.dir, "runs", "v"))
	if code != 0 {
		t.Fatalf("pipe verify RUN_DIR after the resume: exit %d\n%s", code, vout)
	}
	t.Logf("run 2:\n%s\nverify:\n%s", out2, vout)
}

func startProxy(t *testing.T, target string) *proxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{ln: ln, addr: ln.Addr().String(), target: target, conns: map[net.Conn]bool{}}
	t.Cleanup(func() { ln.Close(); p.cut() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			p.mu.Lock()
			down := p.down
			if !down {
				p.conns[c] = true
			}
			p.mu.Unlock()
			if down {
				c.Close()
				continue
			}
			go p.serve(c)
		}
	}()
	return p
}

// S3 away for a while mid-run (a proxy in front of it cut, then
// restored): uploads wait, saying so, generation goes on into the backlog,
// and the run finishes with exit 0, nothing abandoned, every shard in the
// bucket. (The 60 s outage, shortened: PIPE_OUTAGE=60s runs it.)
func TestS3OutageWaitedOut(t *testing.T) {
	outage := 8 * time.Second
	if d, err := time.ParseDuration(os.Getenv("PIPE_OUTAGE")); err == nil {
		outage = d
	}
	srv := testenv.StartS3(t)
	p := startProxy(t, strings.TrimPrefix(srv.Endpoint, "http://"))
	r := newVerifyRig(t, 240, "http://"+p.addr, `upload_timeout = "5m"`)
	r.srv = srv
	// newVerifyRig started its own server: point the file at this one.
	data, _ := os.ReadFile(r.path)
	writeFile(t, r.path, strings.Replace(string(data), "s3://pipe-test/", "s3://"+srv.Bucket+"/", 1))
	cmd, out := r.start("--progress-every", "1s")
	waitRun(t, cmd, out, 60*time.Second, "2 shards in the bucket", func() bool { return len(r.listing()) >= 2 })
	p.cut()
	cut := time.Now()
	time.Sleep(outage)
	during := r.manifest()
	p.restore()
	err := waitDump(t, cmd, out, 4*time.Minute+outage)
	if code := exitCode(cmd); code != 0 {
		t.Fatalf("run: %v (exit %d) after an outage of %s\n%s", err, code, outage, out)
	}
	s := out.String()
	if !strings.Contains(s, "uploads waiting: ") || !strings.Contains(s, "uploads going again after ") || !strings.Contains(s, "WAITING: 2 uploads, S3 failing for ") && !strings.Contains(s, "WAITING: 1 uploads, S3 failing for ") {
		t.Errorf("the run and its progress lines do not say uploads waited:\n%s", s)
	}
	if strings.Contains(s, "abandoned") {
		t.Errorf("records abandoned:\n%s", s)
	}
	t.Logf("outage %s from %s; %d shards committed during it", outage, cut.Format(time.TimeOnly), len(during.Shards))
	r.checkBucket()
	r.everyIDOnce()
	t.Logf("run:\n%s", s)
}

// A shard changed in place (same size) is found by its SHA-256: pipe
// verify says so, and a resume with --verify-shards writes its rows again.
// Rows whose data is gone everywhere — shard truncated, journal deleted,
// their prompts gone from the input — are named (by id hash) and the run
// exits 2, never a silent drop.
func TestChangedShardAndLostRows(t *testing.T) {
	r := newVerifyRig(t, 100, "", "")
	cmd, out := r.start()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("run 1: %v\n%s", err, out)
	}
	dir := filepath.Join(r.dir, "out", "train")
	m := r.manifest()
	flip := filepath.Join(dir, m.Shards[0].Name)
	data, _ := os.ReadFile(flip)
	data[len(data)/2] ^= 0xff
	writeFile(t, flip, string(data))
	if vout, code := r.pipe("verify", "--size-only", dir); code != 0 {
		t.Fatalf("verify --size-only sees a same-size change: exit %d\n%s", code, vout)
	}
	if vout, code := r.pipe("verify", dir); code != 1 || !strings.Contains(vout, m.Shards[0].Name+" has SHA-256") {
		t.Fatalf("verify of a changed shard: exit %d\n%s", code, vout)
	}
	cmd, out2 := r.start("--verify-shards")
	if err := cmd.Wait(); err != nil || !strings.Contains(out2.String(), "checked by sizes and SHA-256") {
		t.Fatalf("run 2 --verify-shards: %v\n%s", err, out2)
	}
	r.everyIDOnce()
	r.checkBucket()

	// Now lose shard 1's rows everywhere.
	m = r.manifest()
	victim := m.Shards[1]
	_, rows := readers.Parquet(t, filepath.Join(dir, victim.Name))
	gone := map[string]bool{}
	for _, row := range rows {
		gone[readers.String(t, row["id"])] = true
	}
	os.Truncate(filepath.Join(dir, victim.Name), 100)
	if err := os.RemoveAll(filepath.Join(r.dir, "runs", "v", "journal")); err != nil {
		t.Fatal(err)
	}
	var p strings.Builder
	for i := range r.prompts {
		if id := fmt.Sprintf("p%d", i); !gone[id] {
			fmt.Fprintf(&p, `{"id":"%s","prompt":"Question %d: what is %d + %d?"}`+"\n", id, i, i, i)
		}
	}
	writeFile(t, filepath.Join(r.dir, "prompts.jsonl"), p.String())
	cmd, out3 := r.start()
	cmd.Wait()
	if code := exitCode(cmd); code != 2 || !strings.Contains(out3.String(), fmt.Sprintf("%d rows of damaged shards were not written again", len(gone))) {
		t.Fatalf("run 3 with %d rows lost: exit %d\n%s", len(gone), code, out3)
	}
	if strings.Count(out3.String(), "id hash ") != len(gone) {
		t.Errorf("run 3 does not name the %d lost ids:\n%s", len(gone), out3)
	}
	if vout, code := r.pipe("verify", filepath.Join(r.dir, "runs", "v")); code != 2 {
		t.Fatalf("verify RUN_DIR with rows lost: exit %d\n%s", code, vout)
	}
	// The bucket's copy of the truncated shard may be their last one: kept.
	if _, ok := r.listing()[victim.Name]; !ok || !strings.Contains(out3.String(), victim.Name+" is not named by "+filecommit.ManifestName+", and is kept") {
		t.Errorf("the bucket's copy of %s was removed while its rows are lost:\n%s", victim.Name, out3)
	}
	t.Logf("run 3:\n%s", out3)
}

// After a crash (kill -9: no clean end recorded) the resume checks the
// SHA-256 of the shards it builds on without being asked: a shard changed
// in place at its size is found and its rows are written again.
func TestHashCheckAfterCrash(t *testing.T) {
	r := newVerifyRig(t, 400, "", "")
	cmd, out := r.start()
	dir := filepath.Join(r.dir, "out", "train")
	waitRun(t, cmd, out, 60*time.Second, "3 committed shards", func() bool {
		m, _ := filecommit.ReadManifest(dir)
		return m != nil && len(m.Shards) >= 3
	})
	cmd.Process.Kill()
	cmd.Wait()
	m := r.manifest()
	flip := filepath.Join(dir, m.Shards[1].Name)
	data, _ := os.ReadFile(flip)
	data[len(data)/3] ^= 0x55
	writeFile(t, flip, string(data))
	cmd, out2 := r.start()
	if err := waitDump(t, cmd, out2, 3*time.Minute); err != nil {
		t.Fatalf("resume after the crash: %v\n%s", err, out2)
	}
	s := out2.String()
	if !strings.Contains(s, "did not finish cleanly") || !strings.Contains(s, "damaged committed shards (["+m.Shards[1].Name+"], checked by sizes and SHA-256)") {
		t.Fatalf("the resume after a crash did not find the changed shard by its SHA-256:\n%s", s)
	}
	r.everyIDOnce()
	r.checkBucket()
}

// A shard file removed by its upload (delete_local_after_upload, noted as
// moved) is no damage: the resume leaves it, verify counts the bucket's
// copy. One removed by hand (no note) is: its rows are written again.
func TestRemovedShardFiles(t *testing.T) {
	r := newVerifyRig(t, 60, "", "delete_local_after_upload = true")
	cmd, out := r.start()
	if err := waitDump(t, cmd, out, 3*time.Minute); err != nil {
		t.Fatalf("run 1: %v\n%s", err, out)
	}
	m := r.manifest()
	if _, err := os.Stat(filepath.Join(r.dir, "out", "train", m.Shards[0].Name)); err == nil {
		t.Fatal("delete_local_after_upload left the shard")
	}
	cmd, out2 := r.start()
	if err := waitDump(t, cmd, out2, 3*time.Minute); err != nil || strings.Contains(out2.String(), "damaged") {
		t.Fatalf("resume after the uploads removed the shards: %v\n%s", err, out2)
	}
	if vout, code := r.pipe("verify", filepath.Join(r.dir, "runs", "v")); code != 0 {
		t.Fatalf("verify RUN_DIR with the shards only in the bucket: exit %d\n%s", code, vout)
	}
	if vout, code := r.pipe("verify", filepath.Join(r.dir, "out", "train")); code != 1 || !strings.Contains(vout, "no verified copy of it is known") {
		t.Fatalf("verify of the directory alone cannot see the bucket: exit %d\n%s", code, vout)
	}

	r2 := newVerifyRig(t, 60, "", "")
	cmd, out = r2.start()
	if err := waitDump(t, cmd, out, 3*time.Minute); err != nil {
		t.Fatalf("run 1: %v\n%s", err, out)
	}
	gone := r2.manifest().Shards[1]
	os.Remove(filepath.Join(r2.dir, "out", "train", gone.Name))
	cmd, out2 = r2.start()
	if err := waitDump(t, cmd, out2, 3*time.Minute); err != nil || !strings.Contains(out2.String(), "damaged committed shards (["+gone.Name+"]") {
		t.Fatalf("resume after a shard file was removed by hand: %v\n%s", err, out2)
	}
	r2.everyIDOnce()
	r2.checkBucket()
}

// A truncated manifest (a torn page) is read from its copy, with a warning,
// and the run goes on to exit 0; with its copy damaged too, the run and
// pipe verify exit 2 saying what to do.
func TestTruncatedManifestExits2(t *testing.T) {
	r := newVerifyRig(t, 40, "", "")
	cmd, out := r.start()
	if err := waitDump(t, cmd, out, 3*time.Minute); err != nil {
		t.Fatalf("run 1: %v\n%s", err, out)
	}
	path := filepath.Join(r.dir, "out", "train", filecommit.ManifestName)
	st, _ := os.Stat(path)
	os.Truncate(path, st.Size()/2)
	cmd, out2 := r.start()
	if err := waitDump(t, cmd, out2, 3*time.Minute); err != nil || !strings.Contains(out2.String(), path+" was damaged") || !strings.Contains(out2.String(), "read its copy") {
		t.Fatalf("run with a truncated manifest and its copy: %v\n%s", err, out2)
	}
	st, _ = os.Stat(path)
	os.Truncate(path, st.Size()/2)
	copyPath := filepath.Join(r.dir, "out", "train", filecommit.ManifestCopyName)
	os.Truncate(copyPath, 10)
	cmd, out3 := r.start()
	waitDump(t, cmd, out3, 3*time.Minute)
	if code := exitCode(cmd); code != 2 || !strings.Contains(out3.String(), path+" is damaged") || !strings.Contains(out3.String(), "--fresh") {
		t.Fatalf("run with a truncated manifest and copy: exit %d\n%s", code, out3)
	}
	if vout, code := r.pipe("verify", filepath.Join(r.dir, "out", "train")); code != 2 || !strings.Contains(vout, "is damaged") {
		t.Fatalf("verify of a truncated manifest: exit %d\n%s", code, vout)
	}
}
