package sglang

import (
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// refusingProxy passes requests to backend until after generations POSTs
// have passed; from then on it answers every POST with status (health and
// info GETs still pass, as a gateway that lost a route would).
func refusingProxy(t *testing.T, backend string, after int64, status int) *httptest.Server {
	t.Helper()
	u, err := url.Parse(backend)
	if err != nil {
		t.Fatal(err)
	}
	rp := httputil.NewSingleHostReverseProxy(u)
	rp.ErrorLog = log.New(io.Discard, "", 0) // requests cut short by the ejection
	var posts atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && posts.Add(1) > after {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(status)
			w.Write([]byte(`{"detail":"Forbidden: route revoked"}`))
			return
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv
}

func TestForbiddenMidRunEjectsOnlyThatServer(t *testing.T) {
	// Server 1 answers 403 to generations once 30 have passed: it is
	// ejected with the reason, its requests are re-sent to the others as
	// counted attempts, and every prompt completes.
	f := startSim(t, fastSim(3))
	urls := f.URLs()
	bad := refusingProxy(t, urls[1], 30, http.StatusForbidden)
	urls[1] = bad.URL
	opts := testOptions(APIGenerate)
	var logMu sync.Mutex
	var logged []string
	opts.Logf = func(format string, args ...any) {
		logMu.Lock()
		defer logMu.Unlock()
		logged = append(logged, fmt.Sprintf(format, args...))
	}
	c := startClient(t, specsOf(urls, 8), opts)
	d := driveAll(t, c, 600, nil)
	d.mustAllComplete(t)
	retried := 0
	for _, r := range d.results {
		if r.Attempts > 1 {
			retried++
		}
	}
	st := c.Stats()
	s := st.Servers[1]
	if s.Ejections == 0 || s.State != StateDown || s.Errors["http_403"] == 0 || !strings.Contains(s.Reason, "403") {
		t.Errorf("the refusing server was not ejected: %+v", s)
	}
	if retried == 0 {
		t.Errorf("no completion counts the refused attempt")
	}
	for i, o := range st.Servers {
		if i != 1 && (o.Ejections != 0 || o.State != StateReady) {
			t.Errorf("server %d affected: %+v", i, o)
		}
	}
	logMu.Lock()
	defer logMu.Unlock()
	found := false
	for _, l := range logged {
		if strings.Contains(l, bad.URL+" ejected: HTTP 403: Forbidden: route revoked") {
			found = true
		}
	}
	if !found {
		t.Errorf("no ejection with the reason in the log: %q", logged)
	}
}

func TestServerFaultClassification(t *testing.T) {
	for status, want := range map[int]bool{400: false, 401: true, 403: true, 404: true, 409: true, 408: false, 413: false, 422: false, 429: false, 500: false, 503: false} {
		if got := statusError("http://s", status, nil).ServerFault(); got != want {
			t.Errorf("%d: ServerFault %v, want %v", status, got, want)
		}
	}
}
