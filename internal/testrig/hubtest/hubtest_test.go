package hubtest

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// The tokens every test hub accepts.
const (
	writeToken = "hf_test_write_0123456789"
	readToken  = "hf_test_read_0123456789"
)

// hub is a Server with the tests' tokens and a client of its own, whose
// idle connections close with the test.
type hub struct {
	*Server
	t      *testing.T
	client *http.Client
}

func newHub(t *testing.T) hub {
	s := New(t)
	s.AddToken(writeToken, true)
	s.AddToken(readToken, false)
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	return hub{s, t, &http.Client{Transport: tr}}
}

type response struct {
	status int
	header http.Header
	body   []byte
}

// decode decodes the body as JSON into v.
func (r response) decode(t *testing.T, v any) {
	t.Helper()
	if err := json.Unmarshal(r.body, v); err != nil {
		t.Fatalf("body %q: %v", r.body, err)
	}
}

// errorMessage is the body's {"error": ...}.
func (r response) errorMessage(t *testing.T) string {
	t.Helper()
	var e struct{ Error string }
	r.decode(t, &e)
	return e.Error
}

// send sends method to url (absolute, or a path on the hub) with token
// ("" sends none) and body: []byte as is, anything else as JSON. header
// holds further key, value pairs.
func (h hub) send(method, url, token string, body any, header ...string) response {
	h.t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case []byte:
		rd = bytes.NewReader(b)
	default:
		j, err := json.Marshal(b)
		if err != nil {
			h.t.Fatal(err)
		}
		rd = bytes.NewReader(j)
	}
	if strings.HasPrefix(url, "/") {
		url = h.URL + url
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		h.t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := h.client.Do(req)
	if err != nil {
		h.t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		h.t.Fatal(err)
	}
	return response{resp.StatusCode, resp.Header, data}
}

// want fails the test unless r has status.
func (r response) want(t *testing.T, status int) response {
	t.Helper()
	if r.status != status {
		t.Fatalf("status %d, want %d; body %s", r.status, status, r.body)
	}
	return r
}

// createRepo creates dataset name under User and returns its id.
func (h hub) createRepo(name string) string {
	h.t.Helper()
	h.send("POST", "/api/repos/create", writeToken,
		map[string]any{"name": name, "organization": nil, "type": "dataset", "visibility": "private"}).want(h.t, 200)
	return User + "/" + name
}

