package hubtest

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"maps"
	"mime"
	"net/http"
	"strings"
)

// An operation is one line after a commit's header.
type operation struct {
	key  string // file, lfsFile, deletedFile, deletedFolder
	path string
	data []byte // file: the content
	oid  string // lfsFile
	size *int64 // lfsFile; absent when copying an LFS file
}

// commit answers POST /api/datasets/{id}/commit/{rev} (HfApi.create_commit,
// _commit_api._send_commit): an NDJSON body as
// _commit_api._prepare_commit_payload writes it, a header line and then one
// line per operation. The commit applies whole or not at all:
//
//   - parentCommit other than the branch head: 412;
//   - an lfsFile whose object this repo's LFS store lacks: 422;
//   - deleting a path that is not there: 404 EntryNotFound;
//   - more operations than MaxFilesPerCommit, a bad line or path, a file
//     where the tree has a directory or the reverse: 400.
func (s *Server) commit(w http.ResponseWriter, r *http.Request, at target) error {
	if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt != "application/x-ndjson" {
		return badRequest("Content-Type %q: want application/x-ndjson", mt)
	}
	if r.URL.Query().Get("create_pr") == "1" {
		return badRequest("hubtest does not open pull requests (create_pr)")
	}
	info, ops, err := readCommit(r.Body)
	if err != nil {
		return err
	}
	if limit := s.MaxFilesPerCommit; limit > 0 && len(ops) > limit {
		return badRequest("too many operations in one commit: %d, at most %d", len(ops), limit)
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	rp, err := s.repo(at.repo)
	if err != nil {
		return err
	}
	head, ok := rp.branches[at.rev]
	if !ok {
		return notFound("RevisionNotFound", "Invalid rev id: %s (commits go to a branch)", at.rev)
	}
	if info.Parent != "" && info.Parent != head {
		return &hubError{status: http.StatusPreconditionFailed,
			msg: "A commit has happened since. Please refresh and try again."}
	}
	files, err := apply(rp, rp.commits[head].files, ops)
	if err != nil {
		return err
	}
	for _, op := range ops {
		if op.key == "deletedFile" || op.key == "deletedFolder" {
			info.Deleted = append(info.Deleted, op.path)
		} else {
			info.Files = append(info.Files, op.path)
		}
	}
	info.Parent = head
	s.clock++
	c := &commit{info: info, files: files}
	rp.add(at.rev, c, s.clock)
	writeJSON(w, http.StatusOK, map[string]any{
		"commitUrl":      s.URL + "/datasets/" + rp.id + "/commit/" + c.info.Oid,
		"commitOid":      c.info.Oid,
		"pullRequestUrl": nil,
	})
	return nil
}

// readCommit decodes an NDJSON commit body: the header's fields (Parent is
// the parentCommit sent, "" for none) and the operations.
func readCommit(body io.Reader) (Commit, []operation, error) {
	var info Commit
	var ops []operation
	dec := json.NewDecoder(body)
	for i := 0; ; i++ {
		var line struct {
			Key   string          `json:"key"`
			Value json.RawMessage `json:"value"`
		}
		if err := dec.Decode(&line); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return info, nil, badRequest("commit line %d: %v", i+1, err)
		}
		if (i == 0) != (line.Key == "header") {
			return info, nil, badRequest("commit line %d: key %q: the header comes first, once", i+1, line.Key)
		}
		var v struct {
			Summary      string `json:"summary"`
			Description  string `json:"description"`
			ParentCommit string `json:"parentCommit"`
			Path         string `json:"path"`
			Content      string `json:"content"`
			Encoding     string `json:"encoding"`
			Algo         string `json:"algo"`
			Oid          string `json:"oid"`
			Size         *int64 `json:"size"`
		}
		if err := json.Unmarshal(line.Value, &v); err != nil {
			return info, nil, badRequest("commit line %d: %v", i+1, err)
		}
		if line.Key == "header" {
			if strings.TrimSpace(v.Summary) == "" {
				return info, nil, badRequest("commit header: empty summary")
			}
			info = Commit{Summary: v.Summary, Description: v.Description, Parent: v.ParentCommit}
			continue
		}
		op := operation{key: line.Key, path: v.Path}
		if line.Key == "deletedFolder" {
			op.path = strings.TrimSuffix(op.path, "/") // CommitOperationDelete marks a folder with a trailing "/"
		}
		if err := checkPath(op.path); err != nil {
			return info, nil, err
		}
		switch line.Key {
		case "file":
			if v.Encoding != "base64" {
				return info, nil, badRequest("file %q: encoding %q: want base64", v.Path, v.Encoding)
			}
			data, err := base64.StdEncoding.DecodeString(v.Content)
			if err != nil {
				return info, nil, badRequest("file %q: content is not base64: %v", v.Path, err)
			}
			op.data = data
		case "lfsFile":
			if v.Algo != "sha256" || !validOid(v.Oid) {
				return info, nil, badRequest("lfsFile %q: want algo sha256 and a 64-hex-digit oid", v.Path)
			}
			op.oid, op.size = v.Oid, v.Size
		case "deletedFile", "deletedFolder":
		default:
			return info, nil, badRequest("commit line %d: unknown key %q", i+1, line.Key)
		}
		ops = append(ops, op)
	}
	if info.Summary == "" {
		return info, nil, badRequest("empty commit body: no header")
	}
	return info, ops, nil
}

// apply returns base with ops applied in order; base is left as it was.
func apply(rp *repo, base map[string]*file, ops []operation) (map[string]*file, error) {
	files := maps.Clone(base)
	for _, op := range ops {
		switch op.key {
		case "file":
			files[op.path] = regularFile(op.data)
		case "lfsFile":
			data, ok := rp.lfs[op.oid]
			if !ok || op.size != nil && *op.size != int64(len(data)) {
				return nil, &hubError{status: http.StatusUnprocessableEntity,
					msg: "lfsFile " + op.path + ": object " + op.oid + " of that size is not in this repo's LFS storage; upload it first"}
			}
			files[op.path] = lfsFile(op.oid, data)
		case "deletedFile":
			if _, ok := files[op.path]; !ok {
				return nil, notFound("EntryNotFound", "deletedFile %s: no such file", op.path)
			}
			delete(files, op.path)
		case "deletedFolder":
			n := len(files)
			maps.DeleteFunc(files, func(p string, _ *file) bool { return strings.HasPrefix(p, op.path+"/") })
			if len(files) == n {
				return nil, notFound("EntryNotFound", "deletedFolder %s: no such folder", op.path)
			}
		}
	}
	for p := range files {
		for d := parentDir(p); d != ""; d = parentDir(d) {
			if files[d] != nil {
				return nil, badRequest("%s is a file and %s would lie under it", d, p)
			}
		}
	}
	return files, nil
}

// validOid says oid is a sha256 in lowercase hex, as LFS oids are.
func validOid(oid string) bool {
	if len(oid) != 64 {
		return false
	}
	for _, c := range oid {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}
