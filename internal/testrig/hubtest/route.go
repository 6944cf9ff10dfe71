package hubtest

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// A route is one endpoint: its name (what Fail and the request log call
// it), the methods it takes, the token it needs and its handler. A handler
// returns a *hubError instead of writing one.
type route struct {
	name    string
	methods []string
	access  access
	handle  func(s *Server, w http.ResponseWriter, r *http.Request, at target) error
}

// target is what a request's path names; which fields are set depends on
// the route.
type target struct {
	repo string // "ns/name"
	rev  string // branch or commit oid, unescaped
	path string // path in the repo; "" for the root
	oid  string // LFS object
	size int64  // LFS object's size
	part int    // multipart part number, from 1
}

var routes = map[string]*route{}

func init() {
	for _, rt := range []*route{
		{"whoami", []string{"GET"}, readAuth, (*Server).whoami},
		{"create", []string{"POST"}, writeAuth, (*Server).createRepo},
		{"validate-yaml", []string{"POST"}, readAuth, (*Server).validateYAML},
		{"info", []string{"GET"}, readAuth, (*Server).repoInfo},
		{"preupload", []string{"POST"}, writeAuth, (*Server).preupload},
		{"commit", []string{"POST"}, writeAuth, (*Server).commit},
		{"tree", []string{"GET"}, readAuth, (*Server).tree},
		{"resolve", []string{"GET", "HEAD"}, readAuth, (*Server).resolve},
		{"lfs-batch", []string{"POST"}, writeAuth, (*Server).lfsBatch},
		{"upload", []string{"PUT"}, noAuth, (*Server).upload},
		{"upload-complete", []string{"POST"}, noAuth, (*Server).completeMultipart},
		{"verify", []string{"POST"}, writeAuth, (*Server).verify},
	} {
		routes[rt.name] = rt
	}
}

// Paths of the storage URLs the LFS batch endpoint hands out. The Hub's
// point to S3 and to its own completion endpoint; these point here.
//
//	PUT  /lfs-upload/{ns}/{name}/{oid}/{size}             basic upload
//	PUT  /lfs-upload/{ns}/{name}/{oid}/{size}/part/{n}    one part
//	POST /lfs-upload/{ns}/{name}/{oid}/{size}             multipart completion
const uploadPrefix = "/lfs-upload/"

// parseRoute finds the route and target of r. Each path segment is
// unescaped on its own: huggingface_hub quotes a revision with safe=""
// (so "refs/pr/1" is one segment) and a tree path the same way.
func parseRoute(r *http.Request) (*route, target, error) {
	var at target
	raw := strings.Split(strings.TrimPrefix(r.URL.EscapedPath(), "/"), "/")
	seg := make([]string, len(raw))
	for i, s := range raw {
		u, err := url.PathUnescape(s)
		if err != nil {
			return nil, at, badRequest("malformed path %q", r.URL.EscapedPath())
		}
		seg[i] = u
	}
	name := ""
	n := len(seg)
	switch {
	case n == 2 && seg[0] == "api" && seg[1] == "whoami-v2":
		name = "whoami"
	case n == 3 && seg[0] == "api" && seg[1] == "repos" && seg[2] == "create":
		name = "create"
	case n == 2 && seg[0] == "api" && seg[1] == "validate-yaml":
		name = "validate-yaml"
	case n >= 4 && seg[0] == "api" && seg[1] == "datasets":
		at.repo = seg[2] + "/" + seg[3]
		rest := seg[4:]
		switch {
		case len(rest) == 0:
			name, at.rev = "info", "main"
		case len(rest) == 2 && rest[0] == "revision":
			name, at.rev = "info", rest[1]
		case len(rest) == 2 && (rest[0] == "preupload" || rest[0] == "commit"):
			name, at.rev = rest[0], rest[1]
		case len(rest) >= 2 && rest[0] == "tree":
			name, at.rev, at.path = "tree", rest[1], strings.Join(rest[2:], "/")
		}
	case n == 7 && seg[0] == "datasets" && strings.HasSuffix(seg[2], ".git") &&
		seg[3] == "info" && seg[4] == "lfs" && seg[5] == "objects":
		at.repo = seg[1] + "/" + strings.TrimSuffix(seg[2], ".git")
		switch seg[6] {
		case "batch":
			name = "lfs-batch"
		case "verify":
			name = "verify"
		}
	case n >= 6 && seg[0] == "datasets" && seg[3] == "resolve":
		name, at.repo, at.rev, at.path = "resolve", seg[1]+"/"+seg[2], seg[4], strings.Join(seg[5:], "/")
	case (n == 5 || n == 7 && seg[5] == "part") && "/"+seg[0]+"/" == uploadPrefix:
		at.repo, at.oid = seg[1]+"/"+seg[2], seg[3]
		size, err := strconv.ParseInt(seg[4], 10, 64)
		if err != nil || !validOid(at.oid) {
			return nil, at, notFound("", "no such upload URL")
		}
		at.size = size
		name = "upload"
		if n == 7 {
			if at.part, err = strconv.Atoi(seg[6]); err != nil || at.part < 1 {
				return nil, at, notFound("", "no such upload URL")
			}
		} else if r.Method == "POST" {
			name = "upload-complete"
		}
	}
	rt := routes[name]
	if rt == nil {
		return nil, at, notFound("", "no route for %s %s", r.Method, r.URL.Path)
	}
	if !slices.Contains(rt.methods, r.Method) {
		return rt, at, &hubError{status: http.StatusMethodNotAllowed, msg: r.Method + " not allowed here"}
	}
	if at.repo != "" {
		if err := checkRepoID(at.repo); err != nil {
			return rt, at, err
		}
	}
	if at.path != "" {
		if err := checkPath(at.path); err != nil {
			return rt, at, err
		}
	}
	return rt, at, nil
}

