package sglang

import (
	"context"
	crand "crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"
)

func secret(t *testing.T, prefix string) string {
	t.Helper()
	var b [10]byte
	if _, err := crand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	return prefix + hex.EncodeToString(b[:])
}

func TestRedact(t *testing.T) {
	for in, want := range map[string]string{
		"http://host:30000":                  "http://host:30000",
		"http://user:s3cret@host:30000":      "http://host:30000",
		"https://user@host":                  "https://host",
		"http://user:p@ss@host:1":            "http://host:1", // an unescaped @ in the password
		"http://user:pa/ss@host:30000":       "http://host:30000",
		"http://user:pa ss@host:bad port":    "http://host:bad port",
		"user:s3cret@host:30000":             "host:30000",
		"http://user:s3cret@host:30000/path": "http://host:30000/path",
		"sim:4?speed=60":                     "sim:4?speed=60",
	} {
		if got := Redact(in); got != want {
			t.Errorf("Redact(%q) = %q, want %q", in, got, want)
		}
	}
}

// recorder is a reverse proxy in front of a server that keeps, for every
// request it passes on, its path and headers.
type recorder struct {
	*httptest.Server
	mu   sync.Mutex
	reqs []recorded
}

type recorded struct {
	method, path string
	header       http.Header
}

func newRecorder(t *testing.T, backend string) *recorder {
	u, err := url.Parse(backend)
	if err != nil {
		t.Fatal(err)
	}
	rp := httputil.NewSingleHostReverseProxy(u)
	r := &recorder{}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.mu.Lock()
		r.reqs = append(r.reqs, recorded{req.Method, req.URL.Path, req.Header.Clone()})
		r.mu.Unlock()
		rp.ServeHTTP(w, req)
	}))
	t.Cleanup(r.Close)
	return r
}

func (r *recorder) requests() []recorded {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]recorded(nil), r.reqs...)
}

// Every request the client sends (health, info, the 1-token probe on
// net/http, generations on the hand-written path) carries the server's
// headers, and a URL's user:password goes as Basic auth, never into the
// name the server goes by.
func TestHeadersOnEveryRequest(t *testing.T) {
	f := startSim(t, fastSim(2))
	key, pw, team := secret(t, "key-"), secret(t, "pw-"), secret(t, "team-")
	bearer := newRecorder(t, f.URLs()[0])
	basic := newRecorder(t, f.URLs()[1])
	basicURL := strings.Replace(basic.URL, "http://", "http://alice:"+pw+"@", 1)
	specs := []ServerSpec{
		{URL: bearer.URL, Concurrency: 4, Header: http.Header{"Authorization": {"Bearer " + key}, "X-Team": {team}}},
		{URL: basicURL + "/", Concurrency: 4, Header: http.Header{"x-team": {team}}},
	}
	for _, api := range []API{APIChat, APIGenerate} {
		t.Run(string(api), func(t *testing.T) {
			c := startClient(t, specs, testOptions(api))
			results, errs := runAll(t, c, 40, api)
			for i, err := range errs {
				if err != nil {
					t.Fatalf("prompt %d: %v", i, err)
				}
				if s := results[i].Server; s != bearer.URL && s != basic.URL {
					t.Fatalf("result names its server %q", s)
				}
			}
			for _, s := range c.Stats().Servers {
				if s.URL != bearer.URL && s.URL != basic.URL {
					t.Fatalf("stats name a server %q", s.URL)
				}
			}
		})
	}
	wantBasic := "Basic " + base64.StdEncoding.EncodeToString([]byte("alice:"+pw))
	for _, rec := range []struct {
		r    *recorder
		auth string
	}{{bearer, "Bearer " + key}, {basic, wantBasic}} {
		paths := map[string]int{}
		for _, q := range rec.r.requests() {
			paths[q.path]++
			if got := q.header.Get("Authorization"); got != rec.auth {
				t.Errorf("%s %s: Authorization %q, want %q", q.method, q.path, got, rec.auth)
			}
			if got := q.header.Values("X-Team"); len(got) != 1 || got[0] != team {
				t.Errorf("%s %s: X-Team %q", q.method, q.path, got)
			}
		}
		for _, p := range []string{"/health", "/server_info", "/generate", "/v1/chat/completions"} {
			if paths[p] == 0 {
				t.Errorf("no request to %s seen (%v)", p, paths)
			}
		}
	}
}

