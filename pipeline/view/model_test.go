package view

import (
	"math"
	"testing"
)

// The fleet's model: Σ concurrency/latency over the servers in rotation,
// the recent latency before the whole run's, then the slowest server's
// drain.
func TestFleetModel(t *testing.T) {
	v := Fleet{Servers: []Server{
		{Name: "a", State: ServerReady, Concurrency: 48, Completions: 900, LatencyMean: 12, LatencyRecent: 12, P95Seconds: 30},
		// slowed down: its recent latency is three times its mean
		{Name: "b", State: ServerReady, Concurrency: 48, Completions: 900, LatencyMean: 12, LatencyRecent: 36, P95Seconds: 60},
		{Name: "c", State: ServerEjected, Concurrency: 48, Completions: 50, LatencyMean: 12, P95Seconds: 300},
		{Name: "d", State: ServerReady, Concurrency: 48}, // nothing measured
	}}
	if got, want := v.Throughput(), 48.0/12+48.0/36; math.Abs(got-want) > 1e-9 {
		t.Errorf("throughput %.4f/s, want %.4f (a at 12 s, b at its recent 36 s; c ejected, d unmeasured)", got, want)
	}
	// The drain: b's p95, less half the completions' mean latency
	// ((12×900 + 36×900)/1800 = 24).
	if got := v.Drain(); got != 60-12 {
		t.Errorf("drain %.1f s, want 48", got)
	}
	s, ok := v.SecondsFor(5333)
	if want := 5333/(48.0/12+48.0/36) + 48; !ok || math.Abs(s-want) > 1e-6 {
		t.Errorf("SecondsFor(5333) = %.1f, %v; want %.1f", s, ok, want)
	}
	if s, ok := v.SecondsFor(-3); !ok || s != 48 {
		t.Errorf("nothing queued: %.1f, %v; want the drain, 48", s, ok)
	}
	if _, ok := (Fleet{Servers: []Server{{State: ServerReady, Concurrency: 8}}}).SecondsFor(10); ok {
		t.Error("a fleet with nothing measured has a model")
	}
}
