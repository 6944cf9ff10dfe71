package main

import (
	"strings"
	"testing"

	"github.com/pipe-dev/pipe/stages"
)

// At the end of a run, when every record left is a request a server has
// brought nothing back for a while, the ETA says what it waits on instead
// of a time the run's rate would give ("ETA 1s" while a hung server holds
// the last requests until stall_timeout).
func TestETAWaitsOnQuietServers(t *testing.T) {
	fleet := func(quiet float64) *liveFleet {
		return &liveFleet{FleetView: stages.FleetView{InFlight: 3, Servers: []stages.ServerView{
			{Name: "gpu1:30000", InFlight: 0, QuietSeconds: 400},
			{Name: "gpu4:30000", InFlight: 3, QuietSeconds: quiet},
		}}}
	}
	if got, want := tailWait(fleet(190), 3), "3 requests on gpu4:30000, no output for 3m10s"; got != want {
		t.Fatalf("tailWait = %q, want %q", got, want)
	}
	if got := tailWait(fleet(20), 3); got != "" {
		t.Fatalf("a server quiet for 20 s: %q", got)
	}
	if got := tailWait(fleet(190), 50); got != "" {
		t.Fatalf("records left beyond those in flight: %q", got)
	}
	e := &liveETA{Remaining: 3, PerSecond: 40, Seconds: 0.075, Waiting: tailWait(fleet(190), 3)}
	if got := etaLine(e); got != "ETA ?: 3 left, waiting on 3 requests on gpu4:30000, no output for 3m10s" {
		t.Fatalf("etaLine = %q", got)
	}
	line := progressLine(&liveStatus{ETA: e})
	if !strings.Contains(line, "waiting on 3 requests on gpu4:30000") || strings.Contains(line, "ETA 0s") {
		t.Fatalf("progress line %q", line)
	}
}
