package stages

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/pipe-dev/pipe/pipeline"
	"github.com/pipe-dev/pipe/pipeline/commitlog"
	"github.com/pipe-dev/pipe/stages/s3up"
)

func init() {
	pipeline.Register(pipeline.Spec{
		Kind:    "upload-s3",
		Summary: "upload committed shards to S3 (or an S3-compatible server) as they are committed, the manifest last",
		Description: `Takes the records of a writer's "shards" port (write-arrow: one per
committed shard) and uploads each shard file to
s3://BUCKET/PREFIX/DIRNAME/part-00000.parquet, where DIRNAME is the name of
the writer's shard directory: several writers can share one prefix. Files up
to part_size go in one PutObject; larger ones in a multipart upload of
part_size parts (raised so an object has at most 10,000), part_concurrency
at a time, read straight from the file. Each request carries the SHA-256 of
its body, which the server checks; the object gets the metadata pipe-sha256
(the shard's SHA-256 from the manifest), and a HeadObject afterwards checks
its size and checksum. Requests are retried with backoff (max_attempts).

Idempotent: a shard already in the bucket with the same size and
pipe-sha256 is skipped (already_uploaded), so a resumed run — which sends
every committed shard again — uploads only what was committed but not
uploaded before a crash. Every upload is logged, committed, in the run
directory's uploads/STAGE.jsonl. At the end of its input, each shard
directory's manifest.json is uploaded last, and only if every shard it lists
is in the bucket; otherwise the missing shards are reported.

Credentials come only from the standard AWS chain: AWS_ACCESS_KEY_ID and
AWS_SECRET_ACCESS_KEY, AWS_PROFILE and the shared config and credentials
files, SSO, web identity and instance roles. They are never a pipeline key,
and never printed. A missing bucket or refused credentials stop the run
before any work starts, and show in pipe run --dry-run.

With delete_local_after_upload, a shard file is removed once its upload is
verified (the manifest stays). A failed upload fails the run; what was
committed is kept, and the same command resumes.`,
		Config:    uploadS3Config{},
		MaxInputs: 1,
		Needs:     []string{pipeline.FieldShard},
		KeySettings: func(c any) string {
			return c.(*uploadS3Config).URI
		},
		Example: `[[stage]]
id   = "prompts"
kind = "read-prompts"
path = "prompts.jsonl"

[[stage]]
id   = "train"
kind = "write-arrow"
input = "prompts"
path = "out/train"

# Credentials: AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY or AWS_PROFILE.
[[stage]]
id               = "up"
kind             = "upload-s3"
input            = "train.shards"
uri              = "s3://my-bucket/runs/2026-06"
endpoint         = "http://127.0.0.1:7070"
force_path_style = true
`,
		New: func(c any) (pipeline.Stage, error) { return &uploadS3{cfg: *c.(*uploadS3Config)}, nil },
	})
}

type uploadS3Config struct {
	URI              string `toml:"uri" op:"true" required:"true" shard:"prefix" doc:"destination \"s3://bucket/prefix\"; a shard goes to PREFIX/DIRNAME/NAME, DIRNAME being its shard directory's name; a resume may change it (every committed shard is then uploaded there)"`
	Endpoint         string `toml:"endpoint" op:"true" doc:"S3 endpoint URL for S3-compatible servers, e.g. \"http://127.0.0.1:7070\" (default: AWS, or AWS_ENDPOINT_URL_S3 / AWS_ENDPOINT_URL)"`
	Region           string `toml:"region" op:"true" doc:"region requests are signed for (default: the AWS configuration's, e.g. AWS_REGION, else \"us-east-1\")"`
	ForcePathStyle   bool   `toml:"force_path_style" op:"true" doc:"address buckets as ENDPOINT/BUCKET rather than BUCKET.ENDPOINT; most S3-compatible servers need it (default false)"`
	PartSize         int64  `toml:"part_size" op:"true" default:"67108864" min:"5242880" max:"5368709120" doc:"bytes per part of a multipart upload, and the size above which one is used; raised so an object has at most 10,000 parts (default 67108864, 64 MiB)"`
	PartConcurrency  int    `toml:"part_concurrency" op:"true" default:"4" min:"1" max:"64" doc:"parts of one shard uploaded at once (default 4)"`
	ShardConcurrency int    `toml:"shard_concurrency" op:"true" default:"2" min:"1" max:"32" doc:"shards uploaded at once (default 2)"`
	MaxAttempts      int    `toml:"max_attempts" op:"true" default:"5" min:"1" max:"100" doc:"tries per S3 request, with exponential backoff, before the run fails (default 5)"`
	DeleteLocal      bool   `toml:"delete_local_after_upload" op:"true" doc:"remove each local shard file once its upload is verified; manifest.json stays (default false)"`
	AllowInsecure    bool   `toml:"allow_insecure" op:"true" doc:"allow a plain http:// endpoint beyond loopback, which sends the credentials' session token and the data unencrypted (default false)"`
}

