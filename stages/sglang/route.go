package sglang

import "unicode/utf8"

// Routing on load: a session's request goes to the admitted server with a
// free slot whose load per running slot is least (per the requests it runs
// at once, from /server_info or once it queued, when fewer than its
// concurrency; else per its concurrency), where load is the tokens in
// flight to it (each request's prompt plus the output it may ask for: a
// long conversation weighs more than a short prompt), plus, at the fleet's
// mean request weight, its slots taken but not yet sent and the requests
// it last said were waiting in its queue (meta_info num_waiting_reqs, SGLang
// 2026: a server that queues, for other clients or for lack of KV cache,
// gets fewer). A session keeps its server between turns, so the turns of a
// conversation go where their prefix is cached (SGLang's radix cache), the
// way sgl-model-gateway's cache-aware policy prefers the worker holding a
// prefix (sgl-model-gateway/src/policies/cache_aware.rs).

// weightOf is the tokens a request may occupy: its prompt (ids, or about 4
// bytes a token of text) and the output it asks for.
func (c *Client) weightOf(req *Request) int64 {
	n := len(req.InputIDs)
	if n == 0 {
		b := len(req.Text)
		for _, m := range req.Messages {
			b += len(m.Content)
		}
		n = b / 4
		if n == 0 && b > 0 {
			n = utf8.RuneCountInString(req.Text)
		}
	}
	out := c.opts.Sampling.MaxOutputTokens
	if req.MaxOutputTokens > 0 {
		out = req.MaxOutputTokens
	}
	return int64(n + max(out, 1))
}

// inFlight counts req on s until the returned func is called.
func (c *Client) inFlight(s *server, req *Request) func() {
	w := c.weightOf(req)
	s.tokens.Add(w)
	s.sending.Add(1)
	// The fleet's mean request weight, an exponential average over about
	// the last 64 requests (racing updates lose a step, no more).
	m := c.meanWeight.Load()
	if m == 0 {
		m = w
	}
	c.meanWeight.Store(m + (w-m)/64)
	return func() {
		s.tokens.Add(-w)
		s.sending.Add(-1)
	}
}

// loadLocked is s's load per slot (see above).
func (c *Client) loadLocked(s *server) float64 {
	mean := float64(max(c.meanWeight.Load(), 1))
	pending := max(0, int64(s.outstanding)-s.sending.Load())
	load := float64(s.tokens.Load()) + mean*float64(pending+int64(s.waiting))
	slots := s.limit
	if mr := s.capacityLocked(); mr > 0 && (s.queuedSeen || s.info != nil && s.info.MaxRunningRequests > 0) {
		// What it runs at once, not what it holds: requests beyond
		// that wait in its queue.
		slots = min(slots, mr)
	}
	return load / float64(max(slots, 1))
}
