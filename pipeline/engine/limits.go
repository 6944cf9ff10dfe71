package engine

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
)

// ErrTooManyFailed is the cause when failures passed max_failed.
var ErrTooManyFailed = errors.New("too many failed records")

// ErrRecordsFailed is the cause when a run ended with records that failed
// (no more than max_failed allows): they are not finished, and the same
// command does them again.
var ErrRecordsFailed = errors.New("records failed")

// ErrTooManyRejected is the cause when a stage's rejections passed
// max_rejected. Retrying does not help: the same settings regenerate the
// same rejects, so the command exits 2 (fix the cause first).
var ErrTooManyRejected = errors.New("too many rejected records")

// ErrNoTrainingRows is the cause when a run finished and an output that
// takes accepted records (not a rejected port) holds no row at all.
var ErrNoTrainingRows = errors.New("an output holds no rows")

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
