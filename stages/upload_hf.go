package stages

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/pipe-dev/pipe/internal/outage"
	"github.com/pipe-dev/pipe/pipeline"
	"github.com/pipe-dev/pipe/pipeline/config"
	"github.com/pipe-dev/pipe/pipeline/figure"
	"github.com/pipe-dev/pipe/pipeline/filecommit"
	"github.com/pipe-dev/pipe/pipeline/record"
	"github.com/pipe-dev/pipe/stages/hfhub"
	"github.com/pipe-dev/pipe/stages/s3up"
)

func init() {
	pipeline.Register(pipeline.Spec{
		Kind:    "upload-hf",
		Summary: "publish a writer's Parquet shards to a Hugging Face Hub dataset, with a card the run writes",
		Description: `Takes the records of a write-arrow's "shards" port (Parquet). Each shard's
content goes to the repository's LFS store as soon as it is committed. A
shard the store has already, by its SHA-256, is not sent again. So a
resumed run sends only what is missing.

At the end of its input the shards are committed as
data/SPLIT-00000-of-00027.parquet and so on, the names datasets'
push_to_hub writes and load_dataset("ORG/NAME") reads. Commits hold at
most files_per_commit files and each names the commit it follows, so the
Hub refuses one made twice. A commit whose answer is lost is found by
reading the branch. Files of an earlier publish under data/SPLIT- that are
not among this run's shards are deleted in the last commit. At the end of
the run the dataset card (README.md) is committed. It says how the run made
the data. pipe/pipeline.toml (the pipeline file, secrets removed) and
pipe/manifest.json go with it.

Exit 0 means the branch holds every shard of the manifest, with its size
and SHA-256, as the Hub's own listing says. pipe verify checks the same.

The token is HF_TOKEN, else the token file huggingface_hub uses
(HF_TOKEN_PATH, else HF_HOME/token, else ~/.cache/huggingface/token). It is
never a key, never printed and never written. A token that is refused, or
read-only, stops the run before any work. The repository is created if
missing, private unless private = false. 429 and 5xx answers are waited out
as S3 outages are, after the wait the Hub asks for.`,
		Verify:    pipeline.VerifyFor(verifyHub),
		Publish:   pipeline.PublishFor(publishCard),
		MaxInputs: 1,
		Needs:     []string{record.FieldShard},
		KeySettings: pipeline.SettingsFor(func(c *uploadHFConfig) string {
			return c.Repo + "@" + c.Revision
		}),
		Example: `[[stage]]
id   = "prompts"
kind = "read-prompts"
path = "prompts.jsonl"

[[stage]]
id     = "train"
kind   = "write-arrow"
input  = "prompts"
path   = "out/train"
format = "parquet"

# The token: HF_TOKEN, or the file hf auth login writes.
[[stage]]
id    = "hub"
kind  = "upload-hf"
input = "train.shards"
repo  = "my-org/regen-qwen3"
`,
		New: pipeline.NewProcessor(func(c *uploadHFConfig) (pipeline.Processor, error) { return &uploadHF{cfg: *c}, nil }),
	})
}

type uploadHFConfig struct {
	Repo           string          `toml:"repo" required:"true" op:"true" doc:"The dataset repository, NAMESPACE/NAME. It is created if missing."`
	Revision       string          `toml:"revision" default:"main" op:"true" doc:"The branch committed to. It must exist, unless it is main."`
	Private        bool            `toml:"private" default:"true" op:"true" doc:"Create the repository private. An existing one keeps its visibility."`
	Split          string          `toml:"split" default:"train" op:"true" doc:"The split the shards are, in their names and in the card."`
	Endpoint       string          `toml:"endpoint" op:"true" doc:"The Hub's URL. Unset: HF_ENDPOINT, else https://huggingface.co."`
	FilesPerCommit int             `toml:"files_per_commit" default:"50" min:"1" max:"100" op:"true" doc:"Shards a commit holds at most. The Hub asks for under 100, datasets uses 50."`
	License        string          `toml:"license" default:"other" op:"true" doc:"The card's license, a Hub license id such as apache-2.0."`
	UploadTimeout  config.Duration `toml:"upload_timeout" op:"true" default:"30m" doc:"How long uploads wait out the Hub failing for a reason that can pass: no connection, timeouts, 429, 5xx. Then the run stops, everything committed, with exit 1."`
	AllowInsecure  bool            `toml:"allow_insecure" default:"false" op:"true" doc:"Allow a plain http:// endpoint beyond loopback. It sends the token unencrypted."`
}

