//go:build e2e

package sglang

import (
	"bytes"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
)

// endless is a proxy in front of a server that answers every generation
// but the 1-token probe with a body that never ends.
func endless(t *testing.T, backend string) string {
	u, err := url.Parse(backend)
	if err != nil {
		t.Fatal(err)
	}
	rp := httputil.NewSingleHostReverseProxy(u)
	chunk := []byte(`{"choices":[{"message":{"content":"` + strings.Repeat("x", 64<<10))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.Header.Get("X-Probe") != "" {
			rp.ServeHTTP(w, r)
			return
		}
		var body bytes.Buffer
		body.ReadFrom(r.Body)
		if bytes.Contains(body.Bytes(), []byte(`"Hi"`)) { // the 1-token probe
			r.Body = http.NoBody
			r2 := r.Clone(r.Context())
			r2.Body = ioNopCloser(body.Bytes())
			r2.ContentLength = int64(body.Len())
			rp.ServeHTTP(w, r2)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		for r.Context().Err() == nil {
			if _, err := w.Write(chunk[:len(chunk)-1]); err != nil {
				return
			}
		}
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// peakRSS is the process's resident high-water mark (VmHWM) in bytes.
func peakRSS(t *testing.T) int64 {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Skip("no /proc/self/status")
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10
		}
	}
	t.Skip("no VmHWM")
	return 0
}

// Never-ending answers at 48 requests in flight fail those requests with
// a message naming the fleet's budget, instead of 48 × 256 MiB; the budget
// is all given back, and the process stays far below a gigabyte.
func TestEndlessBodiesStayWithinTheBudget(t *testing.T) {
	if testing.Short() {
		// The race step runs -short: its detector multiplies memory, so
		// the process's RSS says nothing about the budget there.
		t.Skip("measures the process's peak RSS")
	}
	f := startSim(t, fastSim(1))
	front := endless(t, f.URLs()[0])
	opts := testOptions(APIChat)
	opts.MaxAttempts = 2
	opts.BreakerFailures = 1000 // keep the server admitted: every request reads
	c := startClient(t, []ServerSpec{{URL: front, Concurrency: 48}}, opts)
	start := time.Now()
	_, errs := runAll(t, c, 96, APIChat)
	for i, err := range errs {
		var eb *Error
		if !errors.As(err, &eb) || !strings.Contains(eb.Message, "budget for them") {
			t.Fatalf("generation %d: %v", i, err)
		}
	}
	if used := c.budget.used.Load(); used != 0 {
		t.Errorf("%d bytes of the budget not given back", used)
	}
	runtime.GC()
	peak := peakRSS(t)
	t.Logf("96 never-ending answers at concurrency 48, 2 attempts each, in %v: peak RSS %d MiB (budget %d MiB)", time.Since(start).Round(time.Millisecond), peak>>20, c.budget.max>>20)
	if peak > 1<<30 {
		t.Errorf("peak RSS %d MiB", peak>>20)
	}
}

func ioNopCloser(b []byte) *nopCloser { return &nopCloser{bytes.NewReader(b)} }
