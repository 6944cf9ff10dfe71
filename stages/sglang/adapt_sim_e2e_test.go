//go:build e2e

package sglang

// These run the adaptive limit against `pipe sim` over HTTP for thousands
// of requests (about 16 s together): the e2e layer holds tests that run
// long. TestAdaptiveLearnsCapacity and the other model tests in
// adapt_test.go check the same controller in-process in the unit layer.

import (
	"testing"

	"github.com/pipe-dev/pipe/stages/sglang/sim"
)

// The same on `pipe sim` servers whose /server_info does not say their
// capacity (sim HideCapacity): the limit doubles from its start of 16 until
// the server queues, then holds at the capacity plus at most the refills
// in transit (adaptHeadroom), and the queue stays all but empty. Speed 100
// and the benchmark's lengths, not fastSim's: at Speed 400 a loaded
// machine cannot keep 128 short requests' simulated time, their latency
// per token rises with the batch, and the latency guard (rightly, for
// what it sees) steps the limit back below the capacity.
func TestAdaptiveLearnsCapacityOnSim(t *testing.T) {
	if raceDetector {
		// The limit follows latency; under the race detector's slowdown
		// latency is noise (a CI run stopped at 65 of 128). The plain
		// go test step runs it.
		t.Skip("timing: skipped under the race detector")
	}
	for _, capacity := range []int{128, 32} {
		cfg := sim.Config{Count: 1, Speed: 100, ThinkTokensMean: 300, AnswerTokensMean: 100}
		cfg.MaxRunning, cfg.HideCapacity = capacity, true
		f := startSim(t, cfg)
		c := startClient(t, []ServerSpec{{URL: f.URLs()[0], MaxConcurrency: 256}}, testOptions(APIGenerate))
		if info := c.servers[0].info; info == nil || info.MaxRunningRequests != 0 {
			t.Fatalf("capacity %d: /server_info read as %+v, want no capacity", capacity, info)
		}
		results, errs := runAll(t, c, 2000, APIGenerate)
		for _, err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
		st := c.Stats().Servers[0]
		if st.Concurrency < capacity || st.Concurrency > capacity+2 {
			t.Errorf("capacity %d: limit %d at the end, want %d…%d", capacity, st.Concurrency, capacity, capacity+2)
		}
		worst := 0
		for _, r := range results[1300:] {
			worst = max(worst, r.WaitingReqs)
		}
		if worst > 2 {
			t.Errorf("capacity %d: the server queued up to %d requests after the limit learned its capacity", capacity, worst)
		}
		c.mu.Lock()
		t.Logf("capacity %d: limit %d, worst queue %d in the last 700 (peak running %d, latency guard %+v)", capacity, st.Concurrency, worst, c.servers[0].peakRunning, c.servers[0].latency)
		c.mu.Unlock()
	}
}

// A server whose KV cache holds fewer requests than it would run (pipe sim
// KVTokens) retracts some: it admits as many as their max_new_tokens
// estimates fit (as SGLang does, sim's admission), and retracts when their
// outputs outgrow the estimate; the adaptive limit backs off from the
// max_running_requests it started at.
func TestAdaptiveBacksOffOnRetractions(t *testing.T) {
	cfg := sim.Config{Count: 1, Speed: 40, MaxRunning: 32, KVTokens: 2400, ThinkTokensMean: 200, AnswerTokensMean: 60}
	f := startSim(t, cfg)
	opts := testOptions(APIGenerate)
	opts.Sampling.MaxOutputTokens = 400
	c := startClient(t, []ServerSpec{{URL: f.URLs()[0], MaxConcurrency: 256}}, opts)
	results, errs := runAll(t, c, 400, APIGenerate)
	retracted := 0
	for i, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
		if results[i].Retractions > 0 {
			retracted++
		}
	}
	st := c.Stats().Servers[0]
	t.Logf("%d of 400 retracted; limit %d at the end", retracted, st.Concurrency)
	if retracted == 0 {
		t.Fatal("no retraction: the test's KV cache is not small enough")
	}
	if st.Concurrency >= 32 {
		t.Errorf("limit %d at the end, want below the 32 it started at", st.Concurrency)
	}
}
