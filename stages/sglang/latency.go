package sglang

// The adaptive limit's rising-latency back-off (see adapt.go). A window
// whose queue stayed empty gives the server's latency per output token and
// its mean running count; by Little's law their ratio is the tokens/s the
// server gave at that limit. Latency per token rising with the batch is
// how batching works (each decode step carries more requests), and pays
// while it rises slower than the batch; latency rising so much faster that
// the tokens/s falls markedly below the best seen at a lower limit means
// the server is past its knee (compute-bound, prefill interfering, memory
// pressure short of retractions): more requests only make each slower.
// The guard then steps the limit back to the best one and lets it grow
// past only one at a time, after two rounds whose estimate keeps up.

// latencyFall is the share of the best tokens/s estimate below which a
// window at a higher limit steps back: a margin well beyond a window's
// noise (a quarter of a round's answers, each's latency per token about
// the same at one load).
const latencyFall = 0.85

// latencyKeepUp is the share of the best estimate a window at the guard's
// ceiling must reach for the ceiling to grow by one.
const latencyKeepUp = 0.95

// latencyGuard is one server's record of its best tokens/s estimate and
// the ceiling a back-off set; guarded by Client.mu.
type latencyGuard struct {
	best      float64 // best estimate seen, tokens/s (0: none yet)
	bestLimit int     // the limit it was seen at
	ceiling   int     // > 0: the limit grows past this only by creeping
	calm      int     // windows since the last step back
}

// addLatency adds one answer's latency (the server's own e2e_latency when
// it reports one, which leaves out the client's transport; else the
// client's) and output tokens to the window.
func (w *adaptState) addLatency(r *Result) {
	if r.CompletionTokens <= 0 {
		return
	}
	l := r.ServerLatency
	if l <= 0 {
		l = r.Latency
	}
	if l <= 0 {
		return
	}
	w.latency += l
	w.tokens += r.CompletionTokens
}

// tokensPerSecond is the window's estimate of the server's tokens/s: its
// mean running count over its mean latency per output token (0: no
// latency measured).
func (w *adaptState) tokensPerSecond() float64 {
	if w.n == 0 || w.tokens == 0 || w.latency <= 0 {
		return 0
	}
	perToken := w.latency.Seconds() / float64(w.tokens)
	return float64(w.running) / float64(w.n) / perToken
}

// slower records a window's estimate est, taken with the server's queue
// empty, and reports whether it stepped s's limit back because latency
// rose markedly faster than the batch.
func (g *latencyGuard) slower(s *server, est float64) bool {
	if est <= 0 {
		return false
	}
	g.calm++
	switch {
	case s.limit > g.bestLimit && g.best > 0 && est < latencyFall*g.best:
		s.limit = max(1, g.bestLimit)
		g.ceiling, g.calm = g.bestLimit, 0
		return true
	case est > g.best || s.limit == g.bestLimit:
		// A better estimate, or a fresh one at the best limit (the
		// server's load from others may have changed).
		g.best, g.bestLimit = est, s.limit
	}
	if g.ceiling > 0 && s.limit >= g.ceiling && g.calm >= 2 && est >= latencyKeepUp*g.best {
		g.ceiling++
		g.calm = 0
	}
	return false
}

// holds reports whether a back-off's ceiling keeps a limit from growing.
func (g *latencyGuard) holds(limit int) bool {
	return g.ceiling > 0 && limit >= g.ceiling
}