// ndjson is a commit body: a header line, then one line per operation.
func ndjson(t *testing.T, summary, parent string, ops ...map[string]any) []byte {
	t.Helper()
	header := map[string]any{"summary": summary, "description": ""}
	if parent != "" {
		header["parentCommit"] = parent
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.Encode(map[string]any{"key": "header", "value": header})
	for _, op := range ops {
		if err := enc.Encode(op); err != nil {
			t.Fatal(err)
		}
	}
	return b.Bytes()
}

func fileOp(path string, content []byte) map[string]any {
	return map[string]any{"key": "file", "value": map[string]any{
		"content": base64.StdEncoding.EncodeToString(content), "path": path, "encoding": "base64"}}
}

func lfsOp(path string, content []byte) map[string]any {
	return map[string]any{"key": "lfsFile", "value": map[string]any{
		"path": path, "algo": "sha256", "oid": sha256Hex(content), "size": len(content)}}
}

func deleteOp(key, path string) map[string]any {
	return map[string]any{"key": key, "value": map[string]any{"path": path}}
}

// commit sends a commit to main of repo.
func (h hub) commit(repo, parent string, ops ...map[string]any) response {
	h.t.Helper()
	return h.send("POST", "/api/datasets/"+repo+"/commit/main", writeToken, ndjson(h.t, "upload", parent, ops...),
		"Content-Type", "application/x-ndjson")
}

var hex40 = regexp.MustCompile(`^[0-9a-f]{40}$`)

func TestWhoamiAndTokens(t *testing.T) {
	h := newHub(t)
	var who struct {
		Name string
		Type string
		Auth struct{ AccessToken struct{ Role string } }
	}
	h.send("GET", "/api/whoami-v2", writeToken, nil).want(t, 200).decode(t, &who)
	if who.Name != User || who.Type != "user" || who.Auth.AccessToken.Role != "write" {
		t.Errorf("whoami = %+v", who)
	}
	h.send("GET", "/api/whoami-v2", readToken, nil).want(t, 200).decode(t, &who)
	if who.Auth.AccessToken.Role != "read" {
		t.Errorf("read token's role = %q", who.Auth.AccessToken.Role)
	}
	for _, tok := range []string{"", "hf_unknown"} {
		r := h.send("GET", "/api/whoami-v2", tok, nil).want(t, 401)
		if msg := r.errorMessage(t); msg != "Invalid credentials in Authorization header" {
			t.Errorf("token %q: error %q", tok, msg)
		}
	}
	repo := h.createRepo("ds")
	r := h.send("POST", "/api/repos/create", readToken, map[string]any{"name": "ro", "type": "dataset"}).want(t, 403)
	if r.errorMessage(t) == "" {
		t.Error("403 without an error message")
	}
	h.send("POST", "/api/datasets/"+repo+"/commit/main", readToken, ndjson(t, "x", ""),
		"Content-Type", "application/x-ndjson").want(t, 403)
	h.send("GET", "/api/datasets/"+repo, readToken, nil).want(t, 200)
}

func TestCreateRepoAndInfo(t *testing.T) {
	h := newHub(t)
	var created struct{ URL string }
	h.send("POST", "/api/repos/create", writeToken,
		map[string]any{"name": "ds", "organization": nil, "type": "dataset", "visibility": "private"}).
		want(t, 200).decode(t, &created)
	if want := h.URL + "/datasets/" + User + "/ds"; created.URL != want {
		t.Errorf("url %q, want %q", created.URL, want)
	}
	r := h.send("POST", "/api/repos/create", writeToken, map[string]any{"name": "ds", "type": "dataset"}).want(t, 409)
	if msg := r.errorMessage(t); msg != "You already created this dataset repo" {
		t.Errorf("409 error %q", msg)
	}
	// The older private flag, under an organization.
	h.send("POST", "/api/repos/create", writeToken,
		map[string]any{"name": "ds", "organization": "org", "type": "dataset", "private": false}).want(t, 200)

	for _, body := range []map[string]any{
		{"name": "ds2", "type": "model"},
		{"name": "../x", "type": "dataset"},
		{"name": "a--b", "type": "dataset"},
		{"name": "a.git", "type": "dataset"},
		{"name": "ok", "type": "dataset", "visibility": "secret"},
	} {
		h.send("POST", "/api/repos/create", writeToken, body).want(t, 400)
	}

	type info struct {
		ID       string
		Sha      string
		Private  bool
		Siblings []struct {
			Rfilename string
			Size      int
			Lfs       *struct{ Sha256 string }
		}
	}
	for _, tc := range []struct {
		path    string
		private bool
	}{
		{"/api/datasets/" + User + "/ds", true},
		{"/api/datasets/" + User + "/ds/revision/main", true},
		{"/api/datasets/org/ds/revision/main", false},
	} {
		var got info
		h.send("GET", tc.path, writeToken, nil).want(t, 200).decode(t, &got)
		repo := strings.TrimPrefix(strings.Split(tc.path, "/revision/")[0], "/api/datasets/")
		if got.ID != repo || got.Sha != h.Head(repo, "main") || !hex40.MatchString(got.Sha) || got.Private != tc.private {
			t.Errorf("%s: %+v", tc.path, got)
		}
		if len(got.Siblings) != 1 || got.Siblings[0].Rfilename != ".gitattributes" || got.Siblings[0].Lfs != nil {
			t.Errorf("%s: siblings %+v, want a regular .gitattributes", tc.path, got.Siblings)
		}
	}
	r = h.send("GET", "/api/datasets/"+User+"/nope", writeToken, nil).want(t, 404)
	if c := r.header.Get("X-Error-Code"); c != "RepoNotFound" {
		t.Errorf("unknown repo: X-Error-Code %q", c)
	}
	r = h.send("GET", "/api/datasets/"+User+"/ds/revision/dev", writeToken, nil).want(t, 404)
	if c := r.header.Get("X-Error-Code"); c != "RevisionNotFound" {
		t.Errorf("unknown revision: X-Error-Code %q", c)
	}
	if n := len(h.Commits(User + "/ds")); n != 0 {
		t.Errorf("a new repo has %d commits made, want 0", n)
	}
}

func TestPreupload(t *testing.T) {
	h := newHub(t)
	repo := h.createRepo("ds")
	type file struct {
		Path   string `json:"path"`
		Sample string `json:"sample"`
		Size   int64  `json:"size"`
	}
	sample := func(b string) string { return base64.StdEncoding.EncodeToString([]byte(b)) }
	files := []file{
		{"data/train-00000.parquet", sample("PAR1"), 4},
		{"data/x.arrow", sample("text"), 4},
		{"README.md", sample("# hi"), 4},
		{"big.jsonl", sample("{}"), 10<<20 + 1},
		{"edge.jsonl", sample("{}"), 10 << 20},
		{"bin.dat", sample("a\x00b"), 3},
	}
	want := map[string]string{"data/train-00000.parquet": "lfs", "data/x.arrow": "lfs", "README.md": "regular",
		"big.jsonl": "lfs", "edge.jsonl": "regular", "bin.dat": "lfs"}
	r := h.send("POST", "/api/datasets/"+repo+"/preupload/main", writeToken, map[string]any{"files": files}).want(t, 200)
	var raw struct{ Files []map[string]any }
	r.decode(t, &raw)
	if len(raw.Files) != len(files) {
		t.Fatalf("%d answers for %d files", len(raw.Files), len(files))
	}
	for _, f := range raw.Files {
		if f["uploadMode"] != want[f["path"].(string)] {
			t.Errorf("%v: uploadMode %v, want %s", f["path"], f["uploadMode"], want[f["path"].(string)])
		}
		if ignore, ok := f["shouldIgnore"]; !ok || ignore != false {
			t.Errorf("%v: shouldIgnore %v (present %v), want false", f["path"], ignore, ok)
		}
	}

	many := make([]file, 257)
	for i := range many {
		many[i] = file{fmt.Sprintf("f%d", i), "", 0}
	}
	h.send("POST", "/api/datasets/"+repo+"/preupload/main", writeToken, map[string]any{"files": many}).want(t, 400)
	h.send("POST", "/api/datasets/"+repo+"/preupload/main", writeToken, map[string]any{"files": many[:256]}).want(t, 200)
	h.send("POST", "/api/datasets/"+repo+"/preupload/dev", writeToken, map[string]any{"files": files}).want(t, 404)
	h.send("POST", "/api/datasets/"+repo+"/preupload/main", writeToken,
		map[string]any{"files": []file{{"../escape", "", 1}}}).want(t, 400)
}

func TestCommit(t *testing.T) {
	h := newHub(t)
	repo := h.createRepo("ds")
	initial := h.Head(repo, "main")

	var got struct {
		CommitURL      string
		CommitOid      string
		PullRequestURL *string
	}
	h.commit(repo, initial, fileOp("README.md", []byte("# ds\n")), fileOp("data/a.jsonl", []byte("{}\n")),
		fileOp("data/b.jsonl", []byte("{}\n")), fileOp("data/sub/c.jsonl", []byte("{}\n"))).want(t, 200).decode(t, &got)
	if !hex40.MatchString(got.CommitOid) || got.CommitOid == initial {
		t.Fatalf("commitOid %q", got.CommitOid)
	}
	if want := h.URL + "/datasets/" + repo + "/commit/" + got.CommitOid; got.CommitURL != want {
		t.Errorf("commitUrl %q, want %q", got.CommitURL, want)
	}
	if got.PullRequestURL != nil {
		t.Errorf("pullRequestUrl %q, want null", *got.PullRequestURL)
	}
	if h.Head(repo, "main") != got.CommitOid {
		t.Errorf("head %s, want %s", h.Head(repo, "main"), got.CommitOid)
	}
	first := got.CommitOid

	// A stale parent changes nothing.
	r := h.commit(repo, initial, fileOp("x", []byte("x"))).want(t, 412)
	if msg := r.errorMessage(t); msg != "A commit has happened since. Please refresh and try again." {
		t.Errorf("412 error %q", msg)
	}
	// No parent: the commit goes on the head.
	h.commit(repo, "", deleteOp("deletedFile", "data/a.jsonl"), deleteOp("deletedFolder", "data/sub/"),
		fileOp("README.md", []byte("# ds v2\n"))).want(t, 200).decode(t, &got)

	commits := h.Commits(repo)
	if len(commits) != 2 {
		t.Fatalf("%d commits, want 2: %+v", len(commits), commits)
	}
	if c := commits[0]; c.Oid != first || c.Parent != initial || c.Summary != "upload" ||
		strings.Join(c.Files, ",") != "README.md,data/a.jsonl,data/b.jsonl,data/sub/c.jsonl" || c.Deleted != nil {
		t.Errorf("first commit %+v", c)
	}
	if c := commits[1]; c.Oid != got.CommitOid || c.Parent != first ||
		strings.Join(c.Files, ",") != "README.md" || strings.Join(c.Deleted, ",") != "data/a.jsonl,data/sub" {
		t.Errorf("second commit %+v", c)
	}
	wantFiles := func(rev string, want map[string]string) {
		t.Helper()
		files := h.Files(repo, rev)
		if len(files) != len(want) {
			t.Errorf("%s: files %v, want %v", rev, keys(files), want)
		}
		for p, content := range want {
			if string(files[p]) != content {
				t.Errorf("%s: %s = %q, want %q", rev, p, files[p], content)
			}
		}
	}
	wantFiles("main", map[string]string{".gitattributes": gitattributes, "README.md": "# ds v2\n", "data/b.jsonl": "{}\n"})
	wantFiles(first, map[string]string{".gitattributes": gitattributes, "README.md": "# ds\n",
		"data/a.jsonl": "{}\n", "data/b.jsonl": "{}\n", "data/sub/c.jsonl": "{}\n"})
	if h.Files(repo, "dev") != nil || h.Files("x/y", "main") != nil {
		t.Error("Files of an unknown revision or repo is not nil")
	}

	// Failed commits change nothing.
	head := h.Head(repo, "main")
	for name, tc := range map[string]struct {
		status int
		ops    []map[string]any
	}{
		"missing file":    {404, []map[string]any{deleteOp("deletedFile", "nope")}},
		"missing folder":  {404, []map[string]any{deleteOp("deletedFolder", "nope/")}},
		"dotdot":          {400, []map[string]any{fileOp("data/../../x", []byte("x"))}},
		"absolute":        {400, []map[string]any{fileOp("/etc/x", []byte("x"))}},
		"under .git":      {400, []map[string]any{fileOp(".git/config", []byte("x"))}},
		"file as dir":     {400, []map[string]any{fileOp("README.md/x", []byte("x"))}},
		"dir as file":     {400, []map[string]any{fileOp("data", []byte("x"))}},
		"unknown key":     {400, []map[string]any{{"key": "renamedFile", "value": map[string]any{"path": "a"}}}},
		"unknown lfs oid": {422, []map[string]any{lfsOp("a.parquet", []byte("not uploaded"))}},
	} {
		r := h.commit(repo, "", tc.ops...)
		if r.status != tc.status {
			t.Errorf("%s: status %d, want %d; body %s", name, r.status, tc.status, r.body)
		}
	}
	h.send("POST", "/api/datasets/"+repo+"/commit/main", writeToken, ndjson(t, "x", ""),
		"Content-Type", "application/json").want(t, 400)
	h.send("POST", "/api/datasets/"+repo+"/commit/main", writeToken, []byte(`{"key":"file","value":{}}`+"\n"),
		"Content-Type", "application/x-ndjson").want(t, 400)
	h.send("POST", "/api/datasets/"+repo+"/commit/dev", writeToken, ndjson(t, "x", ""),
		"Content-Type", "application/x-ndjson").want(t, 404)
	if h.Head(repo, "main") != head || len(h.Commits(repo)) != 2 {
		t.Error("a failed commit moved the branch")
	}
}

func TestMaxFilesPerCommit(t *testing.T) {
	h := newHub(t)
	h.MaxFilesPerCommit = 2
	repo := h.createRepo("ds")
	h.commit(repo, "", fileOp("a", nil), fileOp("b", nil), fileOp("c", nil)).want(t, 400)
	h.commit(repo, "", fileOp("a", nil), fileOp("b", nil)).want(t, 200)
	h.Close() // and again when the test ends: that does nothing
}

func TestResolveAndDownload(t *testing.T) {
	h := newHub(t)
	repo := h.createRepo("ds")
	h.commit(repo, "", fileOp("data/a b.jsonl", []byte("{\"a\":1}\n")), fileOp("README.md", []byte("hi"))).want(t, 200)

	r := h.send("GET", "/datasets/"+repo+"/resolve/main/data/a%20b.jsonl", writeToken, nil).want(t, 200)
	if string(r.body) != "{\"a\":1}\n" || r.header.Get("X-Repo-Commit") != h.Head(repo, "main") {
		t.Errorf("resolve: %q, X-Repo-Commit %q", r.body, r.header.Get("X-Repo-Commit"))
	}
	h.send("GET", "/datasets/"+repo+"/resolve/main/data%2Fa%20b.jsonl", writeToken, nil).want(t, 200)
	r = h.send("HEAD", "/datasets/"+repo+"/resolve/main/README.md", writeToken, nil).want(t, 200)
	if len(r.body) != 0 || r.header.Get("Content-Length") != "2" || r.header.Get("ETag") == "" {
		t.Errorf("HEAD: body %q, headers %v", r.body, r.header)
	}
	r = h.send("GET", "/datasets/"+repo+"/resolve/main/nope", writeToken, nil).want(t, 404)
	if c := r.header.Get("X-Error-Code"); c != "EntryNotFound" {
		t.Errorf("X-Error-Code %q", c)
	}
	h.send("GET", "/datasets/"+repo+"/resolve/main/data/../README.md", writeToken, nil).want(t, 400)
	h.send("GET", "/datasets/"+repo+"/resolve/main/README.md", "", nil).want(t, 401)

	dir := t.TempDir()
	h.Download(t, repo, "main", dir)
	for p, want := range map[string]string{"data/a b.jsonl": "{\"a\":1}\n", "README.md": "hi", ".gitattributes": gitattributes} {
		got, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(p)))
		if err != nil || string(got) != want {
			t.Errorf("%s: %q, %v; want %q", p, got, err, want)
		}
	}
}