func (c *uploadS3Config) Validate() []error {
	if _, _, err := s3up.ParseURI(c.URI); err != nil {
		return []error{&pipeline.FieldError{Key: "uri", Msg: err.Error()}}
	}
	if err := s3up.CheckInsecure(c.Endpoint, c.AllowInsecure); err != nil {
		return []error{&pipeline.FieldError{Key: "endpoint", Msg: err.Error()}}
	}
	return nil
}

// uploadLine is one line of the upload log.
type uploadLine struct {
	ID     string `json:"id"`
	URL    string `json:"url"`
	Key    string `json:"key"`
	Bytes  int64  `json:"bytes"`
	SHA256 string `json:"sha256"`
	Parts  int    `json:"parts,omitempty"`
	// Verified is what was checked after the upload ("size, sha256"), or
	// "already_uploaded" for a shard found in the bucket.
	Verified string    `json:"verified"`
	Deleted  bool      `json:"deleted_local,omitempty"`
	Time     time.Time `json:"time"`
}

type uploadS3 struct {
	cfg    uploadS3Config
	client *s3up.Client
	log    *commitlog.Log
	out    io.Writer

	mu                         sync.Mutex
	dirs                       map[string]bool   // shard directories seen
	dirOf                      map[string]string // base name → shard directory
	inBucket                   map[string]bool   // keys verified in the bucket by this run
	logged                     map[string]bool   // "id url" logged by this run
	uploaded, skipped, deleted int
	upBytes                    int64
	// busy is the time with at least one upload in flight (active of
	// them, the latest such stretch since since): MB/s is upBytes/busy.
	busy       time.Duration
	active     int
	since      time.Time
	manifests  []string // manifest keys uploaded
	incomplete []string // manifests held back, and why
}

var (
	_ pipeline.Processor = (*uploadS3)(nil)
	_ pipeline.Parallel  = (*uploadS3)(nil)
	_ pipeline.Opener    = (*uploadS3)(nil)
	_ pipeline.Finisher  = (*uploadS3)(nil)
	_ pipeline.Closer    = (*uploadS3)(nil)
	_ pipeline.Reporter  = (*uploadS3)(nil)
	_ pipeline.DryRunner = (*uploadS3)(nil)
)

func (u *uploadS3) Workers() int { return u.cfg.ShardConcurrency }

// probeTimeout bounds the credentials and bucket check.
const probeTimeout = time.Minute

func (u *uploadS3) connect(ctx context.Context) (*s3up.Client, string, error) {
	c, err := s3up.New(ctx, s3up.Config{
		URI: u.cfg.URI, Endpoint: u.cfg.Endpoint, Region: u.cfg.Region, PathStyle: u.cfg.ForcePathStyle,
		PartSize: u.cfg.PartSize, PartConcurrency: u.cfg.PartConcurrency, MaxAttempts: u.cfg.MaxAttempts,
		Conns: max(1, u.cfg.ShardConcurrency) * max(1, u.cfg.PartConcurrency),
	})
	if err != nil {
		return nil, "", err
	}
	pctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	src, err := c.Check(pctx)
	if err != nil {
		c.Close()
		return nil, "", err
	}
	return c, src, nil
}

// DryRun checks the credentials and the bucket, as Open does.
func (u *uploadS3) DryRun(ctx context.Context, _ *pipeline.Env) (string, error) {
	c, src, err := u.connect(ctx)
	if err != nil {
		return u.cfg.URI + ": not ready\n", err
	}
	defer c.Close()
	return fmt.Sprintf("%s at %s (region %s): bucket %s reachable with credentials from %s; part size %s, %d parts and %d shards at once\n",
		u.cfg.URI, c.Where(), c.Region(), c.Bucket, src, pipeline.HumanBytes(u.cfg.PartSize), u.cfg.PartConcurrency, u.cfg.ShardConcurrency), nil
}

func (u *uploadS3) Open(ctx context.Context, env *pipeline.Env) error {
	u.out = io.Discard
	if env != nil && env.Log != nil {
		u.out = env.Log
	}
	if env == nil || env.RunDir == "" {
		return errors.New("upload-s3 needs a run directory")
	}
	c, _, err := u.connect(ctx)
	if err != nil {
		return err
	}
	path := filepath.Join(env.RunDir, "uploads", env.StageID+".jsonl")
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		c.Close()
		return err
	}
	l, err := commitlog.OpenLookup(path, pipeline.RecordLineID)
	if err != nil {
		c.Close()
		return err
	}
	u.client, u.log = c, l
	u.dirs, u.dirOf, u.inBucket, u.logged = map[string]bool{}, map[string]string{}, map[string]bool{}, map[string]bool{}
	return nil
}

