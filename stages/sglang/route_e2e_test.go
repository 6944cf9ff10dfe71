//go:build e2e

package sglang

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/pipe-dev/pipe/internal/testrig/testenv"
)

// Two `pipe sim` processes with the same fixed concurrency (16) but
// different capacities: one runs 2 requests at once and queues the rest,
// the other runs 16. With fewer requests in flight than slots (12 callers),
// routing decides: the server that reports a queue (num_waiting_reqs) and
// holds more tokens in flight per slot gets few requests, the other most.
// Round-robin, or least outstanding without the server's queue, would send
// the small one about half (it frees slots more slowly, but each freed one
// is taken again).
func TestRoutingPrefersTheServerWithoutAQueueProcess(t *testing.T) {
	bin := testenv.PipeBinary(t)
	args := []string{"--speed", "100", "--think-mean", "60", "--answer-mean", "20"}
	small := testenv.StartSim(t, bin, 1, append(args, "--max-running", "2")...)
	big := testenv.StartSim(t, bin, 1, append(args, "--max-running", "16")...)
	c := startClient(t, []ServerSpec{{URL: small.URLs[0], Concurrency: 16}, {URL: big.URLs[0], Concurrency: 16}}, testOptions(APIGenerate))
	const n, callers = 600, 12
	var next atomic.Int64
	var mu sync.Mutex
	by := map[string]int{}
	var wg sync.WaitGroup
	for range callers {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				s := c.Session()
				r, err := s.Generate(context.Background(), &Request{Text: fmt.Sprintf("<|im_start|>user\nprompt %d<|im_end|>\n<|im_start|>assistant\n", i)})
				s.Close()
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				by[r.Server]++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	t.Logf("small (2 running): %d, big (16 running): %d", by[small.URLs[0]], by[big.URLs[0]])
	if got := by[small.URLs[0]]; got > n/5 {
		t.Errorf("the server that queues answered %d of %d, want at most %d", got, n, n/5)
	}
}