func TestRequestLogHoldsNoToken(t *testing.T) {
	h := newHub(t)
	repo := h.createRepo("ds")
	h.commit(repo, "", fileOp("a", []byte("a"))).want(t, 200)
	h.send("GET", "/api/whoami-v2", "hf_wrong", nil).want(t, 401)
	h.send("GET", "/nowhere", writeToken, nil).want(t, 404)

	reqs := h.Requests()
	if len(reqs) != 4 {
		t.Fatalf("%d requests logged, want 4: %+v", len(reqs), reqs)
	}
	want := []Request{
		{Method: "POST", Route: "create", Path: "/api/repos/create", Status: 200, AuthHeader: true, Authorized: true},
		{Method: "POST", Route: "commit", Path: "/api/datasets/" + repo + "/commit/main", Status: 200, AuthHeader: true, Authorized: true},
		{Method: "GET", Route: "whoami", Path: "/api/whoami-v2", Status: 401, AuthHeader: true},
		{Method: "GET", Path: "/nowhere", Status: 404, AuthHeader: true, Authorized: true},
	}
	for i := range want {
		if reqs[i] != want[i] {
			t.Errorf("request %d: %+v, want %+v", i, reqs[i], want[i])
		}
	}
	if s := fmt.Sprintf("%#v", reqs); strings.Contains(s, writeToken) || strings.Contains(s, "hf_wrong") {
		t.Errorf("the log holds a token: %s", s)
	}
}

func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
