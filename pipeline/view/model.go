package view

// The fleet's model of time, shared by pipe plan's projection and the
// run's ETA: a server holding c requests whose completions take L seconds
// on average finishes c/L per second (Little's law), and the fleet the sum
// of its servers'. Once nothing is left to send, each server finishes what
// it holds; the slowest one last, after about its p95 latency (the longest
// of a concurrency's worth of requests), less the half of a mean latency
// the rate already counted.

// Throughput is the fleet's completions per second at each server's
// concurrency and recent mean latency (the whole run's where it has no
// recent one), over the servers that completed requests and are in
// rotation (ready, or suspect while probed); 0 when none is measured.
func (v Fleet) Throughput() float64 {
	var perSecond float64
	for _, s := range v.Servers {
		if lat := s.latency(); lat > 0 && s.Completions > 0 && s.inRotation() {
			perSecond += float64(s.Concurrency) / lat
		}
	}
	return perSecond
}

// Drain is the seconds the fleet takes to finish what it holds once the
// queue is empty (see above).
func (v Fleet) Drain() float64 {
	var slowest, latSum float64
	var n int64
	for _, s := range v.Servers {
		if s.Completions == 0 || !s.inRotation() {
			continue
		}
		slowest = max(slowest, s.P95Seconds)
		latSum += s.latency() * float64(s.Completions)
		n += s.Completions
	}
	if n == 0 {
		return 0
	}
	return max(0, slowest-latSum/float64(n)/2)
}

// SecondsFor is how long the fleet takes to finish queued requests not
// sent yet and those it holds: queued at Throughput, then Drain. ok is
// false when no server is measured yet.
func (v Fleet) SecondsFor(queued int64) (seconds float64, ok bool) {
	rate := v.Throughput()
	if rate <= 0 {
		return 0, false
	}
	return float64(max(0, queued))/rate + v.Drain(), true
}

func (s Server) latency() float64 {
	if s.LatencyRecent > 0 {
		return s.LatencyRecent
	}
	return s.LatencyMean
}

// inRotation: it is sent requests (a server whose state was never set, as
// in a finished run's summary, counts).
func (s Server) inRotation() bool {
	return s.State == "" || s.State == ServerReady || s.State == ServerSuspect
}
