package sglang

import (
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// A server that stops answering mid-run (it accepts requests and its
// probes, and never answers): each request stuck on it is sent again to the
// other server after exactly StallTimeout (far beyond the 1 s latencies),
// as a counted attempt; a warning says so once; the server's probe fails and
// ejects it, which re-sends the rest of its requests at once. Every request
// gets exactly one result, none from the hung server after it hung.
func TestStalledRequestsAreSentElsewhere(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const answered = 20 // generations the hung server answers first
		ok := &fakeServer{generate: func(int) (int, time.Duration) { return http.StatusOK, time.Second }}
		hung := &fakeServer{
			generate: func(n int) (int, time.Duration) {
				if n <= answered {
					return http.StatusOK, time.Second
				}
				return http.StatusOK, 1000 * time.Hour
			},
			probe: func(n int) (int, time.Duration) {
				if n == 1 {
					return http.StatusOK, 0 // the start-up probe
				}
				return http.StatusOK, 1000 * time.Hour
			},
		}
		opts := clockOptions()
		opts.StallTimeout = 30 * time.Second
		warned := &lines{start: time.Now()}
		opts.Warn = warned.add
		c := fakeClient(t, fakeFleet{"ok:1": ok, "hung:1": hung}, opts, "hung:1", "ok:1")
		defer c.Close()
		if err := c.Start(t.Context()); err != nil {
			t.Fatal(err)
		}
		const n = 200
		var next atomic.Int64
		results := make([]*Result, n)
		var wg sync.WaitGroup
		for range 8 {
			wg.Go(func() {
				for i := int(next.Add(1)) - 1; i < n; i = int(next.Add(1)) - 1 {
					res, err := generateOne(c)
					if err != nil {
						t.Errorf("request %d: %v", i, err)
						continue
					}
					results[i] = res
				}
			})
		}
		wg.Wait()
		hedged := 0
		fromHung := 0
		for i, r := range results {
			if r == nil {
				t.Fatalf("request %d has no result", i)
			}
			if r.Server == "http://hung:1" {
				fromHung++
			}
			if r.Attempts > 1 {
				hedged++
				if r.Server != "http://ok:1" {
					t.Errorf("request %d: sent again but answered by %s", i, r.Server)
				}
			}
		}
		if fromHung != answered {
			t.Errorf("%d results from the hung server, want the %d it answered", fromHung, answered)
		}
		if hedged == 0 {
			t.Error("no result counts the attempt sent again")
		}
		gens, _ := hung.times()
		if len(gens) <= answered {
			t.Fatalf("the hung server got %d generations", len(gens))
		}
		line, at, found := warned.find("http://hung:1: a request has been in flight for 30s")
		if !found {
			t.Fatalf("no stall warning: %q", warned.text)
		}
		if want := gens[answered] + 30*time.Second; at != want {
			t.Errorf("warned at %v, want %v (the first stuck request's start + stall_timeout)", at, want)
		}
		if !strings.Contains(line, "sent again to another server") {
			t.Errorf("warning %q", line)
		}
		if len(warned.text) != 1 {
			t.Errorf("%d warnings, want 1: %q", len(warned.text), warned.text)
		}
		// The probe of the suspect server gives up after the threshold.
		time.Sleep(time.Minute)
		synctest.Wait()
		st := c.Stats().Servers[0]
		if st.Stalls == 0 || st.Ejections != 1 || st.State != StateDown || !strings.Contains(st.Reason, "a request stalled and no answer to its probe within 30s") {
			t.Errorf("the hung server's figures: %+v", st)
		}
	})
}

// A request slower than StallTimeout on a fleet whose latencies are all
// that long is no stall: nothing is sent twice.
func TestLongRequestsAreNoStall(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		slow := func(int) (int, time.Duration) { return http.StatusOK, 20 * time.Minute }
		opts := clockOptions()
		opts.StallTimeout = time.Minute
		opts.RequestTimeout = time.Hour
		c := fakeClient(t, fakeFleet{"a:1": {generate: slow}, "b:1": {generate: slow}}, opts, "a:1", "b:1")
		defer c.Close()
		if err := c.Start(t.Context()); err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		var twice atomic.Int64
		for range 4 {
			wg.Go(func() {
				for range 10 {
					res, err := generateOne(c)
					if err != nil {
						t.Error(err)
						return
					}
					if res.Attempts > 1 {
						twice.Add(1)
					}
				}
			})
		}
		wg.Wait()
		// Before 20 completions nothing is judged; after, the threshold is
		// 4× the p99 (80 min).
		if n := twice.Load(); n != 0 {
			t.Errorf("%d requests of 20 minutes were sent twice", n)
		}
	})
}

// On a fleet of one, a stalled request has nowhere to go: once the
// server's probe answers, the other requests go on at once, and the slow
// one still finishes there (never sent twice).
func TestStallOnALoneServerBlocksNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := &fakeServer{generate: func(n int) (int, time.Duration) {
			if n == 25 {
				return http.StatusOK, 10 * time.Minute
			}
			return http.StatusOK, time.Second
		}}
		opts := clockOptions()
		opts.StallTimeout = 30 * time.Second
		opts.RequestTimeout = time.Hour
		warned := &lines{start: time.Now()}
		opts.Warn = warned.add
		c := fakeClient(t, fakeFleet{"a:1": srv}, opts, "a:1")
		defer c.Close()
		if err := c.Start(t.Context()); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		var mu sync.Mutex
		var lastQuick time.Duration
		var wg sync.WaitGroup
		var next atomic.Int64
		for range 4 {
			wg.Go(func() {
				for next.Add(1) <= 200 {
					res, err := generateOne(c)
					if err != nil {
						t.Error(err)
						return
					}
					if res.Attempts != 1 {
						t.Errorf("sent %d times", res.Attempts)
					}
					if res.Latency < time.Minute {
						mu.Lock()
						lastQuick = max(lastQuick, time.Since(start))
						mu.Unlock()
					}
				}
			})
		}
		wg.Wait()
		if _, _, ok := warned.find("http://a:1: a request has been in flight"); !ok {
			t.Errorf("no stall warning: %q", warned.text)
		}
		// 199 one-second requests on 4 slots, 3 while one is stuck: about
		// a minute, plus the wait for the probe; never the 10 minutes.
		if lastQuick > 3*time.Minute {
			t.Errorf("the quick requests ended at %v: the stalled one held them up", lastQuick)
		}
	})
}
