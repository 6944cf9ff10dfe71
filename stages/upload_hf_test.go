package stages

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pipe-dev/pipe/internal/testrig/hubtest"
	"github.com/pipe-dev/pipe/pipeline"
	"github.com/pipe-dev/pipe/pipeline/engine"
	"github.com/pipe-dev/pipe/pipeline/output"
	"github.com/pipe-dev/pipe/pipeline/pipefile"
)

const hubToken = "hf_stagetesttoken0123456789abcdefgh"

// hubRig is a run directory whose pipeline writes prompts as Parquet
// shards and publishes them to a local Hub.
type hubRig struct {
	t    *testing.T
	hub  *hubtest.Server
	dir  string
	plan *pipeline.Plan
}

func newHubRig(t *testing.T, prompts, rowsPerShard, perCommit int, timeout string) *hubRig {
	t.Helper()
	hub := hubtest.New(t)
	hub.AddToken(hubToken, true)
	t.Setenv("HF_TOKEN", hubToken)
	r := &hubRig{t: t, hub: hub, dir: t.TempDir()}
	var b strings.Builder
	for i := range prompts {
		fmt.Fprintf(&b, "{\"id\":\"p%04d\",\"prompt\":\"Explain idea %d in a few steps, with an example.\"}\n", i, i)
	}
	r.write("p.jsonl", b.String())
	r.write("p.toml", fmt.Sprintf(`[pipeline]
name    = "hub"
run_dir = "run"

[[stage]]
id   = "prompts"
kind = "read-prompts"
path = "p.jsonl"

[[stage]]
id       = "train"
kind     = "write-arrow"
input    = "prompts"
path     = "run/train"
format   = "parquet"
max_rows = %d

[[stage]]
id               = "hub"
kind             = "upload-hf"
input            = "train.shards"
repo             = "org/regen"
endpoint         = %q
files_per_commit = %d
upload_timeout   = %q
`, rowsPerShard, hub.URL, perCommit, timeout))
	f, probs := pipefile.Load(filepath.Join(r.dir, "p.toml"), pipefile.Options{})
	if len(probs) > 0 {
		t.Fatal(probs)
	}
	plan, probs := pipeline.Build(f, pipeline.DefaultRegistry)
	if probs = append(probs, plan.CheckOutputs()...); len(probs) > 0 {
		t.Fatal(probs)
	}
	r.plan = plan
	return r
}

func (r *hubRig) write(name, content string) {
	if err := os.WriteFile(filepath.Join(r.dir, name), []byte(content), 0o644); err != nil {
		r.t.Fatal(err)
	}
}

func (r *hubRig) run(ctx context.Context) error {
	_, err := engine.Run(ctx, r.plan, engine.Options{})
	return err
}

// verify is the kind's Verify, as pipe verify and the end of a run call it.
func (r *hubRig) verify() *output.Verified {
	r.t.Helper()
	ps := r.plan.Lookup("hub")
	v, err := ps.Spec.Verify(context.Background(), ps.Config, &output.VerifyEnv{StageID: "hub", RunDir: r.plan.File.RunDir,
		Inputs: []*output.Verified{{Stage: "train", Dir: filepath.Join(r.dir, "run/train")}}})
	if err != nil {
		r.t.Fatal(err)
	}
	return v
}

// check requires the branch to hold exactly the local shards, each under
// its Hub name, with its content.
func (r *hubRig) check(shards int) {
	r.t.Helper()
	local, _ := filepath.Glob(filepath.Join(r.dir, "run/train/*.parquet"))
	if len(local) != shards {
		r.t.Fatalf("%d local shards, want %d", len(local), shards)
	}
	files := r.hub.Files("org/regen", "main")
	var data int
	for p := range files {
		if strings.HasPrefix(p, "data/") {
			data++
		}
	}
	if data != shards {
		r.t.Fatalf("%d files under data/ on the branch, want %d", data, shards)
	}
	for i, p := range local { // Glob sorts: part-00000, part-00001, ...
		want, _ := os.ReadFile(p)
		name := hubName("train", i, shards)
		if !bytes.Equal(files[name], want) {
			r.t.Fatalf("%s on the branch is not %s", name, filepath.Base(p))
		}
	}
	if v := r.verify(); !v.OK() || v.Items != shards {
		r.t.Fatalf("verify: %d items, problems %v", v.Items, v.Problems)
	}
}

