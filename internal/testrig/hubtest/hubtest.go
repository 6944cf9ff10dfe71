// Package hubtest is a local Hugging Face Hub for tests of a dataset
// uploader. It speaks the Hub's upload protocol as huggingface_hub (HEAD
// ee0a451) expects it: create a repo, ask upload modes, upload LFS objects
// (basic and multipart) and verify them, commit, list the tree, download.
// Comments name the Python function each endpoint answers.
//
// State lives in memory and is kept whole: every commit of every repo, so a
// test can read the files as of any revision. Faults (429, 503, a response
// lost after the request took effect) are queued per route with Fail, and
// every request is logged, without its token, for assertions.
//
// Every request needs a token added with AddToken, downloads included,
// except those to the upload URLs the LFS batch hands out: they stand for
// presigned storage URLs and refuse a token. Only dataset repos are
// served, and only branches that exist: a new repo has "main", whose
// initial commit holds a regular .gitattributes.
package hubtest

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// User is the account every accepted token belongs to. A repo created
// without an organization goes under it.
const User = "hubtest-user"

// Server is a running local Hub. Its exported fields are settings: set them
// before the first request; a zero field takes the default its comment
// gives.
type Server struct {
	// URL is the base URL, "http://127.0.0.1:PORT": the endpoint to give
	// the uploader (HF_ENDPOINT).
	URL string

	// PageSize is the most entries one tree response holds; more are on
	// the pages its Link header leads to. Default 1000.
	PageSize int
	// MaxFilesPerCommit is the most operations (lines after the header)
	// one commit may hold; a commit with more answers 400. Default 0:
	// unlimited.
	MaxFilesPerCommit int
	// MultipartThreshold: an LFS object larger than this many bytes is
	// offered a multipart upload, when the client lists the "multipart"
	// transfer. Default 0: never.
	MultipartThreshold int64
	// PartSize is a multipart upload's chunk_size. Default 5 MiB.
	PartSize int64

	t   testing.TB
	srv *httptest.Server

	mu     sync.Mutex
	tokens map[string]bool // token → may write
	repos  map[string]*repo
	faults []queuedFault
	clock  int64 // the last commit's time; each commit ticks it, so no two oids are equal

	// logMu guards requests apart from mu: handlers answer while holding
	// mu, and an answer's status goes into the log.
	logMu    sync.Mutex
	requests []Request
}

// New starts a Hub on a loopback port with no token and no repo. It stops
// when the test ends.
func New(t testing.TB) *Server {
	t.Helper()
	s := &Server{t: t, tokens: map[string]bool{}, repos: map[string]*repo{}}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	s.URL = s.srv.URL
	t.Cleanup(s.Close)
	return s
}

// Close stops the server and waits for the requests in flight. Calling it
// again does nothing.
func (s *Server) Close() { s.srv.Close() }

// AddToken makes tok accepted as a bearer token of User. A token that may
// not write can read (whoami, info, tree, download); creating a repo,
// preupload, LFS batch and verify, and commits answer 403 to it.
func (s *Server) AddToken(tok string, writable bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tokens[tok] = writable
}

// access is what a route asks of the request's token.
type access int

const (
	noAuth access = iota // presigned storage URLs: no token needed
	readAuth
	writeAuth
)

// authorize checks the bearer token that utils/_headers.build_hf_headers
// sends as "Authorization: Bearer <token>".
func (s *Server) authorize(r *http.Request, need access) error {
	if need == noAuth {
		return nil
	}
	writable, ok := s.token(r)
	if !ok {
		return &hubError{status: http.StatusUnauthorized, msg: "Invalid credentials in Authorization header"}
	}
	if need == writeAuth && !writable {
		return &hubError{status: http.StatusForbidden,
			msg: "You don't have the rights to write: this token's role is read"}
	}
	return nil
}

// token says whether r carries an accepted token, and whether it may write.
func (s *Server) token(r *http.Request) (writable, ok bool) {
	tok, found := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !found || tok == "" {
		return false, false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	writable, ok = s.tokens[tok]
	return writable, ok
}
