package stages

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/pipe-dev/pipe/internal/outage"
	"github.com/pipe-dev/pipe/pipeline/filecommit"
	"github.com/pipe-dev/pipe/stages/hfhub"
)

// hubPublish commits files to the branch, each commit following the one
// before, none made twice.
type hubPublish struct {
	cfg    *uploadHFConfig
	client *hfhub.Client
	wait   *outage.Waiter
	log    io.Writer
}

// commitShards commits the manifest's shards under their Hub names, in
// commits of at most files_per_commit, skipping those the branch holds
// already with the same content, and deletes files of an earlier publish
// of the split that are not among them. It returns the branch's head
// after and the commits made.
func (p *hubPublish) commitShards(ctx context.Context, m *filecommit.Manifest) (head string, commits int, err error) {
	head, have, err := p.branch(ctx)
	if err != nil {
		return "", 0, err
	}
	shards := sortedShards(m)
	want := map[string]bool{}
	var todo []*hfhub.Upload
	for i, sh := range shards {
		name := hubName(p.cfg.Split, i, len(shards))
		want[name] = true
		if e, ok := have[name]; ok && e.SHA256() == sh.SHA256 && e.Size == sh.Bytes {
			continue
		}
		todo = append(todo, &hfhub.Upload{Path: name, Size: sh.Bytes, SHA256: sh.SHA256, LFS: true})
	}
	var stale []string
	for path := range have {
		if strings.HasPrefix(path, "data/"+p.cfg.Split+"-") && !want[path] {
			stale = append(stale, path)
		}
	}
	per := p.cfg.FilesPerCommit
	parts := (len(todo) + per - 1) / per
	for k := 0; k < parts; k++ {
		batch := todo[k*per : min(len(todo), (k+1)*per)]
		cm := hfhub.Commit{Summary: fmt.Sprintf("pipe: %d shards of %s (part %d of %d)", len(batch), p.cfg.Split, k+1, parts), Parent: head, Files: batch}
		if k == parts-1 {
			cm.Delete = stale // the old ones go with the last of the new
			stale = nil
		}
		if head, err = p.commit(ctx, cm); err != nil {
			return "", commits, err
		}
		commits++
	}
	if len(stale) > 0 {
		if head, err = p.commit(ctx, hfhub.Commit{Summary: "pipe: remove shards of an earlier publish", Parent: head, Delete: stale}); err != nil {
			return "", commits, err
		}
		commits++
	}
	return head, commits, nil
}

// branch is the branch's head and its files by path, waiting out outages.
func (p *hubPublish) branch(ctx context.Context) (string, map[string]hfhub.Entry, error) {
	var head string
	var files []hfhub.Entry
	err := p.wait.Do(ctx, "reading "+p.client.URL(), func() (err error) {
		if head, err = p.client.Head(ctx, p.cfg.Revision); err != nil {
			return err
		}
		files, err = p.client.Tree(ctx, head)
		return err
	})
	if err != nil {
		return "", nil, refusedHub(err)
	}
	have := make(map[string]hfhub.Entry, len(files))
	for _, e := range files {
		have[e.Path] = e
	}
	return head, have, nil
}

// commit makes cm on the branch and returns the new head. A commit is
// never made twice: each names its parent, so the Hub refuses a second
// one (412). When the answer is lost or refused for a reason that can
// pass, the branch is read: moved, and holding cm's files and none of its
// deleted paths, the commit was made; moved by someone else, cm is made
// on top of that; not moved, it is sent again after the wait.
func (p *hubPublish) commit(ctx context.Context, cm hfhub.Commit) (string, error) {
	var head string
	err := p.wait.Do(ctx, "commit "+cm.Summary, func() error {
		oid, err := p.client.Commit(ctx, p.cfg.Revision, cm)
		if err == nil {
			head = oid
			return nil
		}
		var he *hfhub.Error
		conflict := errors.As(err, &he) && (he.Status == http.StatusPreconditionFailed || he.Status == http.StatusConflict)
		if !conflict && !hfhub.Transient(err) {
			return err
		}
		now, have, berr := p.branch(ctx)
		switch {
		case berr != nil:
			return berr
		case now != cm.Parent && holds(have, cm):
			fmt.Fprintf(p.log, "the Hub's answer to %q was lost; the branch holds it (commit %s)\n", cm.Summary, short(now))
			head = now
			return nil
		case now != cm.Parent:
			cm.Parent = now // another commit came first: ours goes on top
			return &branchMoved{err}
		}
		return err
	})
	if err != nil {
		return "", refusedHub(err)
	}
	return head, nil
}

// holds reports whether the files have what cm commits: its files with
// their content, none of its deleted paths.
func holds(have map[string]hfhub.Entry, cm hfhub.Commit) bool {
	for _, f := range cm.Files {
		e, ok := have[f.Path]
		if !ok || (f.LFS && e.SHA256() != f.SHA256) || e.Size != f.Size {
			return false
		}
	}
	for _, d := range cm.Delete {
		if _, ok := have[d]; ok {
			return false
		}
	}
	return true
}

// branchMoved is a commit refused because another came first: it is
// made again on top of that one, at once.
type branchMoved struct{ err error }

func (b *branchMoved) Error() string { return "the branch moved: " + b.err.Error() }
func (b *branchMoved) Unwrap() error { return b.err }

// hubTransient is what the Hub's waiter waits out: what can pass by
// itself, and a commit to make again on a moved branch.
func hubTransient(err error) bool {
	var b *branchMoved
	return hfhub.Transient(err) || errors.As(err, &b)
}

func short(sha string) string { return sha[:min(len(sha), 12)] }
