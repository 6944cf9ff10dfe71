package sglang

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// The client's timing — backoff, breaker, probes, check and request
// timeouts, ready_timeout, notifications — tested on testing/synctest's fake
// clock: exact to the nanosecond, instant, and deaf to a loaded machine.
// The servers are in-memory (fakeServer behind fakeFleet, a RoundTripper):
// a real socket would keep the bubble from ever being idle.

// fakeServer is one in-memory server. Its handlers run on the caller's
// goroutine in the bubble, so their sleeps are on the fake clock.
type fakeServer struct {
	mu sync.Mutex
	// health answers GET /health: a status, after a delay (nil: 200 at once).
	health func() (status int, delay time.Duration)
	// generate answers the n-th generation (probes excluded), from 1.
	generate func(n int) (status int, delay time.Duration)
	// probe answers the n-th 1-token probe, from 1 (nil: 200 at once).
	probe  func(n int) (status int, delay time.Duration)
	n      int
	at     []time.Duration // when each generation arrived, since start
	probes []time.Duration // when each 1-token probe arrived
	start  time.Time
}

type fakeFleet map[string]*fakeServer // by host

func (f fakeFleet) RoundTrip(req *http.Request) (*http.Response, error) {
	s := f[req.URL.Host]
	if s == nil {
		return nil, fmt.Errorf("dial tcp %s: connection refused", req.URL.Host)
	}
	var body []byte
	if req.Body != nil {
		body, _ = io.ReadAll(req.Body)
		req.Body.Close()
	}
	status, delay, answer := http.StatusNotFound, time.Duration(0), `{"detail":"Not Found"}`
	switch req.URL.Path {
	case "/health":
		status, answer = http.StatusOK, ""
		if s.health != nil {
			status, delay = s.health()
		}
	case "/get_server_info":
		status, answer = http.StatusOK, `{"model_path":"m","context_length":4096}`
	case "/generate":
		var b struct {
			RID string `json:"rid"`
		}
		_ = json.Unmarshal(body, &b)
		s.mu.Lock()
		since := time.Since(s.start)
		probe := strings.Contains(b.RID, "probe")
		n, pn := 0, 0
		if probe {
			s.probes = append(s.probes, since)
			pn = len(s.probes)
		} else {
			s.n++
			n = s.n
			s.at = append(s.at, since)
		}
		s.mu.Unlock()
		status = http.StatusOK
		if !probe && s.generate != nil {
			status, delay = s.generate(n)
		}
		if probe && s.probe != nil {
			status, delay = s.probe(pn)
		}
		answer = `{"text":"ok","meta_info":{"finish_reason":{"type":"stop"},"prompt_tokens":3,"completion_tokens":1}}`
		if status != http.StatusOK {
			answer = fmt.Sprintf(`{"object":"error","message":"status %d","code":%d}`, status, status)
		}
	}
	if delay > 0 {
		select {
		case <-time.After(delay):
		case <-req.Context().Done():
			return nil, req.Context().Err()
		}
	}
	return &http.Response{StatusCode: status, Header: http.Header{}, Body: io.NopCloser(strings.NewReader(answer)),
		ContentLength: int64(len(answer)), Request: req}, nil
}

func (s *fakeServer) times() (gens, probes []time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]time.Duration(nil), s.at...), append([]time.Duration(nil), s.probes...)
}

// clockOptions are testOptions on round numbers, for exact expectations.
func clockOptions() Options {
	o := testOptions(APIGenerate)
	o.BackoffMin, o.BackoffMax = time.Second, 8*time.Second
	o.ProbeInterval = 5 * time.Second
	o.CheckTimeout = 10 * time.Second
	o.ProbeTimeout = time.Minute
	o.ReadyTimeout = 10 * time.Minute
	return o
}

// fakeClient is a client of the servers at hosts, in that order; a host
// not in fleet refuses connections.
func fakeClient(t *testing.T, fleet fakeFleet, opts Options, hosts ...string) *Client {
	t.Helper()
	var specs []ServerSpec
	for _, host := range hosts {
		if s := fleet[host]; s != nil {
			s.start = time.Now()
		}
		specs = append(specs, ServerSpec{URL: "http://" + host, Concurrency: 4})
	}
	return newClient(specs, opts, fleet)
}

func generateOne(c *Client) (*Result, error) {
	s := c.Session()
	defer s.Close()
	return s.Generate(context.Background(), &Request{Text: "x"})
}