func (c *uploadHFConfig) Validate() []error {
	var errs []error
	if err := hfhub.CheckRepo(c.Repo); err != nil {
		errs = append(errs, &config.FieldError{Key: "repo", Msg: err.Error()})
	}
	if err := hfhub.CheckRevision(c.Revision); err != nil {
		errs = append(errs, &config.FieldError{Key: "revision", Msg: err.Error()})
	}
	if c.Split == "" || strings.ContainsAny(c.Split, "/-. ") {
		errs = append(errs, &config.FieldError{Key: "split", Msg: fmt.Sprintf("%q is not a split name: want letters, digits and _ (train, validation, test)", c.Split)})
	}
	if err := s3up.CheckInsecure(c.Endpoint, c.AllowInsecure); err != nil {
		errs = append(errs, &config.FieldError{Key: "endpoint", Msg: err.Error()})
	}
	return errs
}

type uploadHF struct {
	cfg    uploadHFConfig
	client *hfhub.Client
	wait   *outage.Waiter
	notice io.Writer

	mu            sync.Mutex
	dirs          map[string]bool
	uploaded, had int
	commits       int
	upBytes       int64
	published     string // the commit the shards are in
}

var (
	_ pipeline.Processor = (*uploadHF)(nil)
	_ pipeline.Opener    = (*uploadHF)(nil)
	_ pipeline.Finisher  = (*uploadHF)(nil)
	_ pipeline.Reporter  = (*uploadHF)(nil)
	_ pipeline.DryRunner = (*uploadHF)(nil)
)

// endpoint is the Hub's URL: the key, else HF_ENDPOINT, else the Hub.
func (c *uploadHFConfig) endpoint() string {
	return cmp.Or(c.Endpoint, os.Getenv("HF_ENDPOINT"), hfhub.DefaultEndpoint)
}

// connect finds the token, checks it (whoami) and makes sure the
// repository and branch are there: every refusal is permanent (exit 2)
// and says what to do.
func (c *uploadHFConfig) connect(ctx context.Context, create bool) (*hfhub.Client, string, error) {
	token, source, err := hfhub.Token(os.Getenv)
	if err != nil {
		return nil, "", pipeline.Permanent(err)
	}
	client, err := hfhub.New(c.endpoint(), c.Repo, token, &http.Client{Timeout: c.UploadTimeout.Duration})
	if err != nil {
		return nil, "", pipeline.Permanent(err)
	}
	name, role, err := client.Whoami(ctx)
	switch {
	case hfhub.Refused(err):
		return nil, "", pipeline.Permanent(fmt.Errorf("the Hub refused the token from %s: %w (make one with write access at https://huggingface.co/settings/tokens)", source, err))
	case err != nil:
		return nil, "", err
	case role == "read":
		return nil, "", pipeline.Permanent(fmt.Errorf("the token from %s (account %s) is read-only: publishing needs a token with write access", source, name))
	}
	_, err = client.Head(ctx, c.Revision)
	var he *hfhub.Error
	switch {
	case errors.As(err, &he) && he.Code == "RepoNotFound" && create:
		if _, err := client.CreateRepo(ctx, c.Private); err != nil {
			return nil, "", refusedHub(fmt.Errorf("creating %s: %w", c.Repo, err))
		}
		if _, err := client.Head(ctx, c.Revision); err != nil {
			return nil, "", refusedHub(fmt.Errorf("%s was created, but its branch %s: %w", c.Repo, c.Revision, err))
		}
	case errors.As(err, &he) && he.Code == "RepoNotFound":
		return client, fmt.Sprintf("as %s (token from %s); the repository does not exist yet and will be created", name, source), errNoRepo
	case errors.Is(err, hfhub.ErrNoRevision):
		return nil, "", pipeline.Permanent(fmt.Errorf("%s has no branch %q: create it on the Hub first, or publish to main", c.Repo, c.Revision))
	case err != nil:
		return nil, "", refusedHub(err)
	}
	return client, fmt.Sprintf("as %s (token from %s)", name, source), nil
}

// errNoRepo is a repository that does not exist (yet).
var errNoRepo = errors.New("the repository does not exist")

// refusedHub marks the Hub refusing for good as permanent (exit 2).
func refusedHub(err error) error {
	if hfhub.Refused(err) {
		return pipeline.Permanent(err)
	}
	return err
}

func (u *uploadHF) DryRun(ctx context.Context, _ *pipeline.Env) (string, error) {
	client, who, err := u.cfg.connect(ctx, false)
	if err != nil && !errors.Is(err, errNoRepo) {
		return u.cfg.Repo + ": not ready\n", err
	}
	return fmt.Sprintf("%s@%s %s: ready\n", client.URL(), u.cfg.Revision, who), nil
}

