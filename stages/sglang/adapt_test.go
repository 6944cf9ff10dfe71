package sglang

import (
	"testing"
	"time"
)

// An adaptive server's limit follows its real capacity on `pipe sim`
// servers that run 128 or 32 requests at once, from a start of 48 and a
// ceiling of 256: /server_info gives the capacity, and the limit ends at
// exactly max_running_requests, with the servers' queues all but empty
// once it is there (each queued request only adds its wait to latency).
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
		if st.Concurrency != capacity {
			t.Errorf("capacity %d: limit %d at the end, want %d", capacity, st.Concurrency, capacity)
		}
		// The last third ran at the converged limit: short queues.
		worst := 0
		for _, r := range results[2000:] {
			worst = max(worst, r.WaitingReqs)
		}
		if worst > adaptHeadroom {
			t.Errorf("capacity %d: the server queued up to %d requests after converging", capacity, worst)
		}
		t.Logf("capacity %d: limit %d, worst queue %d in the last 1000", capacity, st.Concurrency, worst)
	}
}

// The figures the controller reads from /metrics, in `pipe sim`'s
// Prometheus text (SGLang's names, metrics/collector.py); a body that is
// not Prometheus text, or has no sglang: figure, is no reading.
func TestParseMetrics(t *testing.T) {
	f := startSim(t, fastSim(1))
	c := startClient(t, specsOf(f.URLs(), 4), testOptions(APIGenerate))
	m, ok := c.scrape(t.Context(), c.servers[0])
	if !ok {
		t.Fatal("the sim's /metrics was not read")
	}
	if m.tokenUsage < 0 || m.tokenUsage > 1 {
		t.Errorf("token_usage %v, want 0…1", m.tokenUsage)
	}
	if !m.hasTTFT {
		t.Error("the sim's time_to_first_token_seconds histogram was not read")
	}
	body := "# TYPE sglang:token_usage gauge\nsglang:token_usage{model_name=\"m\",dp_rank=\"0\"} 0.5\nsglang:token_usage{model_name=\"m\",dp_rank=\"1\"} 0.97\n" +
		"# TYPE sglang:num_retracted_requests_total counter\nsglang:num_retracted_requests_total{model_name=\"m\"} 3\n"
	m, ok = parseMetrics([]byte(body))
	if !ok || m.tokenUsage != 0.97 || !m.hasRetractedTotal || m.retractedTotal != 3 || m.hasTTFT {
		t.Errorf("parsed %+v, %v; want the largest token_usage 0.97 and 3 retractions, no time to first token", m, ok)
	}
	// The time to first token is a histogram: its sum and count, over
	// every label set (dp ranks).
	ttft := "# TYPE sglang:time_to_first_token_seconds histogram\n" +
		"sglang:time_to_first_token_seconds_bucket{model_name=\"m\",dp_rank=\"0\",le=\"1\"} 3\n" +
		"sglang:time_to_first_token_seconds_bucket{model_name=\"m\",dp_rank=\"0\",le=\"+Inf\"} 4\n" +
		"sglang:time_to_first_token_seconds_sum{model_name=\"m\",dp_rank=\"0\"} 6\n" +
		"sglang:time_to_first_token_seconds_count{model_name=\"m\",dp_rank=\"0\"} 4\n" +
		"sglang:time_to_first_token_seconds_bucket{model_name=\"m\",dp_rank=\"1\",le=\"+Inf\"} 2\n" +
		"sglang:time_to_first_token_seconds_sum{model_name=\"m\",dp_rank=\"1\"} 1\n" +
		"sglang:time_to_first_token_seconds_count{model_name=\"m\",dp_rank=\"1\"} 2\n"
	m, ok = parseMetrics([]byte(ttft))
	if !ok || !m.hasTTFT || m.ttftSum != 7 || m.ttftCount != 6 {
		t.Errorf("parsed %+v, %v; want a time to first token of 7 s over 6 requests", m, ok)
	}
	var w ttftWindow
	w.scraped(100, 50) // the server's life before the run
	w.scraped(106, 54)
	w.scraped(110, 58)
	if got := w.mean(); got != 1.25 {
		t.Errorf("window mean %v, want 1.25 (10 s over the run's 8 requests)", got)
	}
	w.scraped(2, 1) // restarted: counts from there
	w.scraped(5, 3)
	if got := w.mean(); got != 1.5 {
		t.Errorf("after a restart %v, want 1.5", got)
	}
	for _, bad := range []string{"<html>not found</html>", "up 1\n", ""} {
		if _, ok := parseMetrics([]byte(bad)); ok {
			t.Errorf("%q read as metrics", bad)
		}
	}
}

// queueServer answers like a server that runs at most capacity requests
// and queues the rest, when the client holds limit and inTransit of them
// are on their way (a refill sent, or an answer not yet read); it reports
// no capacity in /server_info, so the controller must learn it. Its
// latency per token grows with the batch as 1 + running/48, and a queued
// request waits its share of a round.
func queueServer(limit, capacity, inTransit int) *Result {
	at := max(0, limit-inTransit)
	running, waiting := min(at, capacity), max(0, at-capacity)
	const tokens = 400
	perToken := (1 + float64(running)/48) * float64(10*time.Millisecond)
	wait := float64(waiting) / float64(max(running, 1)) * tokens * perToken
	return &Result{LoadReported: true, RunningReqs: running, WaitingReqs: waiting, CompletionTokens: tokens,
		Latency: time.Duration(tokens*perToken + wait)}
}

