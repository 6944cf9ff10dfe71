package sim

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// FaultKind names an injectable failure.
type FaultKind string

// The fault kinds. Request faults hit a request with probability Rate while
// their window is open; FaultDie is a schedule.
const (
	// FaultServerError answers 500 with an SGLang error body.
	FaultServerError FaultKind = "500"
	// FaultQueueFull answers 503 "The request queue is full.".
	FaultQueueFull FaultKind = "503"
	// FaultBadRequest answers 400 with an SGLang error body.
	FaultBadRequest FaultKind = "400"
	// FaultHang accepts the request and never answers until the client gives
	// up (or the server is killed or closed). It holds no running slot.
	FaultHang FaultKind = "hang"
	// FaultReset generates normally, then resets the TCP connection halfway
	// through the response body (RST, not FIN).
	FaultReset FaultKind = "reset"
	// FaultEmptyAnswer ends the output right after "</think>\n\n".
	FaultEmptyAnswer FaultKind = "empty-answer"
	// FaultEmptyThinking outputs "<think>\n\n</think>\n\n" before the answer.
	FaultEmptyThinking FaultKind = "empty-thinking"
	// FaultNoThinkEnd outputs thinking and then EOS, with no "</think>" and
	// no answer (finish_reason stop).
	FaultNoThinkEnd FaultKind = "no-think-end"
	// FaultLeakedThink puts a stray "</think>" in the middle of the answer.
	FaultLeakedThink FaultKind = "leaked-think"
	// FaultBadToolCall makes the answer to a prompt with tools call one
	// malformed: its JSON not closed, or an undeclared tool's name (one
	// or the other by the prompt; tools.go). Prompts without tools are
	// unaffected.
	FaultBadToolCall FaultKind = "bad-tool-call"
	// FaultDie kills the server at At (refusing connections, dropping all in
	// flight) and revives it at At+For (then warming up again). Rate is not
	// used; For must be positive.
	FaultDie FaultKind = "die"
	// FaultSlow makes the server decode at a third of its speed while
	// its window is open ("slow@30m", "slow@3000req#1": from its 3000th
	// request on): a GPU that throttles, or a job that moved in beside
	// it. Rate is not used; it needs a window.
	FaultSlow FaultKind = "slow"
	// FaultSpecCollapse makes speculative decoding accept almost no draft
	// token (spec_accept_length near 1) for the requests it hits, while
	// answers stay plausible: the MTP collapse of a server that passes
	// every health check. Needs SpecAcceptMean.
	FaultSpecCollapse FaultKind = "spec-collapse"
)

// collapsedAccept is the accepted tokens per verify step under
// FaultSpecCollapse.
const collapsedAccept = 1.05

// slowFactor is how many times slower a server decodes under FaultSlow.
const slowFactor = 3

var faultKinds = []FaultKind{FaultServerError, FaultQueueFull, FaultBadRequest, FaultHang, FaultReset,
	FaultEmptyAnswer, FaultEmptyThinking, FaultNoThinkEnd, FaultLeakedThink, FaultBadToolCall, FaultDie, FaultSlow, FaultSpecCollapse}

// Fault is one injected failure. Draws are reproducible: the k-th request
// that reaches server i draws from (Config.Seed, i, k), so the same seed and
// the same per-server arrival order give the same faults, and a retried
// request makes a fresh draw.
type Fault struct {
	Kind FaultKind
	// Rate is the probability that a request in the window gets the fault,
	// 0..1. Default (0): 1 when a window (At or For) is given; a request
	// fault with neither a rate nor a window is an error.
	Rate float64
	// At is when the window opens, in simulated time since the fleet started.
	// Default 0.
	At time.Duration
	// For is how long the window stays open. Default 0: until the fleet
	// closes (FaultDie requires it).
	For time.Duration
	// FromRequest, when not 0, opens the window at the server's
	// FromRequest-th generation request instead of at a time ("hang@200req"):
	// a test's fault then falls mid-run however long the client took to
	// start, which simulated time (counted from the fleet's start) cannot
	// promise on a loaded machine. It excludes At and For.
	FromRequest uint64
	// Servers are the indexes of the servers it applies to. Default: all.
	Servers []int
}

// normalize checks f for a fleet of servers servers and returns it with
// its defaults: a request fault given only a window hits every request
// in it (rate 1).
func (f Fault) normalize(servers int) (Fault, error) {
	if err := f.checkFields(servers); err != nil {
		return f, err
	}
	switch f.Kind {
	case FaultDie:
		if f.For <= 0 {
			return f, fmt.Errorf("die needs a duration (die@AT+FOR)")
		}
		return f, nil
	case FaultSlow:
		if f.Rate != 0 || !f.hasWindow() {
			return f, fmt.Errorf("slow takes a window and no rate (slow@AT[+FOR] or slow@Nreq)")
		}
		return f, nil
	}
	if f.Rate == 0 {
		if !f.hasWindow() {
			return f, fmt.Errorf("needs a rate (KIND:0.01) or a window (KIND@AT+FOR)")
		}
		f.Rate = 1
	}
	return f, nil
}

// checkFields checks what every kind of fault shares: a known kind, a
// rate in 0..1, a window that is either times or a request number, and
// server indexes below servers.
func (f *Fault) checkFields(servers int) error {
	if !slices.Contains(faultKinds, f.Kind) {
		return fmt.Errorf("unknown fault kind %q (want one of %s)", f.Kind, kindList())
	}
	if f.Rate < 0 || f.Rate > 1 {
		return fmt.Errorf("rate must be 0..1, got %g", f.Rate)
	}
	if f.At < 0 || f.For < 0 {
		return fmt.Errorf("window must not be negative")
	}
	if f.FromRequest > 0 && (f.At != 0 || f.For != 0 || f.Kind == FaultDie) {
		return fmt.Errorf("a window from a request (@Nreq) takes no time and no duration, and die needs times")
	}
	for _, s := range f.Servers {
		if s < 0 || s >= servers {
			return fmt.Errorf("server index %d out of range 0..%d", s, servers-1)
		}
	}
	return nil
}