func (u *uploadHF) Open(ctx context.Context, env *pipeline.Env) error {
	client, who, err := u.cfg.connect(ctx, true)
	if err != nil {
		return err
	}
	u.client, u.dirs = client, map[string]bool{}
	u.notice = io.Discard
	if env != nil && env.Notice != nil {
		u.notice = env.Notice
		fmt.Fprintf(env.Notice, "stage %q: publishing to %s@%s %s\n", env.StageID, client.URL(), u.cfg.Revision, who)
	}
	u.wait = &outage.Waiter{Service: "the Hub", Timeout: u.cfg.UploadTimeout.Duration, Transient: hubTransient, Asked: hfhub.Asked,
		Notify: func(msg string) { fmt.Fprintf(u.notice, "stage %q: %s\n", env.StageID, msg) }}
	return nil
}

// Process sends a committed shard's content to the LFS store.
func (u *uploadHF) Process(ctx context.Context, rec *record.Record, out pipeline.Emitter) error {
	sh := rec.Shard
	if sh == nil || sh.Path == "" || sh.Name == "" {
		return out.Fail(rec, errors.New("not a shard record: upload-hf reads a writer's shards port (input = \"WRITER.shards\")"), 1)
	}
	if !strings.HasSuffix(sh.Name, ".parquet") {
		return pipeline.Permanent(fmt.Errorf("shard %s is not Parquet: the Hub's dataset viewer and load_dataset read Parquet; set format = \"parquet\" on the writer", sh.Name))
	}
	dir := cmp.Or(sh.Dir, filepath.Dir(sh.Path))
	u.mu.Lock()
	u.dirs[dir] = true
	many := len(u.dirs) > 1
	u.mu.Unlock()
	if many {
		return pipeline.Permanent(errors.New("upload-hf publishes one writer's shards (one split); give each writer its own upload-hf stage"))
	}
	up, err := u.send(ctx, sh.Path, sh.Name, sh.Bytes, sh.SHA256)
	if err != nil {
		return err
	}
	u.mu.Lock()
	if up {
		u.uploaded++
		u.upBytes += sh.Bytes
	} else {
		u.had++
	}
	u.mu.Unlock()
	return nil
}

// send puts a shard file's content in the LFS store unless it is there;
// up says it was sent.
func (u *uploadHF) send(ctx context.Context, path, name string, size int64, sha string) (up bool, err error) {
	err = u.wait.Do(ctx, "uploading "+name, func() error {
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		up, err = u.client.UploadLFS(ctx, u.cfg.Revision, &hfhub.Upload{Path: name, Size: size, SHA256: sha, LFS: true}, f)
		return err
	})
	if err != nil {
		return false, fmt.Errorf("uploading %s to %s: %w", path, u.client.URL(), refusedHub(err))
	}
	return up, nil
}

// Finish commits the shards of the manifest under their Hub names.
func (u *uploadHF) Finish(ctx context.Context, _ pipeline.Emitter) error {
	u.mu.Lock()
	var dir string
	for d := range u.dirs {
		dir = d
	}
	u.mu.Unlock()
	if dir == "" {
		return nil // no shard this start: the last one published them
	}
	m, err := filecommit.ReadManifest(dir)
	if err != nil {
		return err
	}
	p := &hubPublish{cfg: &u.cfg, client: u.client, wait: u.wait, log: u.notice}
	// Every shard of the manifest is in the store (an earlier start's too).
	for _, sh := range m.Shards {
		if _, err := u.send(ctx, filepath.Join(dir, sh.Name), sh.Name, sh.Bytes, sh.SHA256); err != nil {
			return err
		}
	}
	head, n, err := p.commitShards(ctx, m)
	if err != nil {
		return err
	}
	u.mu.Lock()
	u.published, u.commits = head, n
	u.mu.Unlock()
	return nil
}

func (u *uploadHF) Report() []figure.Figure {
	u.mu.Lock()
	defer u.mu.Unlock()
	figs := []figure.Figure{
		figure.NewCounter("shards_sent", int64(u.uploaded)),
		figure.NewCounter("shards_already_on_the_hub", int64(u.had)),
		figure.NewCounter("bytes_sent", u.upBytes),
		figure.NewCounter("commits", int64(u.commits)),
	}
	if u.published != "" {
		figs = append(figs, figure.NewState("shards_commit", short(u.published), ""))
	}
	return figs
}

// hubName is the Hub name of shard i of n: what datasets' push_to_hub
// writes (arrow_dataset.py, _push_parquet_shards_to_hub_single:
// data/{split}-{index:05d}-of-{num_shards:05d}.parquet).
func hubName(split string, i, n int) string {
	return fmt.Sprintf("data/%s-%05d-of-%05d.parquet", split, i, n)
}

// sortedShards is the manifest's shards in name order (the order rows
// were written).
func sortedShards(m *filecommit.Manifest) []filecommit.ShardInfo {
	s := slices.Clone(m.Shards)
	slices.SortFunc(s, func(a, b filecommit.ShardInfo) int { return strings.Compare(a.Name, b.Name) })
	return s
}