// A server that does not say its capacity: the limit doubles from its
// start until the server queues, then holds at the capacity it learned
// plus at most the refills in transit, never the queue a capacity-sized
// headroom kept (it was capacity/16 beyond, 8 at 128).
func TestAdaptiveLearnsCapacity(t *testing.T) {
	for _, capacity := range []int{128, 32} {
		c := &Client{}
		s := &server{limit: adaptStart, maxLimit: 256}
		learnedAt, afterLearned, worst := -1, 0, 0
		doubled, moved := 0, false
		const n, inTransit = 6000, 1
		for i := range n {
			s.outstanding = s.limit
			r := queueServer(s.limit, capacity, inTransit)
			c.adaptLocked(s, r)
			switch {
			case s.queuedSeen && learnedAt < 0:
				learnedAt, doubled = i, s.limit // the limit it queued at
			case learnedAt >= 0 && (moved || s.limit != doubled):
				moved = true // from its first move on
				afterLearned = max(afterLearned, s.limit)
			}
			if i >= n-2000 {
				worst = max(worst, r.WaitingReqs)
			}
		}
		t.Logf("capacity %d: learned after %d answers (at limit %d), limit %d at the end, at most %d after, worst queue %d in the last 2000",
			capacity, learnedAt, doubled, s.limit, afterLearned, worst)
		if learnedAt < 0 || learnedAt > 5*capacity {
			t.Fatalf("capacity %d: learned after %d answers, want within %d", capacity, learnedAt, 5*capacity)
		}
		if s.limit < capacity || s.limit > capacity+inTransit {
			t.Errorf("capacity %d: limit %d at the end, want %d…%d", capacity, s.limit, capacity, capacity+inTransit)
		}
		// The refill in transit and one more, whatever adaptHeadroom says.
		if hi := capacity + 2*inTransit; afterLearned > hi {
			t.Errorf("capacity %d: limit up to %d after it moved from the %d it queued at, want at most %d", capacity, afterLearned, doubled, hi)
		}
		if worst > 0 {
			t.Errorf("capacity %d: the server queued up to %d requests in the last 2000 answers", capacity, worst)
		}
	}
}

// kneeServer answers like a batch server whose latency per output token
// grows with the batch limit L as 1 + L/48 (batching pays: tokens/s rises
// with L), and, when knee > 0, also by (L/knee)³ beyond knee: past it,
// each added request slows all the others more than it adds, and tokens/s
// falls. Its queue stays empty (it runs all it is sent).
func kneeServer(limit, knee int) *Result {
	step := 1 + float64(limit)/48
	if knee > 0 && limit > knee {
		f := float64(limit) / float64(knee)
		step *= f * f * f
	}
	const tokens = 400
	return &Result{LoadReported: true, RunningReqs: limit, CompletionTokens: tokens,
		Latency: time.Duration(step * tokens * float64(10*time.Millisecond))}
}

// The controller steps back on latency rising faster than the batch and
// settles near the server's best tokens/s, while plain batching (latency
// per token growing slower than the batch) still grows it to the ceiling.
func TestAdaptiveBacksOffOnRisingLatency(t *testing.T) {
	for _, tc := range []struct {
		knee   int
		lo, hi int
	}{
		{knee: 0, lo: 256, hi: 256}, // no knee: up to max_concurrency
		{knee: 96, lo: 88, hi: 104}, // knee at 96: tokens/s peaks there
	} {
		c := &Client{}
		s := &server{limit: adaptStart, maxLimit: 256}
		peak := 0
		for range 6000 {
			s.outstanding = s.limit
			c.adaptLocked(s, kneeServer(s.limit, tc.knee))
			peak = max(peak, s.limit)
		}
		if s.limit < tc.lo || s.limit > tc.hi {
			t.Errorf("knee %d: limit %d at the end, want %d…%d", tc.knee, s.limit, tc.lo, tc.hi)
		}
		if tc.knee > 0 && peak > 2*tc.knee {
			t.Errorf("knee %d: limit went up to %d", tc.knee, peak)
		}
		t.Logf("knee %d: limit %d at the end (peak %d, ceiling %d)", tc.knee, s.limit, peak, s.latency.ceiling)
	}
}

// A window whose queue did not empty says nothing about the latency of
// batching (its answers waited in the queue): the guard does not step back.
func TestRisingLatencyIgnoresQueuedWindows(t *testing.T) {
	c := &Client{}
	s := &server{limit: 64, maxLimit: 256}
	s.latency = latencyGuard{best: 1e6, bestLimit: 32}
	for range 64 {
		s.outstanding = s.limit
		r := kneeServer(s.limit, 16)
		r.WaitingReqs = 1
		c.adaptLocked(s, r)
	}
	if s.latency.ceiling != 0 {
		t.Errorf("stepped back to %d on queued windows", s.latency.ceiling)
	}
}
