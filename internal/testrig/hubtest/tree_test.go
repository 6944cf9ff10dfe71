package hubtest

import (
	"strings"
	"testing"
)

type treeEntry struct {
	Type string
	Oid  string
	Size int
	Path string
	Lfs  *struct {
		Oid         string
		Size        int
		PointerSize int
	}
}

// listTree lists url page by page, following each Link rel="next" as
// utils/_pagination.paginate does; it returns the entries and the number
// of pages.
func (h hub) listTree(url string) ([]treeEntry, int) {
	h.t.Helper()
	var all []treeEntry
	pages := 0
	for url != "" {
		r := h.send("GET", url, writeToken, nil).want(h.t, 200)
		var page []treeEntry
		r.decode(h.t, &page)
		all = append(all, page...)
		pages++
		url = ""
		if link := r.header.Get("Link"); link != "" {
			next, ok := strings.CutSuffix(link, `>; rel="next"`)
			if !ok || !strings.HasPrefix(next, "<") {
				h.t.Fatalf("Link %q", link)
			}
			url = next[1:]
		}
	}
	return all, pages
}

func paths(entries []treeEntry) string {
	var ps []string
	for _, e := range entries {
		ps = append(ps, e.Path)
	}
	return strings.Join(ps, " ")
}

// The oids are git's: `git ls-tree -r -t` of the same files says
//
//	100644 blob 587be6b4c3f93f93c489c0111bba5596147a26cb	data-x
//	040000 tree 972b5b8f25e6b64dc9a3033af8cb531ff783879a	data
//	100644 blob 78981922613b2afb6025042ff6bd878ac1994e85	data/a.txt
//	040000 tree f8f7aefc2900a3d737cea9eee45729fd55761e1a	data/sub
//	100644 blob 61780798228d17af2d34fce4cfbdf35556832472	data/sub/b.txt
//	100644 blob 4286f428e3b19fe84de503916ce0e7dc8deefea1	readme
func TestTree(t *testing.T) {
	h := newHub(t)
	h.PageSize = 2
	repo := h.createRepo("ds")
	h.commit(repo, "", deleteOp("deletedFile", ".gitattributes"), fileOp("data/a.txt", []byte("a\n")),
		fileOp("data/sub/b.txt", []byte("b\n")), fileOp("data-x", []byte("x\n")), fileOp("readme", []byte("r\n"))).want(t, 200)
	first := h.Head(repo, "main")
	base := "/api/datasets/" + repo + "/tree/"

	all, pages := h.listTree(base + "main?recursive=true&expand=false")
	if got, want := paths(all), "data-x data data/a.txt data/sub data/sub/b.txt readme"; got != want {
		t.Errorf("recursive listing %q, want %q", got, want)
	}
	if pages != 3 {
		t.Errorf("%d pages of 2 for 6 entries, want 3", pages)
	}
	wantOid := map[string]string{
		"data-x":         "587be6b4c3f93f93c489c0111bba5596147a26cb",
		"data":           "972b5b8f25e6b64dc9a3033af8cb531ff783879a",
		"data/a.txt":     "78981922613b2afb6025042ff6bd878ac1994e85",
		"data/sub":       "f8f7aefc2900a3d737cea9eee45729fd55761e1a",
		"data/sub/b.txt": "61780798228d17af2d34fce4cfbdf35556832472",
		"readme":         "4286f428e3b19fe84de503916ce0e7dc8deefea1",
	}
	for _, e := range all {
		if e.Oid != wantOid[e.Path] {
			t.Errorf("%s: oid %s, want %s", e.Path, e.Oid, wantOid[e.Path])
		}
		dir := e.Path == "data" || e.Path == "data/sub"
		if dir && (e.Type != "directory" || e.Size != 0) || !dir && (e.Type != "file" || e.Size != 2) || e.Lfs != nil {
			t.Errorf("entry %+v", e)
		}
	}

	for url, want := range map[string]string{
		base + "main":                                             "data-x data readme",
		base + "main?recursive=false":                             "data-x data readme",
		base + "main/data":                                        "data/a.txt data/sub",
		base + "main/data%2Fsub?recursive=true":                   "data/sub/b.txt",
		base + "main/data/sub":                                    "data/sub/b.txt",
		base + first + "/data?recursive=true":                     "data/a.txt data/sub data/sub/b.txt",
		"/api/datasets/" + repo + "/tree/main?x=1&recursive=True": "data-x data data/a.txt data/sub data/sub/b.txt readme",
	} {
		if got, _ := h.listTree(url); paths(got) != want {
			t.Errorf("%s: %q, want %q", url, paths(got), want)
		}
	}

	// A later commit leaves the tree at the first one as it was.
	lfsData := []byte("PAR1....PAR1")
	obj := h.batch(repo, lfsData)[0]
	h.send("PUT", obj.Actions.Upload.Href, "", lfsData).want(t, 200)
	h.commit(repo, "", lfsOp("data/t.parquet", lfsData), deleteOp("deletedFile", "readme")).want(t, 200)
	if got, _ := h.listTree(base + first); paths(got) != "data-x data readme" {
		t.Errorf("tree at %s after a commit: %q", first, paths(got))
	}
	got, _ := h.listTree(base + "main/data")
	if paths(got) != "data/a.txt data/sub data/t.parquet" {
		t.Fatalf("tree of data: %q", paths(got))
	}
	if e := got[2]; e.Lfs == nil || e.Lfs.Oid != sha256Hex(lfsData) || e.Lfs.Size != len(lfsData) ||
		e.Size != len(lfsData) || e.Lfs.PointerSize != 127 || e.Oid == sha256Hex(lfsData)[:40] {
		t.Errorf("LFS entry %+v, lfs %+v", e, e.Lfs)
	}

	for url, code := range map[string]string{
		base + "main/nope":             "EntryNotFound",
		base + "main/data-x":           "EntryNotFound",
		base + "dev":                   "RevisionNotFound",
		base + strings.Repeat("0", 40): "RevisionNotFound",
	} {
		r := h.send("GET", url, writeToken, nil).want(t, 404)
		if c := r.header.Get("X-Error-Code"); c != code {
			t.Errorf("%s: X-Error-Code %q, want %q", url, c, code)
		}
	}
	for _, url := range []string{base + "main/..", base + "main/data/..%2F..", base + "main//data", base + "main?cursor=-1"} {
		h.send("GET", url, writeToken, nil).want(t, 400)
	}
}
