// Package outage waits out a remote service failing for a reason that can
// pass (S3, the Hugging Face Hub): one request at a time is tried again
// with backoff, or after the wait the service asked for, until the outage
// has lasted a timeout.
package outage

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"slices"
	"sync"
	"syscall"
	"time"
)

// Waiter waits out outages: a request that fails for a reason that can
// pass (Transient) is tried again with backoff until the outage — the time
// since the first such failure with no request succeeding since — is
// Timeout long. One Waiter is shared by the uploads of a stage, so they
// see one outage and give up together.
type Waiter struct {
	// Service names what fails in messages ("S3", "the Hub").
	Service string
	// Timeout is how long an outage is waited out (e.g. 30 minutes).
	Timeout time.Duration
	// Transient says whether an error can pass by itself.
	Transient func(error) bool
	// Asked, when not nil, is the wait the service asked for with an
	// error (Retry-After), 0 if none: the next try is no sooner.
	Asked func(error) time.Duration
	// Notify is told when an outage begins, every minute of it, and when it
	// ends (may be nil).
	Notify func(msg string)

	mu      sync.Mutex
	since   time.Time // zero: no outage
	noted   time.Time
	waiting int
	lastErr error
	outages int
	longest time.Duration
}

// Error is an outage that lasted past the Waiter's Timeout.
type Error struct {
	Service string
	For     time.Duration
	Last    error
}

func (e *Error) Error() string {
	return fmt.Sprintf("%s failed for %s (upload_timeout): %v", e.Service, e.For.Round(time.Second), e.Last)
}
func (e *Error) Unwrap() error { return e.Last }

// Do calls fn until it succeeds, fails for good, or the outage passes the
// timeout (an *Error); what names the request for the notices.
func (w *Waiter) Do(ctx context.Context, what string, fn func() error) error {
	backoff := time.Second
	maxBackoff := min(15*time.Second, max(w.Timeout/4, 100*time.Millisecond))
	for {
		err := fn()
		if err == nil {
			w.ok()
			return nil
		}
		if !w.Transient(err) || ctx.Err() != nil {
			return err
		}
		since := w.fail(what, err)
		left := w.Timeout - time.Since(since)
		if left <= 0 {
			return &Error{Service: w.Service, For: time.Since(since), Last: err}
		}
		d := min(left, backoff/2+rand.N(backoff/2+1))
		if w.Asked != nil {
			d = min(left, max(d, w.Asked(err)))
		}
		backoff = min(2*backoff, maxBackoff)
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			w.mu.Lock()
			w.waiting--
			w.mu.Unlock()
			return err
		case <-t.C:
		}
		w.mu.Lock()
		w.waiting--
		w.mu.Unlock()
	}
}

func (w *Waiter) fail(what string, err error) time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	now := time.Now()
	w.waiting++
	w.lastErr = err
	if w.since.IsZero() {
		w.since, w.noted = now, now
		w.outages++
		w.note(fmt.Sprintf("uploads waiting: %s failed (%v); retrying for up to %s (upload_timeout) while generation goes on", what, err, w.Timeout))
	} else if now.Sub(w.noted) >= time.Minute {
		w.noted = now
		w.note(fmt.Sprintf("uploads waiting for %s (up to %s): %v", now.Sub(w.since).Round(time.Second), w.Timeout, err))
	}
	return w.since
}

func (w *Waiter) ok() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.since.IsZero() {
		return
	}
	d := time.Since(w.since)
	w.longest = max(w.longest, d)
	w.since = time.Time{}
	w.note(fmt.Sprintf("uploads going again after %s of failures", d.Round(time.Second)))
}

func (w *Waiter) note(msg string) {
	if w.Notify != nil {
		w.Notify(msg)
	}
}

// State says whether an outage is on: since when, how many requests wait,
// the last error; and the outages so far and the longest that ended.
func (w *Waiter) State() (since time.Time, waiting, outages int, longest time.Duration, last error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.since, w.waiting, w.outages, w.longest, w.lastErr
}

// noAnswerErrs are the errors of a request that got no answer at all.
var noAnswerErrs = []error{syscall.ECONNREFUSED, syscall.ECONNRESET, syscall.EPIPE,
	io.ErrUnexpectedEOF, io.EOF, context.DeadlineExceeded}

// NoAnswer reports whether err is a request that never got an answer: it
// was not sent, the connection failed or was cut, or it timed out. Such a
// failure can pass by itself.
func NoAnswer(err error) bool {
	var ne net.Error
	var oe *net.OpError
	if errors.As(err, &oe) || (errors.As(err, &ne) && ne.Timeout()) {
		return true
	}
	return slices.ContainsFunc(noAnswerErrs, func(target error) bool { return errors.Is(err, target) })
}
