package hfhub

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/pipe-dev/pipe/internal/testrig/hubtest"
)

const secret = "hf_testtokenabcdefghijklmnop0123456789"

func content(n int, seed uint64) ([]byte, string) {
	b := make([]byte, n)
	r := rand.New(rand.NewPCG(seed, 1))
	for i := range b {
		b[i] = byte(r.IntN(256))
	}
	sum := sha256.Sum256(b)
	return b, hex.EncodeToString(sum[:])
}

func newClient(t *testing.T, hub *hubtest.Server, repo, token string) *Client {
	t.Helper()
	c, err := New(hub.URL, repo, token, nil)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// A refused token is a refusal (exit 2 for the stage), and its message
// holds no token.
func TestWhoamiRefusesABadToken(t *testing.T) {
	hub := hubtest.New(t)
	hub.AddToken(secret, true)
	ctx := context.Background()
	_, _, err := newClient(t, hub, "org/ds", "hf_wrongwrongwrongwrongwrong").Whoami(ctx)
	if !Refused(err) || Transient(err) || strings.Contains(err.Error(), "hf_wrong") {
		t.Fatalf("bad token: %v (refused %v)", err, Refused(err))
	}
	name, role, err := newClient(t, hub, "org/ds", secret).Whoami(ctx)
	if err != nil || name != hubtest.User || role != "write" {
		t.Fatalf("good token: %q %q %v", name, role, err)
	}
}

// The whole exchange: create, preupload, LFS (basic, then already
// stored), a commit naming its parent, a second one on a stale parent
// refused, the tree over several pages, multipart.
func TestPublishExchange(t *testing.T) {
	hub := hubtest.New(t)
	hub.AddToken(secret, true)
	hub.PageSize = 3
	hub.MultipartThreshold = 6 << 20
	hub.PartSize = 5 << 20
	ctx := context.Background()
	c := newClient(t, hub, "org/ds", secret)
	if created, err := c.CreateRepo(ctx, true); err != nil || !created {
		t.Fatalf("create: %v %v", created, err)
	}
	if created, err := c.CreateRepo(ctx, true); err != nil || created {
		t.Fatalf("create again: %v %v", created, err)
	}
	head, err := c.Head(ctx, "main")
	if err != nil || len(head) != 40 {
		t.Fatalf("head: %q %v", head, err)
	}
	if _, err := c.Head(ctx, "nope"); !errors.Is(err, ErrNoRevision) {
		t.Fatalf("missing branch: %v", err)
	}

	var files []*Upload
	for i, size := range []int{1000, 2000, 7 << 20, 300, 400} {
		b, sum := content(size, uint64(i))
		f := &Upload{Path: "data/train-0000" + string(rune('0'+i)) + "-of-00005.parquet", Size: int64(size), Sample: b[:min(512, len(b))], SHA256: sum}
		files = append(files, f)
		if err := c.Preupload(ctx, "main", []*Upload{f}); err != nil || !f.LFS {
			t.Fatalf("preupload %s: lfs %v %v", f.Path, f.LFS, err)
		}
		up, err := c.UploadLFS(ctx, "main", f, bytes.NewReader(b))
		if err != nil || !up {
			t.Fatalf("upload %s: %v %v", f.Path, up, err)
		}
		if up, err := c.UploadLFS(ctx, "main", f, bytes.NewReader(b)); err != nil || up {
			t.Fatalf("upload %s again: sent %v, %v; want it found in the store", f.Path, up, err)
		}
	}
	readme := []byte("---\nlicense: other\n---\n# ds\n")
	card := &Upload{Path: "README.md", Size: int64(len(readme)), Sample: readme, Content: readme}
	if err := c.Preupload(ctx, "main", []*Upload{card}); err != nil || card.LFS {
		t.Fatalf("preupload README: lfs %v %v", card.LFS, err)
	}
	oid, err := c.Commit(ctx, "main", Commit{Summary: "shards", Parent: head, Files: append(files, card)})
	if err != nil || oid == head {
		t.Fatalf("commit: %q %v", oid, err)
	}
	_, err = c.Commit(ctx, "main", Commit{Summary: "again", Parent: head, Files: files})
	var he *Error
	if !errors.As(err, &he) || he.Status != 412 {
		t.Fatalf("commit on a stale parent: %v, want 412", err)
	}
	tree, err := c.Tree(ctx, oid)
	if err != nil || len(tree) != 7 { // 5 shards, README, .gitattributes
		t.Fatalf("tree over pages of 3: %d entries, %v", len(tree), err)
	}
	for _, e := range tree {
		if strings.HasPrefix(e.Path, "data/") && (e.SHA256() == "" || e.LFS.Size != e.Size) {
			t.Errorf("%s: %+v", e.Path, e)
		}
	}
	got := hub.Files("org/ds", "main")
	if !bytes.Equal(got["README.md"], readme) || len(got) != 7 {
		t.Fatalf("files: %d", len(got))
	}
	big, _ := content(7<<20, 2)
	if !bytes.Equal(got["data/train-00002-of-00005.parquet"], big) {
		t.Fatal("the multipart upload's content differs")
	}
}

// A lost answer leaves the commit made; the client says it failed, and
// the branch says it was made. A 429 asks for the wait it names.
func TestLostCommitAnswerAndRateLimit(t *testing.T) {
	hub := hubtest.New(t)
	hub.AddToken(secret, true)
	ctx := context.Background()
	c := newClient(t, hub, "org/ds", secret)
	if _, err := c.CreateRepo(ctx, false); err != nil {
		t.Fatal(err)
	}
	head, _ := c.Head(ctx, "main")
	hub.Fail("commit", 1, hubtest.LoseResponse())
	readme := []byte("# x\n")
	_, err := c.Commit(ctx, "main", Commit{Summary: "card", Parent: head, Files: []*Upload{{Path: "README.md", Size: 4, Content: readme}}})
	if err == nil || !Transient(err) {
		t.Fatalf("lost answer: %v, want an error that can pass", err)
	}
	if now, _ := c.Head(ctx, "main"); now == head || len(hub.Commits("org/ds")) != 1 {
		t.Fatalf("the commit was not made: head %s", now)
	}
	hub.Fail("tree", 1, hubtest.Fault{Status: 429, RetryAfter: 3})
	_, err = c.Tree(ctx, "main")
	if !Transient(err) || Asked(err) != 4*time.Second || Refused(err) {
		t.Fatalf("429: %v, asked %v", err, Asked(err))
	}
	hub.Fail("tree", 1, hubtest.Fault{Status: 429, RetryAfter: 3, RateLimitReset: 55})
	if _, err = c.Tree(ctx, "main"); Asked(err) != 56*time.Second {
		t.Fatalf("429 with RateLimit: asked %v", Asked(err))
	}
	hub.Fail("tree", 1, hubtest.Fault{Status: 503})
	if _, err = c.Tree(ctx, "main"); !Transient(err) || Asked(err) != 0 {
		t.Fatalf("503: %v", err)
	}
}

func TestCheckRepoAndRevision(t *testing.T) {
	for _, ok := range []string{"org/name", "a/b", "my-org/regen.qwen3_v2"} {
		if err := CheckRepo(ok); err != nil {
			t.Errorf("%s: %v", ok, err)
		}
	}
	for _, bad := range []string{"name", "org/name/x", "org/-x", "org/x.", "org/a--b", "org/a..b", "org/", "/x", "org/na me"} {
		if err := CheckRepo(bad); err == nil {
			t.Errorf("%s: no problem", bad)
		}
	}
	for _, bad := range []string{"", "a b", "a..b", "x~1", "/main", "main/", "x.lock"} {
		if err := CheckRevision(bad); err == nil {
			t.Errorf("revision %q: no problem", bad)
		}
	}
	if err := CheckRevision("release/v1"); err != nil {
		t.Error(err)
	}
}
