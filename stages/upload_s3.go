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
	"path"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pipe-dev/pipe/internal/numfmt"
	"github.com/pipe-dev/pipe/internal/outage"
	"github.com/pipe-dev/pipe/pipeline"
	"github.com/pipe-dev/pipe/pipeline/commitlog"
	"github.com/pipe-dev/pipe/pipeline/config"
	"github.com/pipe-dev/pipe/pipeline/figure"
	"github.com/pipe-dev/pipe/pipeline/filecommit"
	"github.com/pipe-dev/pipe/pipeline/output"
	"github.com/pipe-dev/pipe/pipeline/record"
	"github.com/pipe-dev/pipe/pipeline/record/recordline"
	"github.com/pipe-dev/pipe/pipeline/rundir/layout"
	"github.com/pipe-dev/pipe/stages/s3up"
)

func init() {
	pipeline.Register(pipeline.Spec{
		Kind:    "upload-s3",
		Summary: "upload committed shards to S3 (or an S3-compatible server) as they are committed, the manifest last",
		Description: `Takes the records of a writer's "shards" port. write-arrow sends one per
committed shard. Each shard file is uploaded to
s3://BUCKET/PREFIX/DIRNAME/part-00000.parquet. DIRNAME is the name of the
writer's shard directory, so several writers can share one prefix. Files up
to part_size go in one PutObject. Larger ones go in a multipart upload of
part_size parts, part_concurrency at a time, read straight from the file.
part_size is raised so an object has at most 10,000 parts. Each request
carries the SHA-256 of its body, which the server checks. The object gets
the metadata pipe-sha256: the shard's SHA-256 from the manifest. A
HeadObject afterwards checks its size and checksum. Requests are retried
with backoff (max_attempts).

Uploads are idempotent. A shard already in the bucket with the same size
and pipe-sha256 is skipped (already_uploaded). A resumed run sends every
committed shard again. So it uploads only what was committed but not
uploaded before a crash. Every upload is logged, committed, in the run
directory's uploads/STAGE.jsonl. At the end of its input, each shard
directory's .pipe/manifest.json is uploaded last. It goes up only if every
shard it lists is in the bucket; otherwise the missing shards are
reported.

Credentials come only from the standard AWS chain: AWS_ACCESS_KEY_ID and
AWS_SECRET_ACCESS_KEY, AWS_PROFILE and the shared config and credentials
files, SSO, web identity and instance roles. They are never a pipeline key,
and never printed. A missing bucket or refused credentials stop the run
before any work starts. They show in pipe run --dry-run.

With delete_local_after_upload, a shard file is removed once its upload is
verified. The manifest stays.

Outages are waited out. A request that fails for a reason that can pass is
tried again with backoff, until the outage has lasted upload_timeout. Such
reasons are no connection, a timeout, HTTP 5xx and throttling. Meanwhile
the writer goes on committing shards into a bounded backlog of 32 shards.
The display and warnings say that uploads are waiting. Past the timeout
the run stops with everything committed, and exits 1 (retryable). A
refusal exits 2: wrong credentials, access denied, no such bucket.

At the end, before the manifest goes up, every shard it names is checked
in the bucket again: size, pipe-sha256 and the server's checksum, by
HeadObject. This run's record of its uploads is not trusted for it. What
is missing or different is uploaded again from the local shard. A shard
in neither place fails the run, named.`,
		Verify: pipeline.VerifyFor(verifyUploads),
		// Its objects are the writer's shards: PREFIX/DIRNAME/NAME.
		Output:    &output.Spec{CopyOf: uploadedURL},
		MaxInputs: 1,
		Needs:     []string{record.FieldShard},
		KeySettings: pipeline.SettingsFor(func(c *uploadS3Config) string {
			return c.URI
		}),
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
		New: pipeline.NewProcessor(func(c *uploadS3Config) (pipeline.Processor, error) { return &uploadS3{cfg: *c}, nil }),
	})
}

