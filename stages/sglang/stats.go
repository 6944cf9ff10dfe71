package sglang

import (
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// rateWindow is how far back the live rates look.
const rateWindow = 30

// latencyKeep is how many recent latencies each server keeps for quantiles.
const latencyKeep = 1024

// ServerStats are one server's live figures (or the fleet's totals).
type ServerStats struct {
	URL    string
	State  string // StateReady or StateDown ("" in totals)
	Reason string // why it is down
	// NeverReady says it has not been ready since the start, for longer
	// than Options.NeverReadyWarn (it was warned about).
	NeverReady bool
	// InFlight is requests now in flight; Concurrency the cap.
	InFlight, Concurrency int
	Completions           int64
	OutputTokens          int64
	// CompletionsPerSec and OutputTokensPerSec are over the last 30 s (or
	// since the start, if shorter).
	CompletionsPerSec  float64
	OutputTokensPerSec float64
	// P50 and P95 are over the last 1024 completions' latencies.
	P50, P95 time.Duration
	// LatencySum is the sum of all Completions' latencies.
	LatencySum time.Duration
	// Errors counts failed attempts by class ("http_503", "transport", …).
	Errors map[string]int64
	// MeanAcceptLength is the speculative acceptance length as SGLang
	// defines it, Σ completion tokens / Σ verify steps (spec_verify_ct)
	// over the completions that reported verify steps (not a mean of
	// per-request ratios, which overweights short outputs); 0 when none
	// did.
	MeanAcceptLength float64
	// SpecAcceptRate is Σ spec_num_correct_drafts / Σ
	// spec_num_proposed_drafts over the completions that reported them.
	SpecAcceptRate float64
	// ServerRunning and ServerWaiting are the load the server reported
	// with its last answer (meta_info num_running_reqs/num_waiting_reqs);
	// LoadReported says it did.
	ServerRunning, ServerWaiting int
	LoadReported                 bool
	Ejections                    int64
	// Stalls counts its requests that stalled and were sent again to
	// another server; Suspect says it gets no new requests until a probe
	// decides.
	Stalls  int64
	Suspect bool
	// TTFT is the mean time to first token of the requests its /metrics
	// counted since this client first read them (SGLang's
	// --enable-metrics histogram; adaptive servers only); 0 unknown.
	TTFT time.Duration
	// LatencyRecent is the mean of its last 1024 completions' latencies.
	LatencyRecent time.Duration
	// Quiet is how long ago it last completed a request (since the start
	// when it has not yet): with requests in flight, how long they have
	// brought nothing back.
	Quiet time.Duration
}

// Stats is a snapshot of the fleet's figures.
type Stats struct {
	Servers []ServerStats
	Total   ServerStats
}

type bucket struct {
	sec       int64
	n, tokens int64
}

type serverStats struct {
	start     time.Time
	ejections atomic.Int64
	stalls    atomic.Int64 // requests of its that stalled and were sent again

	mu          sync.Mutex
	completions int64
	last        time.Time // of the last completion
	tokens      int64
	lat         []time.Duration // ring of recent latencies
	latSum      time.Duration
	latNext     int
	acceptSum   float64 // Σ accept lengths of the answers without verify counts
	acceptN     int64
	specTokens  int64    // Σ completion tokens of the answers with verify counts
	specVerify  int64    // Σ their spec_verify_ct
	drafts      [2]int64 // Σ correct, Σ proposed drafts
	running     int
	waiting     int
	loadSeen    bool
	errors      map[string]int64
	buckets     [rateWindow + 2]bucket
}

func newServerStats(start time.Time) *serverStats {
	return &serverStats{start: start, errors: map[string]int64{}, lat: make([]time.Duration, 0, latencyKeep)}
}

func (st *serverStats) sec(t time.Time) int64 { return int64(t.Sub(st.start) / time.Second) }

func (st *serverStats) completed(r *Result) {
	now := st.sec(time.Now())
	st.mu.Lock()
	defer st.mu.Unlock()
	st.completions++
	st.last = time.Now()
	st.tokens += int64(r.CompletionTokens)
	st.latSum += r.Latency
	if len(st.lat) < latencyKeep {
		st.lat = append(st.lat, r.Latency)
	} else {
		st.lat[st.latNext] = r.Latency
		st.latNext = (st.latNext + 1) % latencyKeep
	}
	switch {
	case r.SpecVerifyCt > 0:
		st.specTokens += int64(r.CompletionTokens)
		st.specVerify += int64(r.SpecVerifyCt)
	case r.SpecAcceptLength > 0:
		st.acceptSum += r.SpecAcceptLength
		st.acceptN++
	}
	if r.SpecProposedDrafts > 0 {
		st.drafts[0] += int64(r.SpecCorrectDrafts)
		st.drafts[1] += int64(r.SpecProposedDrafts)
	}
	if r.LoadReported {
		st.running, st.waiting, st.loadSeen = r.RunningReqs, r.WaitingReqs, true
	}
	b := &st.buckets[now%int64(len(st.buckets))]
	if b.sec != now {
		*b = bucket{sec: now}
	}
	b.n++
	b.tokens += int64(r.CompletionTokens)
}

func (st *serverStats) failed(class string) {
	st.mu.Lock()
	st.errors[class]++
	st.mu.Unlock()
}

// snapshot fills the counters of out; lat receives the recent latencies.
func (st *serverStats) snapshot(now time.Time, out *ServerStats, lat []time.Duration) []time.Duration {
	cur := st.sec(now)
	window := min(float64(rateWindow), now.Sub(st.start).Seconds())
	st.mu.Lock()
	defer st.mu.Unlock()
	out.Completions, out.OutputTokens, out.LatencySum = st.completions, st.tokens, st.latSum
	out.Quiet = now.Sub(st.start)
	if !st.last.IsZero() {
		out.Quiet = now.Sub(st.last)
	}
	out.Errors = maps.Clone(st.errors)
	out.Ejections = st.ejections.Load()
	out.Stalls = st.stalls.Load()
	out.MeanAcceptLength = st.acceptLength()
	if st.drafts[1] > 0 {
		out.SpecAcceptRate = float64(st.drafts[0]) / float64(st.drafts[1])
	}
	out.ServerRunning, out.ServerWaiting, out.LoadReported = st.running, st.waiting, st.loadSeen
	var n, tok int64
	for _, b := range st.buckets {
		// The current second is partial; count the last rateWindow whole
		// seconds plus it, over the matching time.
		if b.sec > cur-rateWindow && b.sec <= cur {
			n += b.n
			tok += b.tokens
		}
	}
	if window > 0 {
		out.CompletionsPerSec = float64(n) / window
		out.OutputTokensPerSec = float64(tok) / window
	}
	return append(lat, st.lat...)
}

// acceptLength is Σ tokens / Σ verify steps, or with no verify counts
// the mean of the reported lengths. Called with st.mu held.
func (st *serverStats) acceptLength() float64 {
	if st.specVerify > 0 {
		return float64(st.specTokens) / float64(st.specVerify)
	}
	if st.acceptN > 0 {
		return st.acceptSum / float64(st.acceptN)
	}
	return 0
}

func meanOf(d []time.Duration) time.Duration {
	if len(d) == 0 {
		return 0
	}
	var s time.Duration
	for _, x := range d {
		s += x
	}
	return s / time.Duration(len(d))
}

func quantile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[min(len(sorted)-1, int(q*float64(len(sorted))))]
}

