package outage

import (
	"context"
	"errors"
	"net"
	"strings"
	"syscall"
	"testing"
	"testing/synctest"
	"time"
)

// An outage shorter than the timeout is waited out (with notices at its
// start and end; the retry that ends it comes up to one jittered backoff,
// at most 15 s, after it); a longer one ends in an Error; a refusal is
// returned at once, not retried.
func TestWaiter(t *testing.T) {
	down := &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
	deny := errors.New("access denied")
	transient := func(err error) bool { return err == down }
	synctest.Test(t, func(t *testing.T) {
		var notes []string
		w := &Waiter{Service: "S3", Timeout: time.Minute, Transient: transient, Notify: func(m string) { notes = append(notes, m) }}
		start := time.Now()
		calls := 0
		err := w.Do(context.Background(), "uploading x", func() error {
			calls++
			if time.Since(start) < 40*time.Second {
				return down
			}
			return nil
		})
		if err != nil || calls < 4 || len(notes) != 2 || !strings.HasPrefix(notes[0], "uploads waiting: uploading x failed") || !strings.HasPrefix(notes[1], "uploads going again after ") {
			t.Fatalf("40 s outage: %v after %d calls; notes %q", err, calls, notes)
		}
		if _, _, outages, longest, _ := w.State(); outages != 1 || longest < 40*time.Second {
			t.Errorf("state: %d outages, longest %s", outages, longest)
		}

		start = time.Now()
		err = w.Do(context.Background(), "uploading y", func() error { return down })
		var oe *Error
		if !errors.As(err, &oe) || !strings.HasPrefix(err.Error(), "S3 failed for 1m0s (upload_timeout): ") || time.Since(start) < time.Minute || time.Since(start) > time.Minute+time.Second {
			t.Fatalf("endless outage: %v after %s", err, time.Since(start))
		}

		calls = 0
		if err := w.Do(context.Background(), "z", func() error { calls++; return deny }); err != deny || calls != 1 {
			t.Fatalf("refusal: %v after %d calls", err, calls)
		}
	})
}

// A service that asks for a wait (Retry-After) is not asked again sooner.
func TestWaiterHonoursTheAskedWait(t *testing.T) {
	busy := errors.New("429")
	synctest.Test(t, func(t *testing.T) {
		w := &Waiter{Service: "the Hub", Timeout: time.Hour, Transient: func(err error) bool { return err == busy },
			Asked: func(error) time.Duration { return 55 * time.Second }}
		var at []time.Duration
		start := time.Now()
		err := w.Do(context.Background(), "commit", func() error {
			at = append(at, time.Since(start))
			if len(at) < 3 {
				return busy
			}
			return nil
		})
		if err != nil || len(at) != 3 || at[1] < 55*time.Second || at[2]-at[1] < 55*time.Second {
			t.Fatalf("%v; tries at %v", err, at)
		}
	})
}
