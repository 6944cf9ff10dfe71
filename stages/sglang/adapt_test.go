package sglang

import (
	"testing"
)

// An adaptive server's limit follows its real capacity on `pipe sim`
// servers that run 128 or 32 requests at once, from a start of 48 and a
// ceiling of 256: it ends within max_running_requests … + headroom, and the
// servers' queues stay short once it is there.
func TestAdaptiveConcurrencyFollowsCapacity(t *testing.T) {
	for _, capacity := range []int{128, 32} {
		cfg := fastSim(1)
		cfg.MaxRunning = capacity
		cfg.Speed = 400
		f := startSim(t, cfg)
		c := startClient(t, []ServerSpec{{URL: f.URLs()[0], Concurrency: 48, MaxConcurrency: 256}}, testOptions(APIGenerate))
		results, errs := runAll(t, c, 3000, APIGenerate)
		for _, err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
		st := c.Stats().Servers[0]
		lo, hi := capacity, capacity+headroomOf(capacity)
		if st.Concurrency < lo || st.Concurrency > hi {
			t.Errorf("capacity %d: limit %d at the end, want %d…%d", capacity, st.Concurrency, lo, hi)
		}
		// The last third ran at the converged limit: short queues.
		worst := 0
		for _, r := range results[2000:] {
			worst = max(worst, r.WaitingReqs)
		}
		if worst > 2*headroomOf(capacity) {
			t.Errorf("capacity %d: the server queued up to %d requests after converging", capacity, worst)
		}
		t.Logf("capacity %d: limit %d, worst queue %d in the last 1000", capacity, st.Concurrency, worst)
	}
}