// Stats returns the live figures per server and for the fleet. It is safe
// to call at any time.
func (c *Client) Stats() Stats {
	now := time.Now()
	var out Stats
	c.mu.Lock()
	for _, s := range c.servers {
		ss := ServerStats{URL: s.url, InFlight: s.outstanding, Concurrency: s.limit, Reason: s.reason, State: StateDown}
		if s.admitted {
			ss.State, ss.Reason = StateReady, ""
		}
		ss.NeverReady = !s.everAdmitted && s.neverReadyWarned
		ss.Suspect = s.admitted && s.suspect
		ss.TTFT = time.Duration(s.ttft.mean() * float64(time.Second))
		out.Servers = append(out.Servers, ss)
	}
	c.mu.Unlock()
	t := &out.Total
	t.Errors = map[string]int64{}
	var all []time.Duration
	var acceptSum float64
	var acceptN, specTokens, specVerify, correct, proposed int64
	for i, s := range c.servers {
		ss := &out.Servers[i]
		lat := s.stats.snapshot(now, ss, nil)
		slices.Sort(lat)
		ss.P50, ss.P95 = quantile(lat, 0.5), quantile(lat, 0.95)
		ss.LatencyRecent = meanOf(lat)
		all = append(all, lat...)
		t.InFlight += ss.InFlight
		t.Concurrency += ss.Concurrency
		t.Completions += ss.Completions
		t.OutputTokens += ss.OutputTokens
		t.LatencySum += ss.LatencySum
		t.CompletionsPerSec += ss.CompletionsPerSec
		t.OutputTokensPerSec += ss.OutputTokensPerSec
		t.Ejections += ss.Ejections
		t.Stalls += ss.Stalls
		for k, v := range ss.Errors {
			t.Errors[k] += v
		}
		s.stats.mu.Lock()
		acceptSum += s.stats.acceptSum
		acceptN += s.stats.acceptN
		specTokens += s.stats.specTokens
		specVerify += s.stats.specVerify
		correct += s.stats.drafts[0]
		proposed += s.stats.drafts[1]
		s.stats.mu.Unlock()
		t.ServerRunning += ss.ServerRunning
		t.ServerWaiting += ss.ServerWaiting
		t.LoadReported = t.LoadReported || ss.LoadReported
	}
	slices.Sort(all)
	t.P50, t.P95 = quantile(all, 0.5), quantile(all, 0.95)
	// The fleet's acceptance as SGLang aggregates it: Σ tokens / Σ steps.
	fleet := serverStats{acceptSum: acceptSum, acceptN: acceptN, specTokens: specTokens, specVerify: specVerify}
	t.MeanAcceptLength = fleet.acceptLength()
	if proposed > 0 {
		t.SpecAcceptRate = float64(correct) / float64(proposed)
	}
	return out
}