// shardKey is where a shard goes: PREFIX/DIRNAME/NAME.
func (u *uploadS3) shardKey(dir, name string) string {
	return u.client.Key(filepath.Base(dir), name)
}

func (u *uploadS3) Process(ctx context.Context, rec *pipeline.Record, out pipeline.Emitter) error {
	sh := rec.Shard
	if sh == nil || sh.Path == "" || sh.Name == "" {
		return out.Fail(rec, errors.New("not a shard record: upload-s3 reads a writer's shards port (input = \"WRITER.shards\")"), 1)
	}
	dir := sh.Dir
	if dir == "" {
		dir = filepath.Dir(sh.Path)
	}
	key := u.shardKey(dir, sh.Name)
	u.mu.Lock()
	u.dirs[dir] = true
	other := u.dirOf[filepath.Base(dir)]
	if other == "" {
		u.dirOf[filepath.Base(dir)] = dir
	}
	u.mu.Unlock()
	if other != "" && other != dir {
		return fmt.Errorf("shard directories %s and %s would both upload to %s: give them different names", other, dir, u.client.URL(u.client.Key(filepath.Base(dir))+"/"))
	}

	obj, err := u.client.Head(ctx, key)
	if err != nil {
		return err
	}
	if s3up.Same(obj, sh.Bytes, sh.SHA256) {
		if err := u.record(rec.ID, uploadLine{Key: key, Bytes: sh.Bytes, SHA256: sh.SHA256, Verified: "already_uploaded"}, sh.Path); err != nil {
			return err
		}
		u.mu.Lock()
		u.skipped++
		u.mu.Unlock()
		return out.Skip(rec, "already_uploaded")
	}
	if _, err := os.Stat(sh.Path); errors.Is(err, os.ErrNotExist) {
		what := "is not in the bucket"
		if obj != nil {
			what = fmt.Sprintf("in the bucket has %d bytes and pipe-sha256 %q, want %d and %s", obj.Size, obj.SHA256, sh.Bytes, sh.SHA256)
		}
		return fmt.Errorf("shard %s was committed but its file is gone, and %s %s", sh.Path, u.client.URL(key), what)
	}

	u.busyStart()
	res, err := u.client.UploadFile(ctx, key, sh.Path, sh.Bytes, sh.SHA256, nil)
	u.busyEnd()
	if err != nil {
		return fmt.Errorf("uploading %s: %w", sh.Path, err)
	}
	if err := u.record(rec.ID, uploadLine{Key: key, Bytes: res.Bytes, SHA256: sh.SHA256, Parts: res.Parts, Verified: res.Verified}, sh.Path); err != nil {
		return err
	}
	u.mu.Lock()
	u.uploaded++
	u.upBytes += res.Bytes
	u.mu.Unlock()
	return nil
}

func (u *uploadS3) busyStart() {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.active == 0 {
		u.since = time.Now()
	}
	u.active++
}

func (u *uploadS3) busyEnd() {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.active--
	if u.active == 0 {
		u.busy += time.Since(u.since)
	}
}

// record notes the key as in the bucket, logs the upload (committed) unless
// the log has it already (a shard found in the bucket on resume), then
// removes the local file if so configured: the object in the bucket was
// verified, and the log says so first.
func (u *uploadS3) record(id string, line uploadLine, path string) error {
	line.ID, line.URL, line.Time = id, u.client.URL(line.Key), time.Now().UTC()
	if u.cfg.DeleteLocal {
		if _, err := os.Stat(path); err == nil {
			line.Deleted = true
		}
	}
	u.mu.Lock()
	u.inBucket[line.Key] = true
	dup := u.logged[id+" "+line.URL]
	u.logged[id+" "+line.URL] = true
	u.mu.Unlock()
	if !dup && !line.Deleted {
		// Logged by an earlier run, for the same place?
		if prev, ok, err := u.log.Lookup(id); err != nil {
			return err
		} else if ok {
			var p uploadLine
			dup = json.Unmarshal(prev, &p) == nil && p.URL == line.URL
		}
	}
	if !dup || line.Deleted {
		b, err := json.Marshal(line)
		if err != nil {
			return err
		}
		if err := u.log.Append(id, b); err != nil {
			return err
		}
		if err := u.log.Commit(); err != nil {
			return err
		}
	}
	if line.Deleted {
		if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("removing the uploaded shard: %w", err)
		}
		u.mu.Lock()
		u.deleted++
		u.mu.Unlock()
	}
	return nil
}