// A server that refuses the credentials fails Start at once (no waiting
// for ready_timeout), naming the server and what was sent, never the key.
func TestRefusedCredentialsFailStart(t *testing.T) {
	key := secret(t, "key-")
	cfg := fastSim(1)
	cfg.APIKey = key
	f := startSim(t, cfg)
	u := f.URLs()[0]
	wrong := secret(t, "wrong-")
	for _, tc := range []struct {
		name   string
		header http.Header
		want   string
	}{
		{"no key", nil, "no API key was sent"},
		{"wrong key", http.Header{"Authorization": {"Bearer " + wrong}}, "the API key sent was refused"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opts := testOptions(APIChat)
			opts.ReadyTimeout = time.Minute
			c := New([]ServerSpec{{URL: u, Concurrency: 2, Header: tc.header}}, opts)
			defer c.Close()
			start := time.Now()
			err := c.Start(context.Background())
			var ae *AuthError
			if !errors.As(err, &ae) {
				t.Fatalf("Start: %v, want an AuthError", err)
			}
			if time.Since(start) > 10*time.Second {
				t.Errorf("Start took %v: it waited instead of failing", time.Since(start))
			}
			msg := err.Error()
			for _, want := range []string{u, "401", "Unauthorized", tc.want} {
				if !strings.Contains(msg, want) {
					t.Errorf("error %q does not say %q", msg, want)
				}
			}
			if strings.Contains(msg, key) || strings.Contains(msg, wrong) {
				t.Errorf("error shows a key: %q", msg)
			}
		})
	}
	t.Run("right key", func(t *testing.T) {
		c := startClient(t, []ServerSpec{{URL: u, Concurrency: 4, Header: http.Header{"Authorization": {"Bearer " + key}}}}, testOptions(APIChat))
		_, errs := runAll(t, c, 20, APIChat)
		for _, err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
	})
	t.Run("probe", func(t *testing.T) {
		got := Probe(context.Background(), []ServerSpec{{URL: u}, {URL: u + "/", Header: http.Header{"Authorization": {"Bearer " + key}}}}, 2*time.Second)
		if g := got[0]; g.State != StateDown || !g.AuthFailed || !strings.Contains(g.Reason, "401") || !strings.Contains(g.Reason, "no API key was sent") {
			t.Errorf("without the key: %+v", g)
		}
		if g := got[1]; g.State != StateReady || g.AuthFailed || g.Model == "" || g.URL != u {
			t.Errorf("with the key: %+v", g)
		}
	})
}

// A header value that would end the header (a newline) is never sent: the
// server is not ready, and the reason names the header, not its value.
func TestHeaderInjectionRefused(t *testing.T) {
	f := startSim(t, fastSim(1))
	opts := testOptions(APIChat)
	opts.ReadyTimeout = 200 * time.Millisecond
	c := New([]ServerSpec{{URL: f.URLs()[0], Concurrency: 1, Header: http.Header{"X-Team": {"a\r\nX-Evil: 1"}}}}, opts)
	defer c.Close()
	err := c.Start(context.Background())
	if err == nil || !strings.Contains(err.Error(), "X-Team") || strings.Contains(err.Error(), "X-Evil") {
		t.Fatalf("Start: %v", err)
	}
	if f.Servers()[0].Stats().Requests != 0 {
		t.Error("a request was sent")
	}
	got := Probe(context.Background(), []ServerSpec{{URL: f.URLs()[0], Header: http.Header{"Host": {"x"}}}}, time.Second)
	if got[0].State != StateDown || !strings.Contains(got[0].Reason, "Host") {
		t.Errorf("a reserved header: %+v", got[0])
	}
}
