package sglang

// Adaptive concurrency: a server whose ServerSpec.MaxConcurrency is set
// gets a limit that follows what it can run, from the signals it gives with
// every answer (SGLang 2026's meta_info num_running_reqs/num_waiting_reqs)
// and from /server_info's max_running_requests, never needing /metrics:
//
//   - while its queue is (nearly) empty and the client fills the limit, the
//     limit grows by one per completion (so by about itself per latency: a
//     quick ramp, like TCP's slow start);
//   - once it queues more than a small headroom, the limit shrinks by one
//     per completion;
//   - a 503 (queue full, or the server's waiting timeout) cuts it to 3/4;
//   - it stays within 1 … min(MaxConcurrency, max_running_requests +
//     headroom): requests beyond what the server runs only wait in its
//     queue, the headroom keeps a freed running slot from idling while the
//     next request travels.
//
// A server that reports no load keeps its starting limit (raised only by
// nothing, lowered by 503s).

// adaptStart is the starting limit of an adaptive server given no
// Concurrency.
const adaptStart = 16

// headroomOf is how many requests beyond its running capacity an adaptive
// server may hold in its queue.
func headroomOf(maxRunning int) int { return max(2, maxRunning/16) }

// ceilingLocked is s's current upper bound.
func (s *server) ceilingLocked() int {
	c := s.maxLimit
	if s.info != nil && s.info.MaxRunningRequests > 0 {
		c = min(c, s.info.MaxRunningRequests+headroomOf(s.info.MaxRunningRequests))
	}
	return max(c, 1)
}

// adaptLocked moves s's limit after a completion that reported load r.
func (c *Client) adaptLocked(s *server, r *Result) {
	if s.maxLimit == 0 || !r.LoadReported {
		return
	}
	mr := r.RunningReqs
	if s.info != nil && s.info.MaxRunningRequests > 0 {
		mr = s.info.MaxRunningRequests
	}
	ceiling := s.ceilingLocked()
	switch {
	case r.WaitingReqs > headroomOf(mr) && s.limit > 1:
		s.limit--
	case r.WaitingReqs <= headroomOf(mr)/2 && s.outstanding >= s.limit-1 && s.limit < ceiling:
		s.limit++
		c.broadcastLocked()
	}
	if s.limit > ceiling {
		s.limit = ceiling
	}
}

// backOffLocked cuts s's limit after a 503.
func (c *Client) backOffLocked(s *server) {
	if s.maxLimit > 0 {
		s.limit = max(1, s.limit*3/4)
	}
}
