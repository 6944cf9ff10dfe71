package sglang

import "time"

// Adaptive concurrency: a server whose ServerSpec.MaxConcurrency is set
// gets a limit that follows what it can run, from the signals it gives with
// every answer (SGLang 2026's meta_info num_running_reqs/num_waiting_reqs,
// num_retractions), from /server_info (internal_states[0]'s
// effective_max_running_requests_per_dp, else server_args'
// max_running_requests) and, when reachable, /metrics (token_usage,
// num_retracted_reqs; see metrics.go), never needing /metrics:
//
//   - it starts at the server's running capacity when /server_info gives
//     one (the server runs that many at once by its own
//     account), else at the configured or default start;
//   - the answers of a window (a quarter of the limit's worth of
//     completions: every answer of a round reports about the same load)
//     are summed, and the limit moves once per window;
//   - a queue through the whole window with the limit above the capacity,
//     or beyond the headroom, drops the limit by the excess, and the next
//     window waits until that many completions drained it;
//   - capacity known (reported, or the most it ran once it queued) and the
//     limit below it: the limit goes there, at most doubling per window;
//     capacity unknown and the server running what it is sent with an
//     empty queue: it doubles;
//   - a 503 (queue full, the server's waiting timeout) cuts it to 3/4; a
//     retraction (the server ran out of KV cache and preempted a request:
//     meta_info num_retractions, or /metrics' rising
//     num_retracted_requests_total) to 7/8, at most once per limit's worth
//     of completions, and the capacity counts as that limit until two
//     rounds pass without a retraction (then one more per window);
//     token_usage at or above 0.95 holds it (no growth);
//   - rising latency (latency.go): a window whose queue stayed empty
//     measures the server's latency per output token; by Little's law its
//     mean running count over that latency is its tokens/s. A batch
//     server's latency per token grows with the batch, but slower than the
//     batch while batching pays; when it grows so much faster that the
//     estimate falls below 85% of the best one seen at a lower limit, the
//     limit steps back to that one and grows past it only by one per two
//     rounds whose estimate keeps up;
//   - it stays within 1 … min(MaxConcurrency, capacity) when /server_info
//     gives the capacity, else 1 … min(MaxConcurrency, capacity +
//     adaptHeadroom) once the capacity is learned, and above the capacity
//     only while it has not queued: requests beyond what the server runs
//     only wait in its queue, which adds their wait to the latency and
//     gains no tokens.
//
// A server that reports no load keeps its starting limit (raised only by
// nothing, lowered by 503s and retractions).

// adaptStart is the starting limit of an adaptive server given no
// Concurrency and no capacity in /server_info.
const adaptStart = 16

// tokenUsageHold is the KV cache use (/metrics token_usage) from which an
// adaptive limit stops growing: more requests would only be retracted.
const tokenUsageHold = 0.95

// adaptHeadroom is how many requests beyond a learned running capacity (the
// most it ran once it queued) an adaptive server may hold: what refills in
// transit need, not a share of the capacity. A completion frees one slot
// and its refill is one request on its way, so at 470 completions per wall
// second (bench/adaptive.sh's 128-capacity servers) one or two are in
// transit at a time; a capacity-sized headroom (it was capacity/16, 8 at
// 128) only waited in the server's queue, adding its wait to their
// latency for no tokens. A capacity /server_info gives is where the limit
// starts and the most it grows to (no headroom): the server says what it
// runs, and at a full batch one more slot is worth almost no tokens/s (the
// batch's speed saturates there) but costs every request its share of the
// step time.
const adaptHeadroom = 2

// capacityLocked is s's running capacity: /server_info's, else the most
// running requests it reported (0: not known yet).
func (s *server) capacityLocked() int {
	c := s.peakRunning
	if s.info != nil && s.info.MaxRunningRequests > 0 {
		c = s.info.MaxRunningRequests
	}
	if s.kvCap > 0 && c > 0 {
		// Retractions said its KV cache holds fewer.
		c = min(c, s.kvCap)
	}
	return c
}

// startAdaptiveLocked sets an adaptive s's limit from its reported
// capacity when it is admitted the first time: the server says how many it
// runs at once, the start need not guess.
func (s *server) startAdaptiveLocked() {
	if s.maxLimit == 0 || s.adaptStarted {
		return
	}
	s.adaptStarted = true
	if s.info != nil && s.info.MaxRunningRequests > 0 {
		mr := s.info.MaxRunningRequests
		s.limit = min(s.maxLimit, mr)
	}
}

// adaptWindow is the part of a round (a limit's worth of completions) over
// which answers are summed before the limit moves: every answer of a round
// reports about the same load, so moving on each would move a round's
// worth of times too far.
func adaptWindow(limit int) int { return max(4, limit/4) }