// requests counts the hub's requests on route with status.
func (r *hubRig) requests(route string, status int) int {
	n := 0
	for _, q := range r.hub.Requests() {
		if q.Route == route && q.Status == status && !q.Lost {
			n++
		}
	}
	return n
}

// 30 shards in commits of at most 8: four commits, every shard under
// push_to_hub's name with its content, and Verify agrees.
func TestUploadHFPublishesShardsInSeveralCommits(t *testing.T) {
	r := newHubRig(t, 300, 10, 8, "1m")
	if err := r.run(context.Background()); err != nil {
		t.Fatal(err)
	}
	r.check(30)
	commits := r.hub.Commits("org/regen")
	if len(commits) != 4 || len(commits[0].Files) != 8 || len(commits[3].Files) != 6 {
		t.Fatalf("%d commits: %+v", len(commits), commits)
	}
	for i, c := range commits[1:] {
		if c.Parent != commits[i].Oid {
			t.Fatalf("commit %d follows %s, not the commit before it", i+2, c.Parent)
		}
	}
	for _, q := range r.hub.Requests() {
		if !strings.HasPrefix(q.Path, "/") || (q.Route != "upload" && q.Route != "upload-complete" && !q.Authorized) {
			t.Fatalf("request %+v without the token", q)
		}
	}
}

// A 429 with Retry-After, a 503 and a commit whose answer is lost are
// each survived: the same four commits, none made twice.
func TestUploadHFSurvivesRateLimitsOutagesAndALostAnswer(t *testing.T) {
	r := newHubRig(t, 300, 10, 8, "1m")
	r.hub.Fail("lfs-batch", 1, hubtest.Fault{Status: 429, RetryAfter: 1})
	r.hub.Fail("upload", 1, hubtest.Fault{Status: 503})
	r.hub.Fail("commit", 1, hubtest.LoseResponse())
	r.hub.Fail("commit", 1, hubtest.Fault{Status: 503})
	start := time.Now()
	if err := r.run(context.Background()); err != nil {
		t.Fatal(err)
	}
	r.check(30)
	if n := len(r.hub.Commits("org/regen")); n != 4 {
		t.Fatalf("%d commits, want 4: one made twice, or one lost", n)
	}
	faults := map[string]int{}
	for _, q := range r.hub.Requests() {
		if q.Fault {
			faults[fmt.Sprintf("%s %d lost=%v", q.Route, q.Status, q.Lost)]++
		}
	}
	if len(faults) != 4 {
		t.Fatalf("faults served: %v, want the four queued", faults)
	}
	if time.Since(start) < 2*time.Second {
		t.Errorf("the 429's Retry-After 1 (2 s with huggingface_hub's extra second) was not waited: %s", time.Since(start))
	}
}

// A publish stopped halfway, then the same run again: only the shards
// the store does not have are sent, each shard's content once in all.
func TestUploadHFResumeSendsOnlyWhatIsMissing(t *testing.T) {
	r := newHubRig(t, 300, 10, 8, "1m")
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		for r.requests("upload", 200) < 12 && ctx.Err() == nil {
			time.Sleep(time.Millisecond)
		}
		cancel()
	}()
	r.run(ctx)
	cancel()
	first := r.requests("upload", 200)
	if first >= 30 || len(r.hub.Commits("org/regen")) != 0 {
		t.Fatalf("the first run was not stopped halfway: %d shards sent, %d commits", first, len(r.hub.Commits("org/regen")))
	}
	if err := r.run(context.Background()); err != nil {
		t.Fatal(err)
	}
	r.check(30)
	if sent := r.requests("upload", 200); sent != 30 {
		t.Fatalf("%d shards sent in all (%d before the stop), want each of the 30 once", sent, first)
	}
	t.Logf("%d shards sent before the stop, %d after", first, 30-first)
}

