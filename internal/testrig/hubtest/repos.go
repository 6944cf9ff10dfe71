package hubtest

import (
	"bytes"
	"encoding/base64"
	"net/http"
	"strings"
)

// repo returns the repo id names; the caller holds s.mu.
func (s *Server) repo(id string) (*repo, error) {
	if r, ok := s.repos[id]; ok {
		return r, nil
	}
	return nil, notFound("RepoNotFound", "Repository not found")
}

// whoami answers GET /api/whoami-v2 (HfApi.whoami; utils/_auth and
// _login read name and auth.accessToken.role).
func (s *Server) whoami(w http.ResponseWriter, r *http.Request, _ target) error {
	writable, _ := s.token(r)
	role := "read"
	if writable {
		role = "write"
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"type": "user",
		"name": User,
		"orgs": []any{},
		"auth": map[string]any{
			"type":        "access_token",
			"accessToken": map[string]any{"displayName": "test", "role": role},
		},
	})
	return nil
}

// createRepo answers POST /api/repos/create (HfApi.create_repo). It takes
// visibility, or the older private flag; a repo is public by default. An
// existing repo answers 409, which create_repo(exist_ok=True) accepts.
func (s *Server) createRepo(w http.ResponseWriter, r *http.Request, _ target) error {
	var req struct {
		Name         string  `json:"name"`
		Organization *string `json:"organization"`
		Type         string  `json:"type"`
		Visibility   string  `json:"visibility"`
		Private      *bool   `json:"private"`
	}
	if err := readJSON(r, &req); err != nil {
		return err
	}
	if req.Type != "dataset" {
		return badRequest("hubtest serves dataset repos only, not type %q", req.Type)
	}
	ns := User
	if req.Organization != nil && *req.Organization != "" {
		ns = *req.Organization
	}
	id := ns + "/" + req.Name
	if err := checkRepoID(id); err != nil {
		return err
	}
	private := req.Private != nil && *req.Private
	switch req.Visibility {
	case "":
	case "private", "public":
		private = req.Visibility == "private"
	default:
		return badRequest("invalid visibility %q: want public or private", req.Visibility)
	}
	url := s.URL + "/datasets/" + id

	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.repos[id]; ok {
		writeJSON(w, http.StatusConflict, map[string]string{"error": "You already created this dataset repo", "url": url})
		return nil
	}
	s.clock++
	s.repos[id] = newRepo(id, private, s.clock)
	writeJSON(w, http.StatusOK, map[string]string{"url": url})
	return nil
}

// validateYAML answers POST /api/validate-yaml, which HfApi.upload_folder
// calls (_validate_yaml) before uploading a README.md: every card passes,
// with no error and no warning.
func (s *Server) validateYAML(w http.ResponseWriter, r *http.Request, _ target) error {
	var req struct {
		Content  string `json:"content"`
		RepoType string `json:"repoType"`
	}
	if err := readJSON(r, &req); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"errors": []any{}, "warnings": []any{}})
	return nil
}

// repoInfo answers GET /api/datasets/{id} and .../revision/{rev}
// (HfApi.dataset_info): the head commit and every file, as siblings.
func (s *Server) repoInfo(w http.ResponseWriter, _ *http.Request, at target) error {
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
	siblings := []map[string]any{}
	for _, p := range t.list("", true) {
		if f := c.files[p]; f != nil {
			sib := map[string]any{"rfilename": p, "size": len(f.data), "blobId": f.blobID}
			if f.sha256 != "" {
				sib["lfs"] = map[string]any{"sha256": f.sha256, "size": len(f.data), "pointerSize": len(f.pointer())}
			}
			siblings = append(siblings, sib)
		}
	}
	author, _, _ := strings.Cut(rp.id, "/")
	writeJSON(w, http.StatusOK, map[string]any{
		"id": rp.id, "author": author, "sha": c.info.Oid, "private": rp.private, "siblings": siblings,
	})
	return nil
}

// Upload mode rule of the preupload endpoint.
const (
	maxPreuploadFiles = 256      // _commit_api._fetch_upload_modes sends chunks of 256
	maxRegularSize    = 10 << 20 // a larger file goes to LFS
)

// preupload answers POST /api/datasets/{id}/preupload/{rev}
// (_commit_api._fetch_upload_modes): "lfs" for Parquet and Arrow files,
// files over 10 MiB and files whose 512-byte sample holds a NUL byte;
// "regular" for the rest. Nothing is ignored (no .gitignore is read).
func (s *Server) preupload(w http.ResponseWriter, r *http.Request, at target) error {
	var req struct {
		Files []struct {
			Path   string `json:"path"`
			Sample string `json:"sample"`
			Size   int64  `json:"size"`
		} `json:"files"`
	}
	if err := readJSON(r, &req); err != nil {
		return err
	}
	if len(req.Files) > maxPreuploadFiles {
		return badRequest("too many files: %d, at most %d per call", len(req.Files), maxPreuploadFiles)
	}
	type mode struct {
		Path         string `json:"path"`
		UploadMode   string `json:"uploadMode"`
		ShouldIgnore bool   `json:"shouldIgnore"`
	}
	modes := []mode{}
	for _, f := range req.Files {
		if err := checkPath(f.Path); err != nil {
			return err
		}
		sample, err := base64.StdEncoding.DecodeString(f.Sample)
		if err != nil {
			return badRequest("sample of %q is not base64: %v", f.Path, err)
		}
		m := "regular"
		if strings.HasSuffix(f.Path, ".parquet") || strings.HasSuffix(f.Path, ".arrow") ||
			f.Size > maxRegularSize || bytes.IndexByte(sample, 0) >= 0 {
			m = "lfs"
		}
		modes = append(modes, mode{Path: f.Path, UploadMode: m})
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	rp, err := s.repo(at.repo)
	if err != nil {
		return err
	}
	if _, err := rp.at(at.rev); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"files": modes})
	return nil
}
