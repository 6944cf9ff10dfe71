package hubtest

import (
	"bytes"
	"net/http"
	"testing"
)

func TestStatusFaults(t *testing.T) {
	h := newHub(t)
	repo := h.createRepo("ds")
	h.Fail("commit", 2, Fault{Status: 429, RetryAfter: 7, RateLimitReset: 55})
	h.Fail("commit", 1, Fault{Status: 503})
	h.Fail("tree", 1, Fault{Status: 429, RetryAfter: 3})

	for i := range 2 {
		r := h.commit(repo, "", fileOp("a", []byte("a"))).want(t, 429)
		if r.header.Get("Retry-After") != "7" || r.header.Get("RateLimit") != `"api";r=0;t=55` {
			t.Errorf("429 #%d headers %v", i+1, r.header)
		}
	}
	r := h.commit(repo, "", fileOp("a", []byte("a"))).want(t, 503)
	if r.header.Get("Retry-After") != "" || r.header.Get("RateLimit") != "" {
		t.Errorf("503 headers %v", r.header)
	}
	if len(h.Commits(repo)) != 0 {
		t.Fatal("a faulted commit was applied")
	}
	h.commit(repo, "", fileOp("a", []byte("a"))).want(t, 200)

	r = h.send("GET", "/api/datasets/"+repo+"/tree/main", writeToken, nil).want(t, 429)
	if r.header.Get("Retry-After") != "3" || r.header.Get("RateLimit") != "" {
		t.Errorf("tree 429 headers %v", r.header)
	}
	h.send("GET", "/api/datasets/"+repo+"/tree/main", writeToken, nil).want(t, 200)

	var faulted []int
	for _, req := range h.Requests() {
		if req.Fault {
			faulted = append(faulted, req.Status)
		}
	}
	if len(faulted) != 4 || faulted[0] != 429 || faulted[2] != 503 || faulted[3] != 429 {
		t.Errorf("faulted requests' statuses %v", faulted)
	}
}

// A lost commit response: the commit is made, the client gets no answer,
// and a retry with the same parent learns of it by a 412.
func TestLoseResponseAppliesTheCommit(t *testing.T) {
	h := newHub(t)
	repo := h.createRepo("ds")
	parent := h.Head(repo, "main")
	h.Fail("commit", 1, LoseResponse())

	req, err := http.NewRequest("POST", h.URL+"/api/datasets/"+repo+"/commit/main",
		bytes.NewReader(ndjson(t, "upload", parent, fileOp("a", []byte("a")))))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+writeToken)
	req.Header.Set("Content-Type", "application/x-ndjson")
	if resp, err := h.client.Do(req); err == nil {
		resp.Body.Close()
		t.Fatalf("the lost commit got an answer: %s", resp.Status)
	}

	commits := h.Commits(repo)
	if len(commits) != 1 || h.Head(repo, "main") != commits[0].Oid || commits[0].Parent != parent {
		t.Fatalf("the lost commit was not applied: commits %+v", commits)
	}
	h.commit(repo, parent, fileOp("a", []byte("a"))).want(t, 412)

	reqs := h.Requests()
	lost := reqs[1]
	if lost.Route != "commit" || !lost.Lost || !lost.Fault || lost.Status != 200 {
		t.Errorf("lost request logged as %+v", lost)
	}
}

func TestLoseResponseOfAnUpload(t *testing.T) {
	h := newHub(t)
	repo := h.createRepo("ds")
	data := []byte("object")
	obj := h.batch(repo, data)[0]
	h.Fail("upload", 1, LoseResponse())
	req, _ := http.NewRequest("PUT", obj.Actions.Upload.Href, bytes.NewReader(data))
	if resp, err := h.client.Do(req); err == nil {
		resp.Body.Close()
		t.Fatalf("the lost upload got an answer: %s", resp.Status)
	}
	h.verify(obj.Actions.Verify.Href, data).want(t, 200)
}

func TestFailRejectsNonsense(t *testing.T) {
	for name, call := range map[string]func(*Server){
		"unknown route":  func(s *Server) { s.Fail("nowhere", 1, Fault{Status: 503}) },
		"no fault":       func(s *Server) { s.Fail("commit", 1, Fault{}) },
		"both":           func(s *Server) { s.Fail("commit", 1, Fault{Status: 503, Lose: true}) },
		"success status": func(s *Server) { s.Fail("commit", 1, Fault{Status: 200}) },
		"zero times":     func(s *Server) { s.Fail("commit", 0, Fault{Status: 503}) },
	} {
		ft := &fatalRecorder{TB: t}
		s := New(t)
		s.t = ft
		func() {
			defer func() { recover() }()
			call(s)
		}()
		if !ft.failed {
			t.Errorf("%s: Fail accepted it", name)
		}
	}
}

// fatalRecorder notes a Fatalf and stops the call, without failing the test.
type fatalRecorder struct {
	testing.TB
	failed bool
}

func (f *fatalRecorder) Helper() {}

func (f *fatalRecorder) Fatalf(string, ...any) {
	f.failed = true
	panic("fatal")
}