type uploadS3Config struct {
	URI              string `toml:"uri" op:"true" required:"true" shard:"prefix" doc:"Destination \"s3://bucket/prefix\". A shard goes to PREFIX/DIRNAME/NAME, DIRNAME being its shard directory's name. A resume may change it: every committed shard is then uploaded there."`
	Endpoint         string `toml:"endpoint" op:"true" doc:"S3 endpoint URL for S3-compatible servers, e.g. \"http://127.0.0.1:7070\". Unset: AWS, or AWS_ENDPOINT_URL_S3 / AWS_ENDPOINT_URL."`
	Region           string `toml:"region" op:"true" doc:"Region requests are signed for. Unset: the AWS configuration's (e.g. AWS_REGION), else \"us-east-1\"."`
	ForcePathStyle   bool   `toml:"force_path_style" default:"false" op:"true" doc:"Address buckets as ENDPOINT/BUCKET rather than BUCKET.ENDPOINT. Most S3-compatible servers need it."`
	PartSize         int64  `toml:"part_size" op:"true" default:"67108864" min:"5242880" max:"5368709120" doc:"Bytes per part of a multipart upload, and the size above which one is used. It is raised so an object has at most 10,000 parts."`
	PartConcurrency  int    `toml:"part_concurrency" op:"true" default:"4" min:"1" max:"64" doc:"Parts of one shard uploaded at once."`
	ShardConcurrency int    `toml:"shard_concurrency" op:"true" default:"2" min:"1" max:"32" doc:"Shards uploaded at once."`
	MaxAttempts      int    `toml:"max_attempts" op:"true" default:"5" min:"1" max:"100" doc:"Tries per S3 request by the SDK, with exponential backoff. Then upload_timeout's wait takes over."`
	// UploadTimeout bounds the wait through an outage.
	UploadTimeout config.Duration `toml:"upload_timeout" op:"true" default:"30m" doc:"How long uploads wait out S3 failing for a reason that can pass: no connection, timeouts, 5xx. Then the run stops, everything committed, with exit 1."`
	DeleteLocal   bool            `toml:"delete_local_after_upload" default:"false" op:"true" doc:"Remove each local shard file once its upload is verified. .pipe/manifest.json stays."`
	AllowInsecure bool            `toml:"allow_insecure" default:"false" op:"true" doc:"Allow a plain http:// endpoint beyond loopback. It sends the credentials' session token and the data unencrypted."`
}

func (c *uploadS3Config) Validate() []error {
	if _, _, err := s3up.ParseURI(c.URI); err != nil {
		return []error{&config.FieldError{Key: "uri", Msg: err.Error()}}
	}
	if err := s3up.CheckInsecure(c.Endpoint, c.AllowInsecure); err != nil {
		return []error{&config.FieldError{Key: "endpoint", Msg: err.Error()}}
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
	reuploaded int      // shards found missing or different at the end, uploaded again
	wait       *outage.Waiter
	notice     io.Writer // what the user must see (Env.Notice)
	// halt ends the run like a stop (Env.Halt) when an outage outlasts
	// upload_timeout; halted is set then, and later shards are skipped.
	halt   func(error)
	halted atomic.Bool
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
		return u.cfg.URI + ": not ready\n", refusal(err)
	}
	defer c.Close()
	return fmt.Sprintf("%s at %s (region %s): bucket %s reachable with credentials from %s; part size %s, %d parts and %d shards at once\n",
		u.cfg.URI, c.Where(), c.Region(), c.Bucket, src, numfmt.Bytes(u.cfg.PartSize), u.cfg.PartConcurrency, u.cfg.ShardConcurrency), nil
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
		return refusal(err)
	}
	path := layout.UploadLedger(env.RunDir, env.StageID)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		c.Close()
		return err
	}
	l, rep, err := commitlog.OpenRepaired(path, recordline.ID, true, false)
	if err != nil {
		c.Close()
		return err
	}
	if rep != nil && env.Notice != nil {
		// A lost line is a shard this ledger no longer knows was uploaded:
		// it is checked in the bucket, and uploaded again if missing.
		fmt.Fprintf(env.Notice, "pipe: warning: stage %q: %s\n", env.StageID, rep.String(path))
	}
	u.client, u.log = c, l
	u.dirs, u.dirOf, u.inBucket, u.logged = map[string]bool{}, map[string]string{}, map[string]bool{}, map[string]bool{}
	notice := env.Notice
	if notice == nil {
		notice = u.out
	}
	u.notice = notice
	u.halt = env.Halt
	u.wait = &outage.Waiter{Service: "S3", Timeout: u.cfg.UploadTimeout.Duration, Transient: s3up.Transient, Notify: func(msg string) {
		fmt.Fprintf(notice, "stage %q: %s\n", env.StageID, msg)
	}}
	return nil
}

// refusal marks S3 refusing for good as permanent (exit 2).
func refusal(err error) error {
	if s3up.Refused(err) {
		return pipeline.Permanent(err)
	}
	return err
}

