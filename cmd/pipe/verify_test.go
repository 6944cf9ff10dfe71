package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/pipe-dev/pipe/internal/testrig/readers"
	"github.com/pipe-dev/pipe/internal/testrig/testenv"
	"github.com/pipe-dev/pipe/pipeline/filecommit"
)

// verifyRig is prompts → generate (an in-process simulator) → write-arrow
// → upload-s3 to a real versitygw, run by the real pipe binary.
type verifyRig struct {
	t        *testing.T
	bin, dir string
	path     string
	srv      *testenv.S3
	prefix   string
	prompts  int
}

func (r *verifyRig) start(args ...string) (*exec.Cmd, *syncBuffer) {
	cmd := exec.Command(r.bin, append([]string{"run", r.path, "--commit-every", "300ms"}, args...)...)
	cmd.Dir = r.dir
	cmd.Env = append(append(os.Environ(), r.srv.Env()...), "AWS_PROFILE=")
	out := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		r.t.Fatal(err)
	}
	return cmd, out
}

func (r *verifyRig) pipe(args ...string) (string, int) {
	cmd := exec.Command(r.bin, args...)
	cmd.Dir = r.dir
	cmd.Env = append(append(os.Environ(), r.srv.Env()...), "AWS_PROFILE=")
	out, _ := cmd.CombinedOutput()
	return string(out), cmd.ProcessState.ExitCode()
}

// listing is an independent listing of the bucket under the train prefix.
func (r *verifyRig) listing() map[string]int64 {
	r.t.Helper()
	c := r.srv.Client(r.t)
	out, err := c.ListObjectsV2(context.Background(), &s3.ListObjectsV2Input{Bucket: aws.String(r.srv.Bucket), Prefix: aws.String(r.prefix + "/train/")})
	if err != nil {
		r.t.Fatal(err)
	}
	got := map[string]int64{}
	for _, o := range out.Contents {
		got[strings.TrimPrefix(aws.ToString(o.Key), r.prefix+"/train/")] = aws.ToInt64(o.Size)
	}
	return got
}

func (r *verifyRig) emptyBucket() int {
	c := r.srv.Client(r.t)
	n := 0
	for key := range r.listing() {
		if _, err := c.DeleteObject(context.Background(), &s3.DeleteObjectInput{Bucket: aws.String(r.srv.Bucket), Key: aws.String(r.prefix + "/train/" + key)}); err != nil {
			r.t.Fatal(err)
		}
		n++
	}
	return n
}

func (r *verifyRig) manifest() *filecommit.Manifest {
	m, err := filecommit.ReadManifest(filepath.Join(r.dir, "out", "train"))
	if err != nil || m == nil {
		r.t.Fatalf("manifest: %v", err)
	}
	return m
}

// checkBucket: the independent listing holds exactly the manifest and the
// shards it names, at their sizes.
func (r *verifyRig) checkBucket() {
	r.t.Helper()
	m := r.manifest()
	got := r.listing()
	want := map[string]int64{filecommit.ManifestName: -1}
	for _, sh := range m.Shards {
		want[sh.Name] = sh.Bytes
	}
	for name, size := range want {
		if g, ok := got[name]; !ok || (size >= 0 && g != size) {
			r.t.Errorf("bucket: %s has %d bytes (there: %v), want %d", name, g, ok, size)
		}
	}
	for name := range got {
		if _, ok := want[name]; !ok {
			r.t.Errorf("bucket: %s is not in the manifest", name)
		}
	}
}

// everyIDOnce reads the shard directory with DuckDB (read_parquet over its
// *.parquet): every prompt id exactly once.
func (r *verifyRig) everyIDOnce() {
	r.t.Helper()
	_, rows := readers.Parquet(r.t, filepath.Join(r.dir, "out", "train"))
	seen := map[string]int{}
	for _, row := range rows {
		seen[readers.String(r.t, row["id"])]++
	}
	var bad []string
	for i := range r.prompts {
		if id := fmt.Sprintf("p%d", i); seen[id] != 1 {
			bad = append(bad, fmt.Sprintf("%s×%d", id, seen[id]))
		}
	}
	if len(bad) > 0 || len(rows) != r.prompts {
		sort.Strings(bad)
		r.t.Fatalf("DuckDB reads %d rows for %d prompts; not exactly once: %v", len(rows), r.prompts, bad)
	}
}

// proxy is a TCP proxy in front of the S3 server that can be cut (every
// connection closed, new ones refused) and restored: an outage.
type proxy struct {
	ln     net.Listener
	addr   string
	target string
	mu     sync.Mutex
	down   bool
	conns  map[net.Conn]bool
}

func (p *proxy) serve(c net.Conn) {
	u, err := net.Dial("tcp", p.target)
	if err != nil {
		c.Close()
		return
	}
	p.mu.Lock()
	p.conns[u] = true
	p.mu.Unlock()
	go func() { io.Copy(u, c); u.Close() }()
	io.Copy(c, u)
	c.Close()
}

func (p *proxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = true
	for c := range p.conns {
		c.Close()
	}
	p.conns = map[net.Conn]bool{}
}

func (p *proxy) restore() {
	p.mu.Lock()
	p.down = false
	p.mu.Unlock()
}
