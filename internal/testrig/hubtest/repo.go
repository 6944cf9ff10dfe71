package hubtest

import (
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// A repo is one dataset repo: its branches, its whole history and its LFS
// store. The store is per repo: an object uploaded to one repo is unknown
// to the others, as the LFS batch endpoint of each repo answers.
type repo struct {
	id       string // "ns/name"
	private  bool
	branches map[string]string // name → head commit oid
	commits  map[string]*commit
	history  []*commit                 // in the order made; history[0] is the initial commit
	lfs      map[string][]byte         // sha256 hex → content
	parts    map[string]map[int][]byte // oid → part number → bytes, of an unfinished multipart upload
}

// A commit is one commit and the whole tree after it. Trees share files:
// a file is never changed once committed.
type commit struct {
	info  Commit
	files map[string]*file // path → file
}

// Commit is a commit as the tests see it.
type Commit struct {
	Oid     string // 40 hex digits
	Parent  string // the commit this one follows
	Summary string
	// Description is the commit's description; "" when none was sent.
	Description string
	// Files are the paths added or replaced, in the order sent.
	Files []string
	// Deleted are the paths of deletedFile and deletedFolder lines, in
	// the order sent.
	Deleted []string
}

// A file is one path's content. An LFS file's git blob is its pointer.
type file struct {
	data   []byte
	sha256 string // hex; "" for a regular file
	blobID string // git blob oid: of data, or of the pointer
}

func regularFile(data []byte) *file {
	return &file{data: data, blobID: gitHash("blob", data)}
}

func lfsFile(oid string, data []byte) *file {
	f := &file{data: data, sha256: oid}
	f.blobID = gitHash("blob", f.pointer())
	return f
}

// pointer is the LFS pointer git stores in place of an LFS file's content
// (the Hub's pointerSize is its length).
func (f *file) pointer() []byte {
	return fmt.Appendf(nil, "version https://git-lfs.github.com/spec/v1\noid sha256:%s\nsize %d\n",
		f.sha256, len(f.data))
}

// gitattributes is the new repo's .gitattributes: the Hub's default sends
// these (and more) extensions to LFS.
const gitattributes = `*.arrow filter=lfs diff=lfs merge=lfs -text
*.parquet filter=lfs diff=lfs merge=lfs -text
*.zst filter=lfs diff=lfs merge=lfs -text
`

// newRepo is a repo with branch main at an initial commit holding
// .gitattributes, made at time clock.
func newRepo(id string, private bool, clock int64) *repo {
	r := &repo{id: id, private: private, branches: map[string]string{},
		commits: map[string]*commit{}, lfs: map[string][]byte{}, parts: map[string]map[int][]byte{}}
	files := map[string]*file{".gitattributes": regularFile([]byte(gitattributes))}
	r.add("main", &commit{info: Commit{Summary: "initial commit", Files: []string{".gitattributes"}}, files: files}, clock)
	return r
}

// add gives c its oid, as git would from its tree, parent, time and
// message, and makes it the head of branch.
func (r *repo) add(branch string, c *commit, clock int64) {
	var b strings.Builder
	fmt.Fprintf(&b, "tree %s\n", newTree(c.files).oid(""))
	if c.info.Parent != "" {
		fmt.Fprintf(&b, "parent %s\n", c.info.Parent)
	}
	fmt.Fprintf(&b, "author hubtest <hubtest@localhost> %d +0000\n", clock)
	fmt.Fprintf(&b, "committer hubtest <hubtest@localhost> %d +0000\n\n%s\n", clock, c.info.Summary)
	if c.info.Description != "" {
		fmt.Fprintf(&b, "\n%s\n", c.info.Description)
	}
	c.info.Oid = gitHash("commit", []byte(b.String()))
	r.commits[c.info.Oid] = c
	r.history = append(r.history, c)
	r.branches[branch] = c.info.Oid
}

// at is the commit rev names: a branch, or a commit's full oid.
func (r *repo) at(rev string) (*commit, error) {
	if oid, ok := r.branches[rev]; ok {
		return r.commits[oid], nil
	}
	if c, ok := r.commits[rev]; ok {
		return c, nil
	}
	return nil, notFound("RevisionNotFound", "Invalid rev id: %s", rev)
}

// gitHash is the oid git gives an object of kind ("blob", "tree",
// "commit") with body.
func gitHash(kind string, body []byte) string {
	h := sha1.New()
	fmt.Fprintf(h, "%s %d\x00", kind, len(body))
	h.Write(body)
	return hex.EncodeToString(h.Sum(nil))
}

func sha256Hex(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}

// A tree indexes a commit's files by directory, for listings and oids.
type tree struct {
	files    map[string]*file
	children map[string][]string // dir ("" for the root) → its children's full paths
	oids     map[string]string   // dir → git tree oid, once computed
}

func newTree(files map[string]*file) *tree {
	t := &tree{files: files, children: map[string][]string{"": nil}, oids: map[string]string{}}
	for _, p := range slices.Sorted(maps.Keys(files)) {
		for child := p; ; {
			dir := parentDir(child)
			_, seen := t.children[dir]
			t.children[dir] = append(t.children[dir], child)
			if seen || dir == "" {
				break
			}
			child = dir
		}
	}
	return t
}

func parentDir(p string) string {
	i := strings.LastIndexByte(p, '/')
	if i < 0 {
		return ""
	}
	return p[:i]
}

func (t *tree) isDir(p string) bool {
	_, ok := t.children[p]
	return ok
}

// oid is the git tree oid of dir.
func (t *tree) oid(dir string) string {
	if oid, ok := t.oids[dir]; ok {
		return oid
	}
	var body []byte
	for _, p := range t.sorted(dir) {
		name := p[strings.LastIndexByte(p, '/')+1:]
		mode, oid := "100644", ""
		if t.isDir(p) {
			mode, oid = "40000", t.oid(p)
		} else {
			oid = t.files[p].blobID
		}
		raw, _ := hex.DecodeString(oid)
		body = append(fmt.Appendf(body, "%s %s\x00", mode, name), raw...)
	}
	t.oids[dir] = gitHash("tree", body)
	return t.oids[dir]
}

// list is what lies in dir: its children or, with recursive, everything
// below it, directories included; in the order of git ls-tree -r -t:
// depth first, names sorted as git sorts a tree's entries.
func (t *tree) list(dir string, recursive bool) []string {
	var out []string
	var walk func(string)
	walk = func(d string) {
		for _, p := range t.sorted(d) {
			out = append(out, p)
			if recursive && t.isDir(p) {
				walk(p)
			}
		}
	}
	walk(dir)
	return out
}

// sorted returns dir's children in git's order: by name, a directory's
// name compared as if it ended in "/" (so "data-x" comes before "data/").
func (t *tree) sorted(dir string) []string {
	key := func(p string) string {
		if t.isDir(p) {
			return p + "/"
		}
		return p
	}
	return slices.SortedFunc(slices.Values(t.children[dir]), func(a, b string) int {
		return strings.Compare(key(a), key(b))
	})
}
