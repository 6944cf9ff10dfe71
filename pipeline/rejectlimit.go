package pipeline

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// RejectLimit is [pipeline] max_rejected: the share of a stage's recent
// outcomes that may be rejections. Once a stage has decided Window records
// (sent on or rejected), a share of rejections above Share among its last
// Window stops the run: a model answering garbage keeps answering garbage,
// so two days of it are worth stopping in the first minutes. Share 0 (or
// "off") never stops. Duplicates (ReasonDuplicate) do not count.
type RejectLimit struct {
	Share  float64
	Window int
	Text   string // as written, for messages
}

// DefaultRejectLimit stops a stage that rejected more than half of its last
// 2,000 records.
var DefaultRejectLimit = RejectLimit{Share: 0.5, Window: 2000, Text: "50% of 2000"}

// ErrTooManyRejected is the cause when a stage's rejections passed
// max_rejected. Retrying does not help: the same settings regenerate the
// same rejects, so the command exits 2 (fix the cause first).
var ErrTooManyRejected = errors.New("too many rejected records")

// ErrNoTrainingRows is the cause when a run finished and an output that
// takes accepted records (not a rejected port) holds no row at all.
var ErrNoTrainingRows = errors.New("an output holds no rows")

// ParseRejectLimit reads max_rejected: "50%" (over the last 2000), "50% of
// 5000", or "off".
func ParseRejectLimit(v any) (RejectLimit, error) {
	s, ok := v.(string)
	if !ok {
		return RejectLimit{}, fmt.Errorf(`max_rejected must be a share like "50%%", "50%% of 2000" or "off", got %s`, rawTypeName(v))
	}
	s = strings.TrimSpace(s)
	if s == "off" {
		return RejectLimit{Text: s}, nil
	}
	bad := fmt.Errorf(`max_rejected %q: want a share like "50%%" (of the last 2000 records a stage decided), "50%% of 5000", or "off"`, v)
	share, window, hasWindow := strings.Cut(s, " of ")
	p, ok := strings.CutSuffix(strings.TrimSpace(share), "%")
	if !ok {
		return RejectLimit{}, bad
	}
	f, err := strconv.ParseFloat(strings.TrimSpace(p), 64)
	if err != nil || f <= 0 || f > 100 {
		return RejectLimit{}, bad
	}
	l := RejectLimit{Share: f / 100, Window: DefaultRejectLimit.Window, Text: s}
	if hasWindow {
		n, err := strconv.Atoi(strings.TrimSpace(window))
		if err != nil || n < 10 || n > 10_000_000 {
			return RejectLimit{}, fmt.Errorf("max_rejected %q: the window must be 10..10000000 records, got %q", v, strings.TrimSpace(window))
		}
		l.Window = n
	}
	if f == 100 { // more than all of them never happens
		l.Share = 0
	}
	return l, nil
}

// rejectWindow holds one stage's last outcomes: "" for a record sent on, the
// reason code for a rejection. Safe for concurrent use.
type rejectWindow struct {
	mu       sync.Mutex
	ring     []string
	next     int
	full     bool
	rejected int // rejections in ring
}

func newRejectWindow(n int) *rejectWindow { return &rejectWindow{ring: make([]string, n)} }

// add records one outcome; it returns whether the window is full and what
// share of it is rejections.
func (w *rejectWindow) add(reason string) (full bool, share float64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if old := w.ring[w.next]; w.full && old != "" {
		w.rejected--
	}
	w.ring[w.next] = reason
	if reason != "" {
		w.rejected++
	}
	w.next++
	if w.next == len(w.ring) {
		w.next, w.full = 0, true
	}
	return w.full, float64(w.rejected) / float64(len(w.ring))
}

// top returns the window's most frequent reasons, at most k, as
// "reason N" (most first).
func (w *rejectWindow) top(k int) []string {
	w.mu.Lock()
	counts := map[string]int{}
	for _, r := range w.ring {
		if r != "" {
			counts[r]++
		}
	}
	w.mu.Unlock()
	reasons := slices.Collect(maps.Keys(counts))
	slices.SortFunc(reasons, func(a, b string) int { return cmp.Or(cmp.Compare(counts[b], counts[a]), cmp.Compare(a, b)) })
	var out []string
	for _, r := range reasons[:min(k, len(reasons))] {
		out = append(out, fmt.Sprintf("%s %d", r, counts[r]))
	}
	return out
}