// hasWindow reports whether f is limited to a window: a time, a duration
// or a request number.
func (f *Fault) hasWindow() bool {
	return f.At != 0 || f.For != 0 || f.FromRequest != 0
}

func (f *Fault) appliesTo(server int) bool {
	return len(f.Servers) == 0 || slices.Contains(f.Servers, server)
}

// open reports whether the window is open at simulated time t for the
// server's seq-th request (from 1).
func (f *Fault) open(t time.Duration, seq uint64) bool {
	if f.FromRequest > 0 {
		return seq >= f.FromRequest
	}
	return t >= f.At && (f.For == 0 || t < f.At+f.For)
}

func kindList() string {
	s := make([]string, len(faultKinds))
	for i, k := range faultKinds {
		s[i] = string(k)
	}
	return strings.Join(s, ", ")
}

// ParseFault parses the command-line form of a fault:
//
//	KIND[:RATE][@AT[+FOR]|@Nreq][#SERVER[,SERVER…]]
//
// e.g. "500:0.01" (1% of requests get a 500), "hang@10m+30s" (every request
// hangs during that window), "die@1h+5m#2" (server 2 is down from 1h to 1h5m),
// "reset:0.1@0s+10m#0,1", "hang@200req#2" (server 2 hangs from its 200th
// request on). Durations use Go syntax and are simulated time.
func ParseFault(s string) (Fault, error) {
	var f Fault
	rest := s
	if i := strings.IndexByte(rest, '#'); i >= 0 {
		for _, p := range strings.Split(rest[i+1:], ",") {
			n, err := strconv.Atoi(strings.TrimSpace(p))
			if err != nil {
				return f, fmt.Errorf("fault %q: bad server index %q", s, p)
			}
			f.Servers = append(f.Servers, n)
		}
		rest = rest[:i]
	}
	if i := strings.IndexByte(rest, '@'); i >= 0 {
		win := rest[i+1:]
		rest = rest[:i]
		at, dur, hasFor := strings.Cut(win, "+")
		var err error
		if n, ok := strings.CutSuffix(at, "req"); ok && !hasFor {
			if f.FromRequest, err = strconv.ParseUint(n, 10, 64); err != nil || f.FromRequest == 0 {
				return f, fmt.Errorf("fault %q: bad request number %q (want @Nreq, N from 1)", s, n)
			}
		} else if f.At, err = time.ParseDuration(at); err != nil {
			return f, fmt.Errorf("fault %q: bad start %q: %v", s, at, err)
		}
		if hasFor {
			if f.For, err = time.ParseDuration(dur); err != nil {
				return f, fmt.Errorf("fault %q: bad duration %q: %v", s, dur, err)
			}
		}
	}
	kind, rate, hasRate := strings.Cut(rest, ":")
	f.Kind = FaultKind(kind)
	if hasRate {
		r, err := strconv.ParseFloat(rate, 64)
		if err != nil {
			return f, fmt.Errorf("fault %q: bad rate %q", s, rate)
		}
		f.Rate = r
	}
	if _, err := f.normalize(1 << 30); err != nil {
		return f, fmt.Errorf("fault %q: %w", s, err)
	}
	return f, nil
}

// String returns f in ParseFault's form.
func (f Fault) String() string {
	var b strings.Builder
	b.WriteString(string(f.Kind))
	if f.Rate != 0 && f.Kind != FaultDie && f.Kind != FaultSlow {
		b.WriteString(":" + strconv.FormatFloat(f.Rate, 'g', -1, 64))
	}
	if f.FromRequest > 0 {
		b.WriteString("@" + strconv.FormatUint(f.FromRequest, 10) + "req")
	} else if f.At != 0 || f.For != 0 {
		b.WriteString("@" + f.At.String())
		if f.For != 0 {
			b.WriteString("+" + f.For.String())
		}
	}
	for i, s := range f.Servers {
		if i == 0 {
			b.WriteByte('#')
		} else {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(s))
	}
	return b.String()
}

// faultSet is the set of request faults one request drew.
type faultSet uint16

func (s faultSet) has(k FaultKind) bool { return s&kindBit(k) != 0 }

func kindBit(k FaultKind) faultSet {
	return 1 << faultSet(slices.Index(faultKinds, k))
}

// drawFaults decides which request faults hit the seq-th request of server
// at simulated time t.
func drawFaults(faults []Fault, seed uint64, server int, seq uint64, t time.Duration) faultSet {
	var s faultSet
	for j := range faults {
		f := &faults[j]
		if f.Kind == FaultDie || f.Kind == FaultSlow || !f.appliesTo(server) || !f.open(t, seq) {
			continue
		}
		u := unitFloat(mix(seed, uint64(server)+1, seq, uint64(j)+1))
		if u < f.Rate {
			s |= kindBit(f.Kind)
		}
	}
	return s
}

// slowed reports whether a FaultSlow window is open for server at
// simulated time t, its seq-th request (from 1) the latest.
func slowed(faults []Fault, server int, seq uint64, t time.Duration) bool {
	for j := range faults {
		if f := &faults[j]; f.Kind == FaultSlow && f.appliesTo(server) && f.open(t, seq) {
			return true
		}
	}
	return false
}