// Retries wait a jittered exponential backoff: after the n-th failure
// between half and all of min(BackoffMin·2^(n-1), BackoffMax).
func TestBackoffSchedule(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := &fakeServer{generate: func(n int) (int, time.Duration) {
			if n <= 5 {
				return http.StatusServiceUnavailable, 0
			}
			return http.StatusOK, 0
		}}
		opts := clockOptions()
		opts.MaxAttempts = 6
		opts.BreakerFailures = 100 // this test is about the backoff alone
		c := fakeClient(t, fakeFleet{"a:1": srv}, opts, "a:1")
		defer c.Close()
		if err := c.Start(t.Context()); err != nil {
			t.Fatal(err)
		}
		r, err := generateOne(c)
		if err != nil {
			t.Fatal(err)
		}
		if r.Attempts != 6 {
			t.Errorf("attempts %d, want 6", r.Attempts)
		}
		at, _ := srv.times()
		if len(at) != 6 {
			t.Fatalf("%d generations reached the server, want 6", len(at))
		}
		for n := 1; n < len(at); n++ {
			full := min(time.Second<<(n-1), 8*time.Second)
			if gap := at[n] - at[n-1]; gap < full/2 || gap > full {
				t.Errorf("wait after failure %d: %v, want %v..%v", n, gap, full/2, full)
			}
		}
	})
}

// BreakerFailures consecutive failures eject a server; it is probed every
// ProbeInterval and re-admitted once a probe passes. Slow answers never
// eject it.
func TestBreakerEjectsAndProbesReadmit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var healthy sync.Mutex
		down := true
		srv := &fakeServer{
			generate: func(n int) (int, time.Duration) {
				if n <= 3 {
					return http.StatusInternalServerError, 0
				}
				return http.StatusOK, 20 * time.Minute // slow, but answers
			},
			health: func() (int, time.Duration) {
				healthy.Lock()
				defer healthy.Unlock()
				if down {
					return http.StatusServiceUnavailable, 0
				}
				return http.StatusOK, 0
			},
		}
		// Healthy for Start, then down until the test says.
		down = false
		opts := clockOptions()
		opts.BreakerFailures = 3
		opts.MaxAttempts = 10
		c := fakeClient(t, fakeFleet{"a:1": srv}, opts, "a:1")
		defer c.Close()
		if err := c.Start(t.Context()); err != nil {
			t.Fatal(err)
		}
		healthy.Lock()
		down = true
		healthy.Unlock()
		done := make(chan error, 1)
		go func() { _, err := generateOne(c); done <- err }()
		time.Sleep(4 * time.Second) // three failures, backoffs of at most 1s and 2s between
		synctest.Wait()
		// Three failures ejected the server.
		st := c.Stats().Servers[0]
		if st.State != StateDown || st.Ejections != 1 || !strings.Contains(st.Reason, "3 consecutive failures") {
			t.Fatalf("after 3 failures: %+v", st)
		}
		ejectedAt := time.Now()
		time.Sleep(time.Minute) // probes every 5s find /health 503
		synctest.Wait()
		if st := c.Stats().Servers[0]; st.State != StateDown {
			t.Fatalf("re-admitted while /health answers 503: %+v", st)
		}
		healthy.Lock()
		down = false
		healthy.Unlock()
		time.Sleep(5 * time.Second) // the next probe passes
		synctest.Wait()
		if st := c.Stats().Servers[0]; st.State != StateReady {
			t.Fatalf("not re-admitted one probe interval after recovery: %+v", st)
		}
		_, probes := srv.times()
		// One probe at Start, then one per interval after the ejection.
		if last := probes[len(probes)-1]; last <= ejectedAt.Sub(srv.start) {
			t.Errorf("no probe after the ejection: %v", probes)
		}
		if err := <-done; err != nil {
			t.Fatalf("the generation failed: %v", err)
		}
		if st := c.Stats().Servers[0]; st.Ejections != 1 {
			t.Errorf("a 20-minute answer ejected the server: %+v", st)
		}
	})
}

// A request past RequestTimeout is a timeout failure after exactly that long.
func TestRequestTimeoutIsExact(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := &fakeServer{generate: func(n int) (int, time.Duration) { return http.StatusOK, time.Hour }}
		opts := clockOptions()
		opts.RequestTimeout = 30 * time.Minute
		opts.MaxAttempts = 1
		c := fakeClient(t, fakeFleet{"a:1": srv}, opts, "a:1")
		defer c.Close()
		if err := c.Start(t.Context()); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		_, err := generateOne(c)
		var ex *ExhaustedError
		if !errors.As(err, &ex) || ex.Last.Class != ClassTimeout {
			t.Fatalf("err = %v, want a timeout", err)
		}
		if el := time.Since(start); el != 30*time.Minute {
			t.Errorf("gave up after %v, want exactly the 30m request timeout", el)
		}
	})
}