// adaptLocked moves s's limit after a completion that reported load r.
func (c *Client) adaptLocked(s *server, r *Result) {
	if s.maxLimit == 0 {
		return
	}
	s.sinceBackoff++
	if r.Retractions > 0 {
		c.retractedLocked(s)
	}
	if !r.LoadReported {
		return
	}
	mr := s.learnCapacityLocked(r)
	w := &s.window
	w.add(r)
	if w.n < max(s.cooldown, adaptWindow(s.limit)) {
		return
	}
	if s.kvCap > 0 && s.sinceBackoff >= 2*s.limit {
		// Two rounds without a retraction: try one more.
		s.kvCap++
		s.sinceBackoff = s.limit
	}
	sum := windowSum{meanRunning: w.running / w.n, minWaiting: w.minWaiting,
		full: s.outstanding >= s.limit-1}
	est := w.tokensPerSecond()
	*w = adaptState{}
	s.cooldown = 0
	if sum.minWaiting == 0 && s.latency.slower(s, est) {
		c.broadcastLocked()
		return
	}
	if !s.shrinkLocked(mr, sum.minWaiting) && !s.growLocked(mr, sum) {
		return
	}
	if g := s.latency.ceiling; g > 0 {
		s.limit = min(s.limit, g) // grows past a latency back-off one by one
	}
	c.broadcastLocked()
}

// learnCapacityLocked is s's running capacity as adaptLocked uses it after
// load r: /server_info's when given; else the most s reported running,
// once it queued (before that it ran all it was sent, so 0: unknown).
func (s *server) learnCapacityLocked(r *Result) int {
	mr := s.capacityLocked()
	if s.info != nil && s.info.MaxRunningRequests != 0 {
		return mr
	}
	s.peakRunning = max(s.peakRunning, r.RunningReqs)
	if r.WaitingReqs > 0 {
		s.queuedSeen = true // it runs no more than peakRunning
	}
	if !s.queuedSeen {
		return 0 // not its capacity yet, only the most it was sent
	}
	return mr
}

// windowSum is what a finished window says about the server: the mean it
// ran, the shortest queue it had, and whether the client kept it full
// (all but one of the limit outstanding) when the window ended.
type windowSum struct {
	meanRunning, minWaiting int
	full                    bool
}

// shrinkLocked lowers s's limit when it is above the capacity mr plus
// the headroom, or a queue stayed through the window; it reports whether
// it did. A cut by a queue waits that many completions (cooldown) before
// the next window.
func (s *server) shrinkLocked(mr, minWaiting int) bool {
	h := adaptHeadroom
	switch {
	case mr > 0 && s.limit > mr+h:
		// Above capacity + headroom (a start above what it runs).
		s.limit = max(1, mr+h)
	case mr > 0 && s.limit > mr && minWaiting > 0:
		// Beyond its capacity with a queue that never emptied: the
		// headroom is more than the refills need.
		cut := min(minWaiting, s.limit-mr)
		s.limit -= cut
		s.cooldown = cut
	case minWaiting > h:
		// A queue beyond the headroom through the whole window: drop the
		// excess, and wait until that many completions drained it.
		cut := minWaiting - h
		s.limit = max(1, s.limit-cut)
		s.cooldown = cut
	default:
		return false
	}
	return true
}

// growLocked raises s's limit after a window that kept it full, unless it
// is at its maximum, the KV cache is nearly full or a latency back-off
// holds it; it reports whether it did.
func (s *server) growLocked(mr int, sum windowSum) bool {
	switch {
	case !sum.full || s.limit >= s.maxLimit || s.tokenUsage >= tokenUsageHold || s.latency.holds(s.limit):
		return false
	case mr == 0 && sum.minWaiting == 0 && sum.meanRunning >= s.limit/2:
		// Capacity unknown and the server runs what it is sent: double
		// per window.
		s.limit = min(s.maxLimit, 2*s.limit)
	case mr > 0 && s.limit < mr:
		// Below its capacity: go there, at most doubling per window.
		s.limit = min(s.maxLimit, mr, 2*s.limit)
	default:
		return false
	}
	return true
}

// backOffLocked cuts s's limit after a 503.
func (c *Client) backOffLocked(s *server) {
	if s.maxLimit > 0 {
		s.limit = max(1, s.limit*3/4)
		s.sinceBackoff, s.window = 0, adaptState{}
	}
}

// adaptState sums the answers of one window (see adaptWindow).
type adaptState struct {
	n, minWaiting, running int
	// latency and tokens sum the answers' latency and output tokens.
	latency time.Duration
	tokens  int
}

// add sums the load and latency answer r reported.
func (w *adaptState) add(r *Result) {
	if w.n == 0 || r.WaitingReqs < w.minWaiting {
		w.minWaiting = r.WaitingReqs
	}
	w.n++
	w.running += r.RunningReqs
	w.addLatency(r)
}

// retractedLocked cuts s's limit after a retraction, at most once per
// limit's worth of completions (one burst of retractions is one signal).
func (c *Client) retractedLocked(s *server) {
	s.retractions++
	if s.maxLimit == 0 || s.sinceBackoff < s.limit {
		return
	}
	s.limit = max(1, s.limit*7/8)
	// What it runs without retracting is at most that, until rounds
	// without retractions say more.
	s.kvCap = s.limit
	s.sinceBackoff, s.window = 0, adaptState{}
}
