package sglang

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// faultProxy stands between the client and a simulator and records the rid
// of every generation it passed on, so a test can tell what the server saw.
// Its fault decides, per POST, after the server has answered it, what the
// client gets: the answer, nothing (the connection is dropped: the request
// reached the server but the client cannot know it), or half the answer.
type faultProxy struct {
	*httptest.Server
	backend string
	fault   func(n int64, connReq int) fault // n: POSTs so far; connReq: POSTs on this connection

	mu   sync.Mutex
	rids []string
	n    atomic.Int64
}

type fault int

const (
	pass fault = iota
	dropAfterSend
	tornAnswer
)

type connKey struct{}

func newFaultProxy(t *testing.T, backend string, f func(n int64, connReq int) fault) *faultProxy {
	t.Helper()
	p := &faultProxy{backend: backend, fault: f}
	fwd := &http.Client{Transport: &http.Transport{}}
	p.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		req, _ := http.NewRequestWithContext(r.Context(), r.Method, p.backend+r.URL.Path, bytes.NewReader(body))
		req.Header = r.Header.Clone()
		what := pass
		if r.Method == http.MethodPost {
			var b struct {
				RID string `json:"rid"`
			}
			_ = json.Unmarshal(body, &b)
			p.mu.Lock()
			p.rids = append(p.rids, b.RID)
			p.mu.Unlock()
			perConn := r.Context().Value(connKey{}).(*atomic.Int64)
			what = p.fault(p.n.Add(1), int(perConn.Add(1)))
		}
		resp, err := fwd.Do(req)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		answer, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		switch what {
		case dropAfterSend:
			// The server has done the work; the client never hears of it.
			conn, _, _ := w.(http.Hijacker).Hijack()
			conn.Close()
			return
		case tornAnswer:
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Content-Length", fmt.Sprint(len(answer)))
			w.WriteHeader(resp.StatusCode)
			w.Write(answer[:len(answer)/2])
			w.(http.Flusher).Flush()
			conn, _, _ := w.(http.Hijacker).Hijack()
			conn.Close()
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(resp.StatusCode)
		w.Write(answer)
	}))
	p.Config.ConnContext = func(ctx context.Context, _ net.Conn) context.Context {
		return context.WithValue(ctx, connKey{}, new(atomic.Int64))
	}
	p.Start()
	t.Cleanup(func() { p.Close(); fwd.CloseIdleConnections() })
	return p
}

func (p *faultProxy) seen() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.rids)
}

// A connection dropped after the request was sent — the case where the
// server may be generating it — is never re-sent silently: the next request
// is a new attempt with a fresh rid, counted in the result's attempts and in
// the figures, and the server sees every rid once.
func TestDroppedAfterSendIsACountedAttempt(t *testing.T) {
	f := startSim(t, fastSim(1))
	// The second POST on a kept-alive connection is dropped, once: the
	// hand-written client this replaced re-sent exactly that one with the
	// same rid and no attempt counted.
	var dropped atomic.Bool
	p := newFaultProxy(t, f.URLs()[0], func(n int64, connReq int) fault {
		if connReq == 2 && dropped.CompareAndSwap(false, true) {
			return dropAfterSend
		}
		return pass
	})
	c := startClient(t, specsOf([]string{p.URL}, 1), testOptions(APIGenerate))
	attempts := 0
	for i := range 6 {
		s := c.Session()
		r, err := s.Generate(context.Background(), &Request{Text: fmt.Sprintf("prompt %d", i)})
		s.Close()
		if err != nil {
			t.Fatalf("prompt %d: %v", i, err)
		}
		attempts += r.Attempts
	}
	if !dropped.Load() {
		t.Fatal("no connection was reused: the fault never fired, the test proves nothing")
	}
	if attempts != 7 {
		t.Errorf("6 results took %d attempts, want 7 (the dropped one counted)", attempts)
	}
	if got := c.Stats().Total.Errors[ClassTransport]; got != 1 {
		t.Errorf("figures count %d transport errors, want 1: %v", got, c.Stats().Total.Errors)
	}
	rids := p.seen()
	gen := 0
	seen := map[string]bool{}
	for _, rid := range rids {
		if seen[rid] {
			t.Errorf("the server saw rid %s twice: %v", rid, rids)
		}
		seen[rid] = true
		if !bytes.Contains([]byte(rid), []byte("probe")) {
			gen++
		}
	}
	if gen != 7 {
		t.Errorf("the server saw %d generations, want 7 (6 + the dropped one): %v", gen, rids)
	}
}