// head is HeadObject, waiting out an outage.
func (u *uploadS3) head(ctx context.Context, key string) (*s3up.Object, error) {
	var obj *s3up.Object
	err := u.wait.Do(ctx, "HeadObject "+u.client.URL(key), func() (err error) {
		obj, err = u.client.Head(ctx, key)
		return err
	})
	return obj, refusal(err)
}

// upload uploads the shard file, waiting out an outage.
func (u *uploadS3) upload(ctx context.Context, key string, sh *record.ShardRef) (*s3up.Uploaded, error) {
	var res *s3up.Uploaded
	u.busyStart()
	err := u.wait.Do(ctx, "uploading "+sh.Path, func() (err error) {
		res, err = u.client.UploadFile(ctx, key, sh.Path, sh.Bytes, sh.SHA256, nil)
		return err
	})
	u.busyEnd()
	if err != nil {
		return nil, fmt.Errorf("uploading %s: %w", sh.Path, refusal(err))
	}
	return res, nil
}

// uploadedURL is where the upload to dest (s3://BUCKET/PREFIX) puts the
// file of the shard directory dir: PREFIX/DIRNAME/NAME, as shardKey.
func uploadedURL(dest, dir, file string) string {
	return strings.TrimRight(dest, "/") + "/" + path.Join(filepath.Base(dir), filepath.Base(file))
}

// shardKey is where a shard goes: PREFIX/DIRNAME/NAME.
func (u *uploadS3) shardKey(dir, name string) string {
	return u.client.Key(filepath.Base(dir), name)
}

func (u *uploadS3) Process(ctx context.Context, rec *record.Record, out pipeline.Emitter) error {
	if u.halted.Load() {
		return out.Skip(rec, "s3_unreachable")
	}
	err := u.process(ctx, rec, out)
	var oe *outage.Error
	if errors.As(err, &oe) && u.halt != nil {
		// Past upload_timeout: the run stops as a stop request does —
		// everything processed committed, requests in flight finished —
		// and then fails with this (exit 1: the same command uploads the
		// rest).
		if !u.halted.Swap(true) {
			u.halt(fmt.Errorf("%w; everything committed is kept, and the same command uploads what is not in the bucket", err))
		}
		return out.Skip(rec, "s3_unreachable")
	}
	return err
}

