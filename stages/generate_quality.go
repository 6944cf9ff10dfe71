package stages

import (
	"fmt"
	"sync"
	"time"

	"github.com/pipe-dev/pipe/pipeline/record"
	"github.com/pipe-dev/pipe/stages/fleet"
)

// The quality watch reads every completion by its server. A server that
// answers while it decodes garbage passes every health check: its
// process lives, its probes answer, its rows look plausible. It
//   - says each launched start's first completions' speed and
//     speculative acceptance, as a user checks by hand after a launch;
//   - trips a breaker when the server's recent answers are mostly tiny
//     while the other servers' are not, or when its speculative
//     acceptance falls under half of its own first completions': a
//     launched server's start is ended and started again; a server pipe
//     did not launch is kept out for quarantineFor (sglang.Client.Quarantine).
//
// Each completion records its server's start (Completion.ServerStart).
const (
	qualityFirst  = 16 // completions of a start that set its baseline
	qualityWindow = 64 // recent completions a server is judged by
	qualityMin    = 32 // judged only with this many recent ones
)

type qualityWatch struct {
	mu  sync.Mutex
	per map[string]*serverQuality
}

type serverQuality struct {
	start int // the launched start the window is of (0: not launched)
	// first completions of the start: output tokens per second each,
	// speculative acceptance (where reported)
	first, firstAccept []float64
	tiny               []bool    // the recent window, oldest first
	accept             []float64 // recent acceptance lengths
	said, tripped      bool
}

// launchedOf is the fleet and index of the launched server at url.
func (g *generate) launchedOf(url string) (*fleet.Fleet, int) {
	for _, f := range g.fleets {
		if i := f.Server(url); i >= 0 {
			return f, i
		}
	}
	return nil, -1
}

// watchQuality records c (its server's start included) and acts on what
// the server's completions show.
func (g *generate) watchQuality(c *record.Completion) {
	f, i := g.launchedOf(c.Server)
	name := c.Server
	if f != nil {
		c.ServerStart, name = f.Start(i), f.Name(i)
	}
	say, trip := g.quality.add(c, f != nil)
	if say != "" {
		g.noticef("server %s (start %d): %s", name, c.ServerStart, say)
	}
	switch {
	case trip == "":
	case f != nil:
		g.warnf("server_breaker", fmt.Sprintf("server %s (start %d): %s; it is restarted (rows it made in this start have completion.server_start = %d)", name, c.ServerStart, trip, c.ServerStart))
		f.Restart(i, "breaker: "+trip)
	case g.client != nil && g.client.Quarantine(c.Server, "breaker: "+trip, quarantineFor):
		g.warnf("server_breaker", fmt.Sprintf("server %s: %s; pipe did not launch it and cannot restart it: it gets no requests for %s, then is probed again (its rows so far have completion.server = %q)", name, trip, quarantineFor, c.Server))
	}
}

// add records c in its server's windows. say is the start's first
// completions' speed and acceptance once they are in (launched servers
// only); trip why the breaker trips, "" when it does not.
func (w *qualityWatch) add(c *record.Completion, launched bool) (say, trip string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.per == nil {
		w.per = map[string]*serverQuality{}
	}
	q := w.per[c.Server]
	if q == nil || q.start != c.ServerStart {
		q = &serverQuality{start: c.ServerStart}
		w.per[c.Server] = q
	}
	if len(q.first) < qualityFirst {
		if c.LatencySeconds > 0 {
			q.first = append(q.first, float64(c.CompletionTokens)/c.LatencySeconds)
		}
		if c.SpecAcceptLength > 0 {
			q.firstAccept = append(q.firstAccept, c.SpecAcceptLength)
		}
	}
	q.tiny = appendBounded(q.tiny, tinyAnswer(c.Answer), qualityWindow)
	if c.SpecAcceptLength > 0 {
		q.accept = appendBounded(q.accept, c.SpecAcceptLength, qualityWindow)
	}
	if !q.said && len(q.first) >= qualityFirst && launched {
		q.said = true
		say = fmt.Sprintf("its first %d completions decode %.0f output tokens/s each", len(q.first), mean(q.first))
		if len(q.firstAccept) > 0 {
			say += fmt.Sprintf(", speculative acceptance %.2f tokens per step", mean(q.firstAccept))
		}
	}
	if trip = w.verdict(c.Server, q); trip != "" {
		// Judged again on a new window: a quarantined server that comes
		// back bad trips again.
		q.tiny, q.accept = nil, nil
	}
	return say, trip
}

// quarantineFor is how long a server pipe did not launch is kept out
// after its breaker trips.
const quarantineFor = 10 * time.Minute

// verdict says why server url's recent completions trip the breaker, ""
// when they do not. Called with w.mu held.
func (w *qualityWatch) verdict(url string, q *serverQuality) string {
	if len(q.tiny) >= qualityMin {
		mine := share(q.tiny)
		// The other servers' windows as one, counted in place: this runs
		// for every completion.
		others, tiny := 0, 0
		for u, o := range w.per {
			if u != url {
				others += len(o.tiny)
				tiny += countTrue(o.tiny)
			}
		}
		if others >= qualityMin {
			if theirs := float64(tiny) / float64(others); mine >= 0.5 && mine >= theirs+0.3 {
				return fmt.Sprintf("%.0f%% of its last %d answers are tiny (under %d characters) against %.0f%% of the other servers'", 100*mine, len(q.tiny), TinyAnswerRunes, 100*theirs)
			}
		}
	}
	if len(q.firstAccept) >= qualityFirst/2 && len(q.accept) >= qualityMin {
		base, now := mean(q.firstAccept), mean(q.accept[len(q.accept)-qualityMin:])
		if base > 1.2 && now < base/2 {
			return fmt.Sprintf("its speculative acceptance fell to %.2f tokens per step over its last %d completions, from %.2f over its first", now, qualityMin, base)
		}
	}
	return ""
}

func appendBounded[T any](xs []T, x T, n int) []T {
	xs = append(xs, x)
	if len(xs) > n {
		xs = xs[len(xs)-n:]
	}
	return xs
}

func share(xs []bool) float64 {
	return float64(countTrue(xs)) / float64(max(len(xs), 1))
}

func countTrue(xs []bool) int {
	n := 0
	for _, x := range xs {
		if x {
			n++
		}
	}
	return n
}

func mean(xs []float64) float64 {
	s := 0.0
	for _, x := range xs {
		s += x
	}
	return s / float64(max(len(xs), 1))
}
