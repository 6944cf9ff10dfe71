package hfhub

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/pipe-dev/pipe/internal/termsafe"
)

// Whoami checks the token (GET /api/whoami-v2, hf_api.py whoami) and
// returns the account's name and its token's role ("write", "read",
// "fineGrained", or "" when the Hub does not say).
func (c *Client) Whoami(ctx context.Context) (name, role string, err error) {
	var out struct {
		Name string `json:"name"`
		Auth struct {
			AccessToken struct {
				Role string `json:"role"`
			} `json:"accessToken"`
		} `json:"auth"`
	}
	_, err = c.do(ctx, request{op: "the token check (whoami)", method: http.MethodGet, url: c.endpoint + "/api/whoami-v2", auth: true, out: &out})
	return termsafe.Line(termsafe.Cut(out.Name, 100)), out.Auth.AccessToken.Role, err
}

// CreateRepo creates the dataset repository (POST /api/repos/create,
// hf_api.py create_repo); created is false when it exists already.
func (c *Client) CreateRepo(ctx context.Context, private bool) (created bool, err error) {
	ns, name, _ := strings.Cut(c.repo, "/")
	vis := "public"
	if private {
		vis = "private"
	}
	body, n := jsonBody(map[string]any{"name": name, "organization": ns, "type": "dataset", "visibility": vis})
	_, err = c.do(ctx, request{op: "creating the repository", method: http.MethodPost, url: c.endpoint + "/api/repos/create",
		body: body, size: n, contentType: "application/json", auth: true})
	var he *Error
	if errors.As(err, &he) && he.Status == http.StatusConflict {
		return false, nil
	}
	return err == nil, err
}

// ErrNoRevision is a branch the repository does not have.
var ErrNoRevision = errors.New("no such branch")

// Head is the commit the branch rev points at (GET
// /api/datasets/REPO/revision/REV, hf_api.py dataset_info: its sha).
func (c *Client) Head(ctx context.Context, rev string) (string, error) {
	var out struct {
		SHA string `json:"sha"`
	}
	_, err := c.do(ctx, request{op: "reading the branch " + rev, method: http.MethodGet, url: c.api("revision", url.PathEscape(rev)), auth: true, out: &out})
	var he *Error
	if errors.As(err, &he) && he.Status == http.StatusNotFound && he.Code == "RevisionNotFound" {
		return "", ErrNoRevision
	}
	if err == nil && out.SHA == "" {
		err = fmt.Errorf("reading the branch %s: the answer names no commit", rev)
	}
	return out.SHA, err
}

// Entry is a file of the repository's tree (RepoFile in hf_api.py).
type Entry struct {
	Type string `json:"type"` // "file" or "directory"
	Path string `json:"path"`
	Size int64  `json:"size"`
	OID  string `json:"oid"` // git blob id
	LFS  *struct {
		OID  string `json:"oid"` // sha256 of the content
		Size int64  `json:"size"`
	} `json:"lfs,omitempty"`
}

// SHA256 is the file's content sha256 when it is stored by LFS, else "".
func (e Entry) SHA256() string {
	if e.LFS == nil {
		return ""
	}
	return e.LFS.OID
}

// maxTreePages bounds a listing (a page holds up to 1,000 entries).
const maxTreePages = 1000

// Tree lists every file of the repository at rev, a branch or a commit
// (GET /api/datasets/REPO/tree/REV?recursive=true, hf_api.py
// list_repo_tree, its pages followed by their Link header's rel="next",
// utils/_pagination.py).
func (c *Client) Tree(ctx context.Context, rev string) ([]Entry, error) {
	next := c.api("tree", url.PathEscape(rev)) + "?recursive=true&expand=false"
	var files []Entry
	for page := 0; next != ""; page++ {
		if page == maxTreePages {
			return nil, fmt.Errorf("listing the repository: more than %d pages", maxTreePages)
		}
		var entries []Entry
		h, err := c.do(ctx, request{op: "listing the repository", method: http.MethodGet, url: next, auth: true, out: &entries})
		if err != nil {
			return nil, err
		}
		for _, e := range entries {
			if e.Type == "file" {
				files = append(files, e)
			}
		}
		next, err = c.nextPage(h.Get("Link"))
		if err != nil {
			return nil, err
		}
	}
	return files, nil
}

// nextPage is a Link header's rel="next" URL, on this endpoint's host
// only: the token goes with it.
func (c *Client) nextPage(link string) (string, error) {
	for _, part := range strings.Split(link, ",") {
		u, params, ok := strings.Cut(part, ";")
		if !ok || !strings.Contains(strings.ReplaceAll(params, " ", ""), `rel="next"`) {
			continue
		}
		u = strings.Trim(strings.TrimSpace(u), "<>")
		next, err := url.Parse(u)
		base, _ := url.Parse(c.endpoint)
		if err != nil || next.Host != base.Host || next.Scheme != base.Scheme {
			return "", fmt.Errorf("listing the repository: the next page is on another server (%s)", termsafe.Line(termsafe.Cut(u, 100)))
		}
		return u, nil
	}
	return "", nil
}

