package sglang

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"
)

// redirector is a server in front of a real one that answers the paths in
// redirect with status and a Location on another port of the same host,
// where a capture server records whatever arrives.
// The first request to each path is passed on when passFirst is set (the
// 1-token probe of readiness), so that generations are what is redirected.
func redirector(t *testing.T, backend string, status int, passFirst bool, redirect ...string) (front string, captured func() []recorded) {
	capture := newRecorder(t, backend)
	u, err := url.Parse(backend)
	if err != nil {
		t.Fatal(err)
	}
	rp := httputil.NewSingleHostReverseProxy(u)
	var mu sync.Mutex
	seen := map[string]bool{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		first := !seen[r.URL.Path]
		seen[r.URL.Path] = true
		mu.Unlock()
		for _, p := range redirect {
			if r.URL.Path == p && !(passFirst && first) {
				http.Redirect(w, r, capture.URL+r.URL.Path, status)
				return
			}
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL, capture.requests
}

// No request to a server follows a redirect: neither the credentials (a
// Bearer key, a URL's user:password) nor the extra headers ever reach the
// place a Location names, for health, info, the 1-token probe and
// generations, on both APIs.
func TestRedirectsAreNeverFollowed(t *testing.T) {
	f := startSim(t, fastSim(1))
	key, pw, team := secret(t, "key-"), secret(t, "pw-"), secret(t, "team-")
	specOf := func(front string, bearer bool) ServerSpec {
		h := http.Header{"X-Team": {team}}
		if bearer {
			h.Set("Authorization", "Bearer "+key)
		} else {
			front = strings.Replace(front, "http://", "http://bob:"+pw+"@", 1)
		}
		return ServerSpec{URL: front, Concurrency: 2, Header: h}
	}
	noneCaptured := func(t *testing.T, captured func() []recorded) {
		t.Helper()
		for _, q := range captured() {
			t.Errorf("the redirect was followed: %s %s with Authorization %q, X-Team %q", q.method, q.path, q.header.Get("Authorization"), q.header.Get("X-Team"))
		}
	}
	info := []string{"/get_server_info", "/server_info", "/get_model_info", "/model_info", "/v1/models"}
	for _, status := range []int{http.StatusFound, http.StatusTemporaryRedirect} {
		for _, bearer := range []bool{true, false} {
			t.Run("health", func(t *testing.T) {
				front, captured := redirector(t, f.URLs()[0], status, false, "/health")
				got := Probe(context.Background(), []ServerSpec{specOf(front, bearer)}, 2*time.Second)
				if got[0].State != StateDown || !strings.Contains(got[0].Reason, "redirect, not followed") {
					t.Errorf("Probe: %+v", got[0])
				}
				opts := testOptions(APIChat)
				opts.ReadyTimeout = 300 * time.Millisecond
				c := New([]ServerSpec{specOf(front, bearer)}, opts)
				if err := c.Start(context.Background()); err == nil || !strings.Contains(err.Error(), "redirect") {
					t.Errorf("Start: %v", err)
				}
				c.Close()
				noneCaptured(t, captured)
			})
			t.Run("info", func(t *testing.T) {
				front, captured := redirector(t, f.URLs()[0], status, false, info...)
				Probe(context.Background(), []ServerSpec{specOf(front, bearer)}, 2*time.Second)
				opts := testOptions(APIChat)
				opts.ReadyTimeout = 300 * time.Millisecond
				c := New([]ServerSpec{specOf(front, bearer)}, opts)
				c.Start(context.Background())
				c.Close()
				noneCaptured(t, captured)
			})
			for _, api := range []API{APIChat, APIGenerate} {
				t.Run("generations "+string(api), func(t *testing.T) {
					gens := []string{"/v1/chat/completions", "/generate"}
					opts := testOptions(api)
					opts.ReadyTimeout = 300 * time.Millisecond
					// The 1-token probe redirected: never ready.
					front, captured := redirector(t, f.URLs()[0], status, false, gens...)
					c := New([]ServerSpec{specOf(front, bearer)}, opts)
					if err := c.Start(context.Background()); err == nil || !strings.Contains(err.Error(), "redirect, not followed") {
						t.Errorf("Start: %v", err)
					}
					c.Close()
					noneCaptured(t, captured)
					// Ready, then every generation redirected: each fails.
					front, captured = redirector(t, f.URLs()[0], status, true, gens...)
					opts.MaxAttempts = 2
					c = startClient(t, []ServerSpec{specOf(front, bearer)}, opts)
					_, errs := runAll(t, c, 3, api)
					for i, err := range errs {
						if err == nil || !strings.Contains(err.Error(), "redirect, not followed") {
							t.Errorf("generation %d: %v", i, err)
						}
					}
					noneCaptured(t, captured)
				})
			}
		}
	}
}