// nameRE is a namespace or repo name as utils/_validators.validate_repo_id
// takes it: word characters, "-" and ".", at most 96.
var nameRE = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.-]{0,95}$`)

// checkRepoID checks "ns/name" as validate_repo_id does: a name neither
// ends with "-", "." or ".git" nor holds "--" or "..".
func checkRepoID(id string) error {
	ns, name, _ := strings.Cut(id, "/")
	for _, s := range []string{ns, name} {
		if !nameRE.MatchString(s) || strings.Contains(s, "--") || strings.Contains(s, "..") ||
			strings.HasSuffix(s, ".") || strings.HasSuffix(s, "-") || strings.HasSuffix(s, ".git") {
			return badRequest("invalid repo id %q", id)
		}
	}
	return nil
}

// checkPath rejects a path in a repo that is empty, absolute, has an empty,
// "." or ".." segment, or lies under .git/ or .cache/ (the
// FORBIDDEN_FOLDERS of utils/_paths, which
// _commit_api._validate_path_in_repo keeps out "to prevent a server-side
// issue").
func checkPath(p string) error {
	if p == "" || strings.HasPrefix(p, "/") {
		return badRequest("invalid path %q", p)
	}
	for part := range strings.SplitSeq(p, "/") {
		switch part {
		case "", ".", "..", ".git", ".cache":
			return badRequest("invalid path %q", p)
		}
	}
	return nil
}

// hubError is an error answer: its status, its X-Error-Code (which
// utils/_http.hf_raise_for_status maps to RepoNotFoundError,
// RevisionNotFoundError, EntryNotFoundError) and its message, sent as
// {"error": msg} and as X-Error-Message.
type hubError struct {
	status int
	code   string
	msg    string
}

func (e *hubError) Error() string { return e.msg }

func badRequest(format string, args ...any) error {
	return &hubError{status: http.StatusBadRequest, msg: fmt.Sprintf(format, args...)}
}

func notFound(code, format string, args ...any) error {
	return &hubError{status: http.StatusNotFound, code: code, msg: fmt.Sprintf(format, args...)}
}

func writeError(w http.ResponseWriter, err error) {
	var he *hubError
	if !errors.As(err, &he) {
		he = &hubError{status: http.StatusInternalServerError, msg: err.Error()}
	}
	if he.code != "" {
		w.Header().Set("X-Error-Code", he.code)
	}
	w.Header().Set("X-Error-Message", he.msg)
	writeJSON(w, he.status, map[string]string{"error": he.msg})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		panic(err) // only this package's own values are written
	}
	if w.Header().Get("Content-Type") == "" {
		w.Header().Set("Content-Type", "application/json")
	}
	w.WriteHeader(status)
	w.Write(body)
}

// readJSON decodes r's body into v; a body that does not decode is a 400.
func readJSON(r *http.Request, v any) error {
	if err := json.NewDecoder(r.Body).Decode(v); err != nil {
		return badRequest("malformed JSON body: %v", err)
	}
	return nil
}