// Upload is a file to commit, as preupload and the commit name it.
type Upload struct {
	Path   string
	Size   int64
	Sample []byte // its first 512 bytes
	SHA256 string // hex, for LFS
	// Content is a small file's bytes, committed as they are when the
	// Hub says "regular".
	Content []byte
	// LFS is set by Preupload: the content goes by LFS.
	LFS bool
}

// preuploadBatch is the most files one preupload names
// (_upload_pipeline.py PREUPLOAD_BATCH_SIZE, "server-side limit").
const preuploadBatch = 256

// Preupload asks the Hub which files go by LFS (POST
// /api/datasets/REPO/preupload/REV, _commit_api.py _fetch_upload_modes)
// and sets their LFS.
func (c *Client) Preupload(ctx context.Context, rev string, files []*Upload) error {
	for start := 0; start < len(files); start += preuploadBatch {
		batch := files[start:min(len(files), start+preuploadBatch)]
		type item struct {
			Path   string `json:"path"`
			Sample string `json:"sample"`
			Size   int64  `json:"size"`
		}
		items := make([]item, len(batch))
		for i, f := range batch {
			items[i] = item{f.Path, base64.StdEncoding.EncodeToString(f.Sample), f.Size}
		}
		var out struct {
			Files []struct {
				Path       string `json:"path"`
				UploadMode string `json:"uploadMode"`
			} `json:"files"`
		}
		body, n := jsonBody(map[string]any{"files": items})
		if _, err := c.do(ctx, request{op: "preupload", method: http.MethodPost, url: c.api("preupload", url.PathEscape(rev)),
			body: body, size: n, contentType: "application/json", auth: true, out: &out}); err != nil {
			return err
		}
		modes := map[string]string{}
		for _, f := range out.Files {
			modes[f.Path] = f.UploadMode
		}
		for _, f := range batch {
			switch m := modes[f.Path]; m {
			case "lfs":
				f.LFS = true
			case "regular":
				f.LFS = false
				if f.Content == nil && f.Size > 0 {
					return fmt.Errorf("preupload: the Hub wants %s committed as a regular file, and pipe only has it as a stream; it sends it by LFS, which the Hub refused", f.Path)
				}
			default:
				return fmt.Errorf("preupload: the Hub said nothing usable of %s (upload mode %q)", f.Path, termsafe.Line(termsafe.Cut(m, 20)))
			}
		}
	}
	return nil
}

// Commit is one commit: its message, the commit it must follow (the
// branch's head when the commit was prepared), the files it adds or
// replaces and the paths it deletes.
type Commit struct {
	Summary, Description string
	Parent               string
	Files                []*Upload
	Delete               []string
}

// Commit makes c on the branch rev (POST
// /api/datasets/REPO/commit/REV, application/x-ndjson, _commit_api.py
// _prepare_commit_payload) and returns the new commit's id. With a
// Parent, the Hub refuses it (412) when the branch has moved: it is never
// made twice. An error may still leave it made (the answer was lost):
// the caller reads the branch to know.
func (c *Client) Commit(ctx context.Context, rev string, cm Commit) (string, error) {
	var b strings.Builder
	enc := json.NewEncoder(&b)
	header := map[string]any{"summary": cm.Summary, "description": cm.Description}
	if cm.Parent != "" {
		header["parentCommit"] = cm.Parent
	}
	enc.Encode(map[string]any{"key": "header", "value": header})
	for _, f := range cm.Files {
		if f.LFS {
			enc.Encode(map[string]any{"key": "lfsFile", "value": map[string]any{"path": f.Path, "algo": "sha256", "oid": f.SHA256, "size": f.Size}})
		} else {
			enc.Encode(map[string]any{"key": "file", "value": map[string]any{"content": base64.StdEncoding.EncodeToString(f.Content), "path": f.Path, "encoding": "base64"}})
		}
	}
	for _, p := range cm.Delete {
		enc.Encode(map[string]any{"key": "deletedFile", "value": map[string]any{"path": p}})
	}
	var out struct {
		CommitOID string `json:"commitOid"`
	}
	if _, err := c.do(ctx, request{op: "commit", method: http.MethodPost, url: c.api("commit", url.PathEscape(rev)),
		body: strings.NewReader(b.String()), size: int64(b.Len()), contentType: "application/x-ndjson", auth: true, out: &out}); err != nil {
		return "", err
	}
	if out.CommitOID == "" {
		return "", errors.New("commit: the answer names no commit")
	}
	return out.CommitOID, nil
}
