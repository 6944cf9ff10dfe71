package hubtest

import (
	"net/http"
	"strconv"
)

// tree answers GET /api/datasets/{id}/tree/{rev}[/{path}]
// (HfApi.list_repo_tree): the entries under path at rev (a branch or a
// commit oid), in path order; recursive=true lists everything below,
// directories included. expand is ignored: no lastCommit is sent.
//
// A response holds at most PageSize entries; when more follow, its header
// `Link: <url>; rel="next"` gives the next page's URL, query included, as
// utils/_pagination.paginate follows it.
func (s *Server) tree(w http.ResponseWriter, r *http.Request, at target) error {
	q := r.URL.Query()
	recursive := q.Get("recursive") == "true" || q.Get("recursive") == "True" || q.Get("recursive") == "1"
	offset := 0
	if c := q.Get("cursor"); c != "" {
		var err error
		if offset, err = strconv.Atoi(c); err != nil || offset < 0 {
			return badRequest("invalid cursor %q", c)
		}
	}
	size := s.PageSize
	if size <= 0 {
		size = 1000
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	rp, err := s.repo(at.repo)
	if err != nil {
		return err
	}
	c, err := rp.at(at.rev)
	if err != nil {
		return err
	}
	t := newTree(c.files)
	if !t.isDir(at.path) {
		return notFound("EntryNotFound", "%s does not exist on %q", at.path, at.rev)
	}
	paths := t.list(at.path, recursive)
	page := paths[min(offset, len(paths)):min(offset+size, len(paths))]
	entries := make([]map[string]any, 0, len(page))
	for _, p := range page {
		f := c.files[p]
		if f == nil {
			entries = append(entries, map[string]any{"type": "directory", "oid": t.oid(p), "size": 0, "path": p})
			continue
		}
		e := map[string]any{"type": "file", "oid": f.blobID, "size": len(f.data), "path": p}
		if f.sha256 != "" {
			e["lfs"] = map[string]any{"oid": f.sha256, "size": len(f.data), "pointerSize": len(f.pointer())}
		}
		entries = append(entries, e)
	}
	if offset+size < len(paths) {
		q.Set("cursor", strconv.Itoa(offset+size))
		w.Header().Set("Link", "<"+s.URL+r.URL.EscapedPath()+"?"+q.Encode()+`>; rel="next"`)
	}
	writeJSON(w, http.StatusOK, entries)
	return nil
}

// resolve answers GET and HEAD /datasets/{id}/resolve/{rev}/{path}
// (file_download.hf_hub_url): the file's bytes, an LFS file's content
// rather than its pointer, with X-Repo-Commit and the file's ETag.
func (s *Server) resolve(w http.ResponseWriter, _ *http.Request, at target) error {
	s.mu.Lock()
	rp, err := s.repo(at.repo)
	var c *commit
	if err == nil {
		c, err = rp.at(at.rev)
	}
	var f *file
	if err == nil {
		if f = c.files[at.path]; f == nil {
			err = notFound("EntryNotFound", "%s does not exist on %q", at.path, at.rev)
		}
	}
	s.mu.Unlock()
	if err != nil {
		return err
	}
	etag := f.blobID
	if f.sha256 != "" {
		etag = f.sha256
	}
	w.Header().Set("X-Repo-Commit", c.info.Oid)
	w.Header().Set("ETag", `"`+etag+`"`)
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Length", strconv.Itoa(len(f.data)))
	w.WriteHeader(http.StatusOK)
	w.Write(f.data) // files are never changed once committed: no lock needed
	return nil
}