// Finish uploads each shard directory's manifest.json, last, when every
// shard it lists is in the bucket.
func (u *uploadS3) Finish(ctx context.Context, _ pipeline.Emitter) error {
	u.mu.Lock()
	dirs := make([]string, 0, len(u.dirs))
	for d := range u.dirs {
		dirs = append(dirs, d)
	}
	u.mu.Unlock()
	sort.Strings(dirs)
	for _, dir := range dirs {
		if err := u.uploadManifest(ctx, dir); err != nil {
			return err
		}
	}
	return nil
}

func (u *uploadS3) uploadManifest(ctx context.Context, dir string) error {
	mpath := filepath.Join(dir, commitlog.ManifestName)
	// The bytes read are the bytes checked and uploaded: the writer may
	// replace the file meanwhile (it never names an unfinished shard).
	data, err := os.ReadFile(mpath)
	if err != nil {
		return fmt.Errorf("reading the manifest to upload: %w", err)
	}
	var m commitlog.Manifest
	if err := json.Unmarshal(data, &m); err != nil {
		return fmt.Errorf("%s: %w", mpath, err)
	}
	var missing []string
	for _, sh := range m.Shards {
		key := u.shardKey(dir, sh.Name)
		u.mu.Lock()
		ok := u.inBucket[key]
		u.mu.Unlock()
		if !ok { // committed by an earlier run and not sent this time
			obj, err := u.client.Head(ctx, key)
			if err != nil {
				return err
			}
			ok = s3up.Same(obj, sh.Bytes, sh.SHA256)
		}
		if !ok {
			missing = append(missing, sh.Name)
		}
	}
	key := u.shardKey(dir, commitlog.ManifestName)
	if len(missing) > 0 {
		list := strings.Join(missing, ", ")
		if len(missing) > 10 {
			list = strings.Join(missing[:10], ", ") + fmt.Sprintf(", … (%d in all)", len(missing))
		}
		msg := fmt.Sprintf("%s not uploaded: %d of its %d shards are not in the bucket (%s); the next run uploads them and then it", u.client.URL(key), len(missing), len(m.Shards), list)
		fmt.Fprintln(u.out, msg)
		u.mu.Lock()
		u.incomplete = append(u.incomplete, msg)
		u.mu.Unlock()
		return nil
	}
	if obj, err := u.client.Head(ctx, key); err != nil {
		return err
	} else if s3up.Same(obj, int64(len(data)), sha256Hex(data)) {
		u.mu.Lock() // uploaded by an earlier run, unchanged since
		u.manifests = append(u.manifests, key+" (already there)")
		u.mu.Unlock()
		return nil
	}
	if _, err := u.client.PutBytes(ctx, key, data, "application/json"); err != nil {
		return fmt.Errorf("uploading %s: %w", mpath, err)
	}
	fmt.Fprintf(u.out, "%s uploaded: %d shards, %d rows\n", u.client.URL(key), len(m.Shards), m.Rows)
	u.mu.Lock()
	u.manifests = append(u.manifests, key)
	u.mu.Unlock()
	return nil
}

func (u *uploadS3) Close() error {
	var err error
	if u.log != nil {
		err = u.log.Close()
	}
	u.client.Close()
	return err
}

func (u *uploadS3) Report() []pipeline.Figure {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.client == nil {
		return nil
	}
	busy := u.busy
	if u.active > 0 {
		busy += time.Since(u.since)
	}
	stats := []pipeline.Figure{
		pipeline.NewState("uri", u.cfg.URI, ""),
		pipeline.NewCounter("uploaded_shards", int64(u.uploaded)),
		pipeline.NewCounter("uploaded_bytes", u.upBytes).In(pipeline.UnitBytes),
		pipeline.NewCounter("already_uploaded_shards", int64(u.skipped)),
		pipeline.NewCounter("busy", 0).In(pipeline.UnitSeconds),
	}
	stats[len(stats)-1].Value = busy.Seconds()
	if u.uploaded > 0 && busy > 0 {
		stats = append(stats, pipeline.NewGauge("upload_bytes_per_second_while_busy", float64(u.upBytes)/busy.Seconds()).In(pipeline.UnitPerSecond))
	}
	if u.deleted > 0 {
		stats = append(stats, pipeline.NewCounter("local_shards_deleted", int64(u.deleted)))
	}
	for _, m := range u.manifests {
		stats = append(stats, pipeline.NewState("manifest_uploaded", m, ""))
	}
	for _, m := range u.incomplete {
		stats = append(stats, pipeline.NewState("manifest_held_back", m, ""))
	}
	return stats
}

func sha256Hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}