// A server whose /health never answers is down after CheckTimeout, not
// after the request or probe timeouts; the run starts on the other.
func TestHangingHealthIsDownAfterCheckTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		hang := &fakeServer{health: func() (int, time.Duration) { return http.StatusOK, 1000 * time.Hour }}
		c := fakeClient(t, fakeFleet{"ok:1": {}, "hang:1": hang}, clockOptions(), "ok:1", "hang:1")
		defer c.Close()
		start := time.Now()
		if err := c.Start(t.Context()); err != nil {
			t.Fatal(err)
		}
		// Start waits for the others' first checks only startGrace once a
		// server is ready.
		if el := time.Since(start); el != startGrace {
			t.Errorf("Start took %v, want startGrace (%v)", el, startGrace)
		}
		time.Sleep(10*time.Second - startGrace)
		synctest.Wait()
		for _, s := range c.Stats().Servers {
			if s.URL == "http://hang:1" && (s.State != StateDown || s.Reason != "/health: no answer within 10s") {
				t.Errorf("hanging server: %+v", s)
			}
		}
	})
}

// With no server ready, Notify names every server with its reason every
// NotifyInterval, and Start gives up after exactly ReadyTimeout with every
// server's reason.
func TestWaitingIsNotifiedUntilReadyTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		hang := &fakeServer{health: func() (int, time.Duration) { return http.StatusOK, 1000 * time.Hour }}
		opts := clockOptions()
		var mu sync.Mutex
		var lines []string
		var at []time.Duration
		start := time.Now()
		opts.Notify = func(format string, args ...any) {
			mu.Lock()
			defer mu.Unlock()
			lines = append(lines, fmt.Sprintf(format, args...))
			at = append(at, time.Since(start))
		}
		// refused:1 is not in the fleet: connection refused.
		c := fakeClient(t, fakeFleet{"hang:1": hang}, opts, "hang:1", "refused:1")
		defer c.Close()
		err := c.Start(t.Context())
		var down *AllDownError
		if !errors.As(err, &down) {
			t.Fatalf("Start = %v, want AllDownError", err)
		}
		// ready_timeout counts from the start of the wait, as the waiting
		// line says ("gives up after 10m0s"), checks included.
		if el := time.Since(start); el != 10*time.Minute {
			t.Errorf("Start gave up after %v, want 10m", el)
		}
		if !strings.Contains(err.Error(), "http://hang:1: /health: no answer within 10s") || !strings.Contains(err.Error(), "http://refused:1: unreachable: ") {
			t.Errorf("error does not give every server's reason: %v", err)
		}
		mu.Lock()
		defer mu.Unlock()
		if len(lines) < 100 {
			t.Fatalf("%d notifications in 10 minutes, want one every 5s", len(lines))
		}
		for i := range at {
			if at[i] != time.Duration(i+1)*5*time.Second {
				t.Fatalf("notification %d at %v, want every 5s: %v", i, at[i], at[:i+1])
			}
		}
		want := "http://hang:1 down (/health: no answer within 10s); http://refused:1 down (unreachable: "
		if !strings.Contains(lines[len(lines)-1], want) || !strings.HasPrefix(lines[len(lines)-1], "no server ready for ") {
			t.Errorf("last notification %q does not name both servers' reasons", lines[len(lines)-1])
		}
		if !strings.HasPrefix(lines[0], "no server ready for 5s (gives up after 10m0s): http://hang:1 checking") {
			t.Errorf("first notification %q: want the hanging server shown as still being checked", lines[0])
		}
	})
}

// Two servers at full speed and one three times slower: each is kept at its
// cap while work remains, so the fleet goes at the sum of what each server
// does at its cap (cap / latency) — exactly, on the fake clock — and the
// slow server gets a third of what a fast one gets.
func TestSlowServerDoesNotHoldUpTheOthers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		at := func(d time.Duration) *fakeServer {
			return &fakeServer{generate: func(int) (int, time.Duration) { return http.StatusOK, d }}
		}
		fleet := fakeFleet{"fast1:1": at(100 * time.Millisecond), "fast2:1": at(100 * time.Millisecond), "slow:1": at(300 * time.Millisecond)}
		c := fakeClient(t, fleet, clockOptions(), "fast1:1", "fast2:1", "slow:1") // concurrency 4 each
		defer c.Close()
		if err := c.Start(t.Context()); err != nil {
			t.Fatal(err)
		}
		const n = 1400
		d := driveAll(t, c, n, nil)
		d.mustAllComplete(t)
		count := map[string]int{}
		inWindow := 0
		for i, r := range d.results {
			count[r.Server]++
			if !d.doneAt[i].After(d.lastTake) {
				inWindow++
			}
		}
		capacity := 4/0.1 + 4/0.1 + 4/0.3 // completions per second
		throughput := float64(inWindow) / d.lastTake.Sub(d.start).Seconds()
		if throughput < 0.99*capacity || throughput > 1.01*capacity {
			t.Errorf("throughput %.2f/s while work remained, want the fleet's capacity %.2f/s", throughput, capacity)
		}
		if s, f := count["http://slow:1"], count["http://fast1:1"]; s*3 < f*9/10 || s*3 > f*11/10 {
			t.Errorf("the slow server did %d records, a fast one %d: want a third", s, f)
		}
	})
}
