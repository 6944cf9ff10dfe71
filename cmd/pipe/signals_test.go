package main

import (
	"io"
	"os"
	"syscall"
	"testing"
	"time"
)

// signalRig runs handleSignals on channels the test feeds, counting what it
// asked for.
type signalRig struct {
	sigs                chan os.Signal
	now                 chan os.Signal
	done                chan struct{}
	drains, nows, gaves chan struct{}
}

func newSignalRig(t *testing.T) *signalRig {
	r := &signalRig{
		sigs: make(chan os.Signal), now: make(chan os.Signal), done: make(chan struct{}),
		drains: make(chan struct{}, 8), nows: make(chan struct{}, 8), gaves: make(chan struct{}, 8),
	}
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		handleSignals(&stdio{Signals: r.sigs, StopNow: r.now}, io.Discard, signalActions{
			done:   r.done,
			drain:  func() { r.drains <- struct{}{} },
			now:    func() { r.nows <- struct{}{} },
			giveUp: func() { r.gaves <- struct{}{} },
		})
	}()
	t.Cleanup(func() {
		select {
		case <-r.done:
		default:
			close(r.done)
		}
		<-ended
	})
	return r
}

// send gives the handler one signal; a handler that returned (it gave up)
// takes none.
func send[T any](t *testing.T, ch chan T, v T) {
	t.Helper()
	select {
	case ch <- v:
	case <-time.After(10 * time.Second):
		t.Fatalf("the signal handler took no %v within 10s: it returned (gave up) earlier", v)
	}
}

// counts says how often each action ran; every send above is unbuffered, so
// the handler took each signal before the test goes on.
func (r *signalRig) counts() (drains, nows, gaves int) {
	return len(r.drains), len(r.nows), len(r.gaves)
}

// A SIGTERM that reaches the run after pipe stop --now (pipe stop's, sent
// first but delivered second) must not count as the third signal that gives
// up the last commit.
func TestLateSIGTERMAfterStopNowKeepsTheLastCommit(t *testing.T) {
	r := newSignalRig(t)
	send(t, r.now, os.Signal(syscall.SIGUSR1))
	send(t, r.sigs, os.Signal(syscall.SIGTERM))
	send(t, r.sigs, os.Signal(syscall.SIGTERM))
	send(t, r.now, os.Signal(syscall.SIGUSR1)) // the handler is past the SIGTERMs
	if d, n, g := r.counts(); d != 1 || n != 1 || g != 0 {
		t.Fatalf("stop --now then two SIGTERMs: drain %d, now %d, give up %d; want 1, 1, 0", d, n, g)
	}
}

// Ctrl-C three times: drain, stop at once, give up — also after --now.
func TestThirdCtrlCGivesUp(t *testing.T) {
	for _, first := range []string{"ctrl-c", "stop --now"} {
		r := newSignalRig(t)
		if first == "ctrl-c" {
			send(t, r.sigs, os.Signal(syscall.SIGINT))
			send(t, r.sigs, os.Signal(syscall.SIGTERM)) // a second signal of either kind stops at once
		} else {
			send(t, r.now, os.Signal(syscall.SIGUSR1))
		}
		send(t, r.sigs, os.Signal(syscall.SIGINT))
		select {
		case <-r.gaves:
		case <-time.After(10 * time.Second):
			t.Fatalf("%s, then Ctrl-C: never gave up", first)
		}
		if d, n, _ := r.counts(); d != 1 || n != 1 {
			t.Fatalf("%s: drain %d, now %d; want 1, 1", first, d, n)
		}
		close(r.done)
	}
}
