package hubtest

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// Head returns the oid of branch's head in repo ("ns/name"), or "" when
// either does not exist.
func (s *Server) Head(repo, branch string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if rp := s.repos[repo]; rp != nil {
		return rp.branches[branch]
	}
	return ""
}

// Commits returns the commits made in repo through the commit endpoint,
// oldest first; the initial commit the repo was created with is not one of
// them. It returns nil for an unknown repo.
func (s *Server) Commits(repo string) []Commit {
	s.mu.Lock()
	defer s.mu.Unlock()
	rp := s.repos[repo]
	if rp == nil {
		return nil
	}
	var out []Commit
	for _, c := range rp.history[1:] {
		info := c.info
		info.Files, info.Deleted = slices.Clone(info.Files), slices.Clone(info.Deleted)
		out = append(out, info)
	}
	return out
}

// Files returns every file of repo as of rev (a branch or a commit oid),
// path → content, an LFS file's content rather than its pointer. It
// returns nil for an unknown repo or revision. The slices are copies.
func (s *Server) Files(repo, rev string) map[string][]byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	rp := s.repos[repo]
	if rp == nil {
		return nil
	}
	c, err := rp.at(rev)
	if err != nil {
		return nil
	}
	out := make(map[string][]byte, len(c.files))
	for p, f := range c.files {
		out[p] = bytes.Clone(f.data)
	}
	return out
}

// Download writes repo's files as of rev into dir, as a clone with LFS
// files pulled would lay them out. An unknown repo or revision fails t.
func (s *Server) Download(t testing.TB, repo, rev, dir string) {
	t.Helper()
	files := s.Files(repo, rev)
	if files == nil {
		t.Fatalf("hubtest: Download: no revision %q of repo %q", rev, repo)
	}
	for p, data := range files {
		dst := filepath.Join(dir, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(dst, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