// An answer cut off in the middle is a failed attempt, re-sent with a new rid.
func TestTornAnswerIsACountedAttempt(t *testing.T) {
	f := startSim(t, fastSim(1))
	p := newFaultProxy(t, f.URLs()[0], func(n int64, _ int) fault {
		if n == 3 {
			return tornAnswer
		}
		return pass
	})
	c := startClient(t, specsOf([]string{p.URL}, 1), testOptions(APIGenerate))
	total := 0
	for i := range 4 {
		s := c.Session()
		r, err := s.Generate(context.Background(), &Request{Text: fmt.Sprintf("prompt %d", i)})
		s.Close()
		if err != nil {
			t.Fatalf("prompt %d: %v", i, err)
		}
		total += r.Attempts
	}
	if total != 5 {
		t.Errorf("4 results took %d attempts, want 5", total)
	}
	if e := c.Stats().Total.Errors; e[ClassTransport] != 1 {
		t.Errorf("errors %v, want one transport error", e)
	}
}

// uvicorn closes connections idle for 5 s. A request that finds its kept-alive
// connection closed was never seen by the server: it goes out on a new
// connection, and that is not a failed attempt.
func TestServerClosingIdleConnectionsIsNotAFailure(t *testing.T) {
	f := startSim(t, fastSim(1))
	backend := f.URLs()[0]
	fwd := &http.Client{}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		req, _ := http.NewRequestWithContext(r.Context(), r.Method, backend+r.URL.Path, r.Body)
		req.Header = r.Header.Clone()
		resp, err := fwd.Do(req)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		w.WriteHeader(resp.StatusCode)
		io.Copy(w, resp.Body)
	}))
	srv.Config.IdleTimeout = 30 * time.Millisecond
	srv.Start()
	t.Cleanup(srv.Close)
	c := startClient(t, specsOf([]string{srv.URL}, 2), testOptions(APIGenerate))
	for i := range 8 {
		// Well past the server's idle timeout, so the client has seen the
		// close (a close racing with the next request cannot be told from a
		// drop after sending, and is rightly a counted attempt).
		time.Sleep(250 * time.Millisecond)
		s := c.Session()
		r, err := s.Generate(context.Background(), &Request{Text: fmt.Sprintf("prompt %d", i)})
		s.Close()
		if err != nil {
			t.Fatalf("prompt %d: %v", i, err)
		}
		if r.Attempts != 1 {
			t.Errorf("prompt %d took %d attempts after an idle close", i, r.Attempts)
		}
	}
	if e := c.Stats().Total.Errors; len(e) != 0 {
		t.Errorf("errors %v after idle closes, want none", e)
	}
}

// A request past request_timeout is classed a timeout, and its connection is
// closed (the server then aborts it and frees the slot).
func TestRequestTimeoutClosesTheRequest(t *testing.T) {
	f := startSim(t, fastSim(1))
	backend := f.URLs()[0]
	closed := make(chan struct{}, 8)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if r.Method == http.MethodPost && !bytes.Contains(body, []byte("probe")) {
			<-r.Context().Done() // a generation that never ends
			closed <- struct{}{}
			return
		}
		req, _ := http.NewRequestWithContext(r.Context(), r.Method, backend+r.URL.Path, bytes.NewReader(body))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		w.WriteHeader(resp.StatusCode)
		io.Copy(w, resp.Body)
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(http.DefaultClient.CloseIdleConnections)
	opts := testOptions(APIGenerate)
	opts.RequestTimeout = 100 * time.Millisecond
	opts.MaxAttempts = 1
	c := startClient(t, specsOf([]string{srv.URL}, 1), opts)
	s := c.Session()
	_, err := s.Generate(context.Background(), &Request{Text: "x"})
	s.Close()
	var ex *ExhaustedError
	if !errors.As(err, &ex) || ex.Last.Class != ClassTimeout {
		t.Fatalf("err = %v, want attempts exhausted by a timeout", err)
	}
	select {
	case <-closed:
	case <-time.After(5 * time.Second):
		t.Fatal("the server never saw the timed-out request end")
	}
}
