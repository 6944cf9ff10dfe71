package sglang

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pipe-dev/pipe/stages/sglang/sim"
)

// drive generates n native prompts with one goroutine per slot, as the
// stage's workers do. after, if set, is called after each completion with
// the number completed so far (from the completing goroutine).
type drive struct {
	results  []*Result
	errs     []error
	doneAt   []time.Time
	lastTake time.Time // when the last prompt was taken: work ran out
	start    time.Time
}

func driveAll(t testing.TB, c *Client, n int, after func(done int64)) *drive {
	t.Helper()
	d := &drive{results: make([]*Result, n), errs: make([]error, n), doneAt: make([]time.Time, n), start: time.Now()}
	var next, done atomic.Int64
	var mu sync.Mutex
	var wg sync.WaitGroup
	for range c.Capacity() {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				if i == n-1 {
					mu.Lock()
					d.lastTake = time.Now()
					mu.Unlock()
				}
				s := c.Session()
				d.results[i], d.errs[i] = s.Generate(context.Background(), &Request{
					Text: fmt.Sprintf("<|im_start|>user\nquestion %d<|im_end|>\n<|im_start|>assistant\n", i)})
				s.Close()
				d.doneAt[i] = time.Now()
				k := done.Add(1)
				if after != nil {
					after(k)
				}
			}
		})
	}
	wg.Wait()
	return d
}

func (d *drive) mustAllComplete(t *testing.T) {
	t.Helper()
	for i, err := range d.errs {
		if err != nil {
			t.Fatalf("prompt %d lost: %v", i, err)
		}
		if d.results[i] == nil || d.results[i].CompletionTokens == 0 {
			t.Fatalf("prompt %d: empty result %+v", i, d.results[i])
		}
	}
}

func TestFaultsEveryRecordCompletes(t *testing.T) {
	cfg := fastSim(3)
	cfg.Faults = []sim.Fault{{Kind: sim.FaultQueueFull, Rate: 0.05}, {Kind: sim.FaultReset, Rate: 0.01}}
	f := startSim(t, cfg)
	opts := testOptions(APIGenerate)
	opts.MaxAttempts = 8 // 6%-per-attempt failures, 600 records: 8 in a row never happens
	c := startClient(t, specsOf(f.URLs(), 8), opts)
	d := driveAll(t, c, 600, nil)
	d.mustAllComplete(t)
	st := c.Stats().Total
	retried := 0
	for _, r := range d.results {
		if r.Attempts > 1 {
			retried++
		}
	}
	t.Logf("errors %v, %d of 600 records needed more than one attempt, ejections %d", st.Errors, retried, st.Ejections)
	if st.Errors["http_503"] == 0 || retried == 0 {
		t.Errorf("no 503 was seen (%v): the faults did not fire, the test proves nothing", st.Errors)
	}
	if st.Completions != 600 || st.InFlight != 0 {
		t.Errorf("total %+v", st)
	}
}

func TestKilledServerLosesNothing(t *testing.T) {
	f := startSim(t, fastSim(3))
	c := startClient(t, specsOf(f.URLs(), 8), testOptions(APIGenerate))
	victim := f.Servers()[0]
	const n = 900
	var revivedAt atomic.Pointer[time.Time]
	d := driveAll(t, c, n, func(done int64) {
		switch done {
		case n / 5:
			victim.Kill()
		case n / 2:
			if err := victim.Revive(); err != nil {
				t.Errorf("revive: %v", err)
			}
			now := time.Now()
			revivedAt.Store(&now)
		}
	})
	d.mustAllComplete(t)
	v := c.Stats().Servers[0]
	t.Logf("victim: %+v", v)
	if v.Ejections == 0 {
		t.Errorf("the killed server was never ejected")
	}
	if v.State != StateReady {
		t.Errorf("the revived server is %s (%s), want re-admitted", v.State, v.Reason)
	}
	// Completions on the victim after its revival prove it was re-admitted
	// and used while work remained.
	after := 0
	for i, r := range d.results {
		if r.Server == victim.URL() && d.doneAt[i].After(*revivedAt.Load()) {
			after++
		}
	}
	if after == 0 {
		t.Errorf("no completion on the revived server")
	}
	retried := 0
	for _, r := range d.results {
		if r.Attempts > 1 {
			retried++
		}
	}
	if retried == 0 {
		t.Errorf("no record was re-sent: the requests in flight on the killed server vanished?")
	}
}

func TestHungServerIsEjectedAndItsRequestsResent(t *testing.T) {
	// Server 1 stops answering 20 simulated seconds in (100 ms of wall
	// time): its requests time out, the breaker ejects it, and the requests
	// still hanging there are re-sent to server 0 at once.
	cfg := fastSim(2)
	cfg.Faults = []sim.Fault{{Kind: sim.FaultHang, At: 20 * time.Second, Servers: []int{1}}}
	f := startSim(t, cfg)
	opts := testOptions(APIGenerate)
	opts.RequestTimeout = 300 * time.Millisecond
	opts.ProbeTimeout = 300 * time.Millisecond
	opts.BreakerFailures = 3
	c := startClient(t, specsOf(f.URLs(), 8), opts)
	d := driveAll(t, c, 800, nil)
	d.mustAllComplete(t)
	st := c.Stats()
	hung := st.Servers[1]
	t.Logf("hung server: %+v", hung)
	if hung.Ejections == 0 || hung.State != StateDown || hung.Errors[ClassTimeout] < 3 {
		t.Errorf("the hung server was not ejected after its timeouts: %+v", hung)
	}
	if hung.Errors[ClassEjected] == 0 {
		t.Errorf("no request in flight on the hung server was cut short and re-sent")
	}
}