func (u *uploadS3) process(ctx context.Context, rec *record.Record, out pipeline.Emitter) error {
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

	obj, err := u.head(ctx, key)
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

	res, err := u.upload(ctx, key, sh)
	if err != nil {
		return err
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
		var err error
		if dup, err = u.loggedBefore(id, line.URL); err != nil {
			return err
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
		return u.removeUploaded(path, line.URL)
	}
	return nil
}

// loggedBefore reports whether an earlier run logged the upload of id to
// the same place, url.
func (u *uploadS3) loggedBefore(id, url string) (bool, error) {
	prev, ok, err := u.log.Lookup(id)
	if err != nil || !ok {
		return false, err
	}
	var p uploadLine
	return json.Unmarshal(prev, &p) == nil && p.URL == url, nil
}

// removeUploaded removes the local shard at path, uploaded to url and
// verified there. Its move is noted first: the writer then knows the
// missing file for moved, not damaged (its rows are not written again).
func (u *uploadS3) removeUploaded(path, url string) error {
	if err := filecommit.MarkMoved(filepath.Dir(path), filepath.Base(path), url); err != nil {
		return err
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("removing the uploaded shard: %w", err)
	}
	u.mu.Lock()
	u.deleted++
	u.mu.Unlock()
	return nil
}

// Finish uploads each shard directory's .pipe/manifest.json, last, once every
// shard it lists was checked in the bucket again (not taken from this
// run's record of what it uploaded: objects can be lost server-side) and
// what was missing or different was uploaded again from the local copy. A
// shard in neither place fails the run, named.
func (u *uploadS3) Finish(ctx context.Context, _ pipeline.Emitter) error {
	if u.halted.Load() { // the run fails with the outage; the next one finishes
		return nil
	}
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
	mpath, _ := filecommit.ManifestPath(dir) // the writer renamed a legacy one when it opened dir
	// The bytes read are the bytes checked and uploaded: the writer may
	// replace the file meanwhile (it never names an unfinished shard).
	data, err := os.ReadFile(mpath)
	if err != nil {
		return fmt.Errorf("reading the manifest to upload: %w", err)
	}
	var m filecommit.Manifest
	if err := json.Unmarshal(data, &m); err != nil {
		return fmt.Errorf("%s: %w", mpath, err)
	}
	var missing []string
	var rows int64
	for _, sh := range m.Shards {
		key := u.shardKey(dir, sh.Name)
		obj, err := u.head(ctx, key)
		if err != nil {
			return err
		}
		if s3up.Same(obj, sh.Bytes, sh.SHA256) {
			continue
		}
		path := filepath.Join(dir, sh.Name)
		if _, err := os.Stat(path); err != nil {
			missing = append(missing, fmt.Sprintf("%s (%d rows)", sh.Name, sh.Rows))
			rows += sh.Rows
			continue
		}
		if err := u.reupload(ctx, dir, key, path, sh, obj); err != nil {
			return err
		}
	}
	if err := u.removeStale(ctx, dir, &m); err != nil {
		return err
	}
	return u.putManifest(ctx, dir, mpath, data, &m, missing, rows)
}

// reupload uploads the shard sh at path again to key, where the bucket
// has obj (nil: nothing) instead of it, and says so.
func (u *uploadS3) reupload(ctx context.Context, dir, key, path string, sh filecommit.ShardInfo, obj *s3up.Object) error {
	u.mu.Lock()
	was := u.inBucket[key]
	u.mu.Unlock()
	ref := record.ShardRef{Path: path, Dir: dir, Name: sh.Name, Rows: sh.Rows, Tokens: sh.Tokens, Bytes: sh.Bytes, SHA256: sh.SHA256}
	res, err := u.upload(ctx, key, &ref)
	if err != nil {
		return err
	}
	what := "was not in the bucket"
	if obj != nil {
		what = fmt.Sprintf("in the bucket had %d bytes and pipe-sha256 %q", obj.Size, obj.SHA256)
	}
	if was {
		what += " though this run had uploaded and verified it"
	}
	fmt.Fprintf(u.notice, "%s %s: uploaded again from %s (%s)\n", u.client.URL(key), what, path, res.Verified)
	if err := u.record("shard:"+path, uploadLine{Key: key, Bytes: res.Bytes, SHA256: sh.SHA256, Parts: res.Parts, Verified: res.Verified + " (again at the end)"}, path); err != nil {
		return err
	}
	u.mu.Lock()
	u.reuploaded++
	u.uploaded++
	u.upBytes += res.Bytes
	u.mu.Unlock()
	return nil
}

// putManifest uploads dir's manifest (data, read from mpath) unless the
// bucket has it already; missing lists the shards neither in the bucket
// nor in dir (rows in all), which fail the upload.
func (u *uploadS3) putManifest(ctx context.Context, dir, mpath string, data []byte, m *filecommit.Manifest, missing []string, rows int64) error {
	key := u.shardKey(dir, filecommit.ManifestName)
	if len(missing) > 0 {
		list := strings.Join(missing, ", ")
		if len(missing) > 10 {
			list = strings.Join(missing[:10], ", ") + fmt.Sprintf(", … (%d in all)", len(missing))
		}
		msg := fmt.Sprintf("%s not uploaded: %d of its %d shards (%d rows) are neither in the bucket nor in %s: %s", u.client.URL(key), len(missing), len(m.Shards), rows, dir, list)
		u.mu.Lock()
		u.incomplete = append(u.incomplete, msg)
		u.mu.Unlock()
		return errors.New(msg)
	}
	if obj, err := u.head(ctx, key); err != nil {
		return err
	} else if s3up.Same(obj, int64(len(data)), sha256Hex(data)) {
		u.mu.Lock() // uploaded by an earlier run, unchanged since
		u.manifests = append(u.manifests, key+" (already there)")
		u.mu.Unlock()
		return u.removeLegacyManifest(ctx, dir)
	}
	if err := u.wait.Do(ctx, "uploading "+mpath, func() error {
		_, err := u.client.PutBytes(ctx, key, data, "application/json")
		return err
	}); err != nil {
		return fmt.Errorf("uploading %s: %w", mpath, refusal(err))
	}
	if err := u.removeLegacyManifest(ctx, dir); err != nil {
		return err
	}
	fmt.Fprintf(u.out, "%s uploaded: %d shards, %d rows\n", u.client.URL(key), len(m.Shards), m.Rows)
	u.mu.Lock()
	u.manifests = append(u.manifests, key)
	u.mu.Unlock()
	return nil
}

// removeLegacyManifest deletes the manifest.json an earlier version put
// beside the shards, once the one in .pipe/ (which lists every shard it
// did) is there: left, it is what HF datasets hands to the Parquet reader.
func (u *uploadS3) removeLegacyManifest(ctx context.Context, dir string) error {
	key := u.shardKey(dir, filecommit.LegacyManifestName)
	obj, err := u.client.Head(ctx, key)
	if err != nil || obj == nil {
		return err
	}
	if err := u.client.Delete(ctx, key); err != nil {
		return err
	}
	fmt.Fprintf(u.out, "%s removed: the manifest is %s now\n", u.client.URL(key), filecommit.ManifestName)
	return nil
}

// removeStale deletes the shard objects under the directory's prefix that
// its manifest does not name: a shard found damaged and taken out (its rows
// written again into another) whose earlier upload is still there. Left,
// a reader of every part-*.parquet under the prefix would read its rows
// twice. While rows of damaged shards are still to be written again, none
// is removed (it may be their last copy).
func (u *uploadS3) removeStale(ctx context.Context, dir string, m *filecommit.Manifest) error {
	prefix := u.client.Key(filepath.Base(dir))
	var keys map[string]int64
	if err := u.wait.Do(ctx, "listing "+u.client.URL(prefix+"/"), func() (err error) {
		keys, err = u.client.List(ctx, prefix)
		return err
	}); err != nil {
		return refusal(err)
	}
	named := map[string]bool{}
	for _, sh := range m.Shards {
		named[sh.Name] = true
	}
	// Rows of a dropped shard not written again: a stale object may be
	// their last copy, so none is removed while any are left.
	redo, err := filecommit.ReadRedo(dir)
	if err != nil {
		return err
	}
	for key := range keys {
		name, ok := strings.CutPrefix(key, prefix+"/")
		if !ok || strings.Contains(name, "/") || !filecommit.IsShardName(name) || named[name] {
			continue
		}
		if len(redo) > 0 {
			fmt.Fprintf(u.notice, "%s is not named by %s, and is kept: %d rows of damaged shards were not written again, and it may hold them (download it before removing it)\n", u.client.URL(key), filecommit.ManifestName, len(redo))
			continue
		}
		if err := u.wait.Do(ctx, "DeleteObject "+u.client.URL(key), func() error { return u.client.Delete(ctx, key) }); err != nil {
			return refusal(err)
		}
		fmt.Fprintf(u.notice, "%s removed: %s no longer names it (a damaged shard taken out, its rows written again)\n", u.client.URL(key), filecommit.ManifestName)
	}
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

func (u *uploadS3) Report() []figure.Figure {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.client == nil {
		return nil
	}
	busy := u.busy
	if u.active > 0 {
		busy += time.Since(u.since)
	}
	stats := []figure.Figure{
		figure.NewState("uri", u.cfg.URI, ""),
		figure.NewCounter("uploaded_shards", int64(u.uploaded)),
		figure.NewCounter("uploaded_bytes", u.upBytes).In(figure.UnitBytes),
		figure.NewCounter("already_uploaded_shards", int64(u.skipped)),
		figure.NewCounter("busy", 0).In(figure.UnitSeconds),
	}
	stats[len(stats)-1].Value = busy.Seconds()
	if u.uploaded > 0 && busy > 0 {
		stats = append(stats, figure.NewGauge("upload_bytes_per_second_while_busy", float64(u.upBytes)/busy.Seconds()).In(figure.UnitPerSecond))
	}
	if u.deleted > 0 {
		stats = append(stats, figure.NewCounter("local_shards_deleted", int64(u.deleted)))
	}
	if u.reuploaded > 0 {
		stats = append(stats, figure.NewCounter("shards_uploaded_again_at_the_end", int64(u.reuploaded)))
	}
	if since, waiting, outages, longest, last := u.wait.State(); !since.IsZero() {
		stats = append(stats, figure.NewState("waiting", fmt.Sprintf("%d uploads, S3 failing for %s (upload_timeout %s); shards wait, generation goes on", waiting, time.Since(since).Round(time.Second), u.cfg.UploadTimeout.Duration), fmt.Sprint(last)))
	} else if outages > 0 {
		stats = append(stats, figure.NewCounter("outages_waited_out", int64(outages)), figure.NewCounter("longest_outage", 0).In(figure.UnitSeconds))
		stats[len(stats)-1].Value = longest.Seconds()
	}
	for _, m := range u.manifests {
		stats = append(stats, figure.NewState("manifest_uploaded", m, ""))
	}
	for _, m := range u.incomplete {
		stats = append(stats, figure.NewState("manifest_held_back", m, ""))
	}
	return stats
}

func sha256Hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}