// A refused token stops the run before any work, saying where the token
// came from and never what it is.
func TestUploadHFRefusedTokenStopsAtStart(t *testing.T) {
	r := newHubRig(t, 30, 10, 8, "1m")
	t.Setenv("HF_TOKEN", "hf_notthetokenatallnotthetoken00")
	err := r.run(context.Background())
	if err == nil || !pipeline.IsPermanent(err) || !strings.Contains(err.Error(), "refused the token from $HF_TOKEN") || strings.Contains(err.Error(), "hf_notthe") {
		t.Fatalf("%v (permanent %v)", err, pipeline.IsPermanent(err))
	}
	if _, err := os.Stat(filepath.Join(r.dir, "run/train")); err == nil {
		if local, _ := filepath.Glob(filepath.Join(r.dir, "run/train/*.parquet")); len(local) > 0 {
			t.Fatalf("shards were written before the token was checked: %v", local)
		}
	}
}

// pipe check's problems for a repository id, a branch or a split that
// cannot be right, at their keys.
func TestUploadHFConfigProblems(t *testing.T) {
	c := &uploadHFConfig{Repo: "regen-qwen3", Revision: "my branch", Split: "train-1", FilesPerCommit: 50}
	var got []string
	for _, err := range c.Validate() {
		got = append(got, err.Error())
	}
	all := strings.Join(got, "\n")
	for _, want := range []string{`repo: "regen-qwen3" is not a Hub repository id: want NAMESPACE/NAME`, `revision: "my branch" is not a branch name`, `split: "train-1" is not a split name`} {
		if !strings.Contains(all, want) {
			t.Errorf("problems:\n%s\nwant %q", all, want)
		}
	}
	ok := &uploadHFConfig{Repo: "my-org/regen-qwen3", Revision: "main", Split: "train", FilesPerCommit: 50}
	if errs := ok.Validate(); len(errs) != 0 {
		t.Fatal(errs)
	}
}

func TestModelRevision(t *testing.T) {
	for model, want := range map[string]string{
		"/models/hub/models--Qwen--Qwen3-32B/snapshots/9216db5781bf21249d130ec9da846c4624c16137": "`9216db5781bf21249d130ec9da846c4624c16137`",
		"Qwen/Qwen3-32B@abc1234": "`abc1234`",
		"Qwen/Qwen3-32B":         "not known",
	} {
		if got := modelRevision(model); !strings.HasPrefix(got, want) {
			t.Errorf("%s: %q, want %q", model, got, want)
		}
	}
}

// A dry run says a missing repository will be created; pipe verify of a
// set never published says nothing was.
func TestUploadHFDryRunAndVerifyBeforeAnyPublish(t *testing.T) {
	r := newHubRig(t, 30, 10, 8, "1m")
	ps := r.plan.Lookup("hub")
	st, err := ps.Spec.New.Stage(ps.Config)
	if err != nil {
		t.Fatal(err)
	}
	msg, err := st.(pipeline.DryRunner).DryRun(context.Background(), nil)
	if err != nil || !strings.Contains(msg, "will be created") {
		t.Fatalf("dry run: %q %v", msg, err)
	}
	if v := r.verify(); v.OK() || !strings.Contains(strings.Join(v.Problems, ";"), "nothing was published") {
		t.Fatalf("verify before publishing: %+v", v)
	}
	if len(r.hub.Commits("org/regen")) != 0 || r.hub.Head("org/regen", "main") != "" {
		t.Fatal("a dry run or a verify created the repository")
	}
}
