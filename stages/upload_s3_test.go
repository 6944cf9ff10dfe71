package stages

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pipe-dev/pipe/internal/testrig/testenv"
	"github.com/pipe-dev/pipe/pipeline/filecommit"
	"github.com/pipe-dev/pipe/pipeline/record"
	"github.com/pipe-dev/pipe/stages/s3up"
)

// The tests run against versitygw, a real S3-compatible server with SigV4
// checks (scripts/setup-versitygw.sh, internal/testrig/testenv.StartS3). Shard
// records are made by hand, pointing at files of random bytes, with a
// manifest (.pipe/manifest.json) like write-arrow's.

const mib = 1 << 20

// s3Emitter records what a sink reports.
type s3Emitter struct {
	mu      sync.Mutex
	skipped []string // id:reason
	failed  []string
}

func (e *s3Emitter) Emit(string, *record.Record) error {
	return errors.New("upload-s3 has no outputs")
}
func (e *s3Emitter) Reject(*record.Record, string, string) error {
	return errors.New("upload-s3 rejects nothing")
}
func (e *s3Emitter) Fail(r *record.Record, err error, _ int) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.failed = append(e.failed, r.ID+": "+err.Error())
	return nil
}
func (e *s3Emitter) Skip(r *record.Record, reason string) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.skipped = append(e.skipped, r.ID+":"+reason)
	return nil
}
func (e *s3Emitter) SkipFinished(string) bool { return false }
func (e *s3Emitter) Took(int)                 {}

// syncBuffer is a run log several goroutines write.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}
func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// shardDir is a shard directory with a manifest, as write-arrow makes.
type shardDir struct {
	t   *testing.T
	dir string
	m   filecommit.Manifest
}

// add commits a shard of size random bytes and returns its record.
func (d *shardDir) add(size int) *record.Record {
	d.t.Helper()
	name := fmt.Sprintf("part-%05d.parquet", len(d.m.Shards))
	data := make([]byte, size)
	rand.Read(data)
	path := filepath.Join(d.dir, name)
	if err := os.WriteFile(path, data, 0o644); err != nil {
		d.t.Fatal(err)
	}
	sum := sha256.Sum256(data)
	info := filecommit.ShardInfo{Name: name, Rows: 10, Tokens: 100, Bytes: int64(size), SHA256: hex.EncodeToString(sum[:]), Committed: time.Now().UTC()}
	d.m.Shards = append(d.m.Shards, info)
	d.m.Rows += info.Rows
	d.m.Tokens += info.Tokens
	d.m.Bytes += info.Bytes
	d.writeManifest()
	return d.rec(len(d.m.Shards) - 1)
}

// rec is the shards-port record of shard i.
func (d *shardDir) rec(i int) *record.Record {
	sh := d.m.Shards[i]
	ref := record.ShardRef{Path: filepath.Join(d.dir, sh.Name), Dir: d.dir, Name: sh.Name,
		Rows: sh.Rows, Tokens: sh.Tokens, Bytes: sh.Bytes, SHA256: sh.SHA256}
	return &record.Record{ID: "shard:" + ref.Path, Shard: &ref}
}

func (d *shardDir) writeManifest() {
	d.m.Updated = time.Now().UTC()
	b, err := json.MarshalIndent(d.m, "", "  ")
	if err != nil {
		d.t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(d.dir, filecommit.MetaDir), 0o755); err != nil {
		d.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(d.dir, filecommit.ManifestName), b, 0o644); err != nil {
		d.t.Fatal(err)
	}
}

// s3Stage is an upload-s3 stage opened against srv with the credentials in
// the environment (srv.SetEnv), its run log and run directory.
type s3Stage struct {
	*uploadS3
	log    *syncBuffer
	runDir string
	em     *s3Emitter
}

func (st *s3Stage) process(t *testing.T, recs ...*record.Record) {
	t.Helper()
	for _, r := range recs {
		if err := st.Process(context.Background(), r, st.em); err != nil {
			t.Fatal(err)
		}
	}
}

func (st *s3Stage) finish(t *testing.T) {
	t.Helper()
	if err := st.Finish(context.Background(), st.em); err != nil {
		t.Fatal(err)
	}
}

// writes counts the requests that write object data.
func writes(t *testing.T, srv *testenv.S3) int {
	return srv.Requests(t, "PutObject") + srv.Requests(t, "UploadPart") + srv.Requests(t, "CreateMultipartUpload")
}

func TestUploadS3PartSize(t *testing.T) {
	for _, c := range []struct{ size, part, want int64 }{
		{100, 64 * mib, 64 * mib},
		{640000 * mib, 64 * mib, 64 * mib}, // exactly 10,000 parts
		{640001 * mib, 64 * mib, 65 * mib},
		{5 << 40, 64 * mib, 525 * mib}, // S3's largest object
		{10 * mib, 1, s3up.MinPartSize},
	} {
		got := s3up.PartSizeFor(c.size, c.part)
		if got != c.want || (c.size+got-1)/got > s3up.MaxParts {
			t.Errorf("PartSizeFor(%d, %d) = %d, want %d", c.size, c.part, got, c.want)
		}
	}
	for _, c := range []struct{ uri, bucket, prefix, err string }{
		{"s3://b/p/q/", "b", "p/q", ""},
		{"s3://b", "b", "", ""},
		{"s3://b/", "b", "", ""},
		{"b/p", "", "", "not an s3:// URI"},
		{"s3:///p", "", "", "names no bucket"},
	} {
		b, p, err := s3up.ParseURI(c.uri)
		if b != c.bucket || p != c.prefix || (err == nil) != (c.err == "") || (err != nil && !strings.Contains(err.Error(), c.err)) {
			t.Errorf("ParseURI(%q) = %q, %q, %v", c.uri, b, p, err)
		}
	}
}

// region: the key, else the AWS configuration's, else us-east-1.
func TestUploadS3Region(t *testing.T) {
	t.Setenv("AWS_CONFIG_FILE", os.DevNull)
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", os.DevNull)
	t.Setenv("AWS_PROFILE", "")
	t.Setenv("AWS_DEFAULT_REGION", "")
	for _, c := range []struct{ env, key, want string }{
		{"", "", "us-east-1"},
		{"eu-west-3", "", "eu-west-3"},
		{"eu-west-3", "ap-south-1", "ap-south-1"},
	} {
		t.Setenv("AWS_REGION", c.env)
		cl, err := s3up.New(context.Background(), s3up.Config{URI: "s3://b/p", Region: c.key})
		if err != nil {
			t.Fatal(err)
		}
		if got := cl.Region(); got != c.want {
			t.Errorf("AWS_REGION=%q region=%q: %q, want %q", c.env, c.key, got, c.want)
		}
		if got := cl.Where(); got != "AWS S3 (region "+c.want+")" {
			t.Errorf("Where() = %q", got)
		}
		cl.Close()
	}
}
