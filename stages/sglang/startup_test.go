package sglang

import (
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// Start-up on the fake clock: each server becomes ready on its own, and
// the run starts as soon as one is.

// lines collects warnings with the fake time they came at.
type lines struct {
	mu    sync.Mutex
	start time.Time
	text  []string
	at    []time.Duration
}

func (l *lines) add(kind, text string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.text = append(l.text, kind+": "+text)
	l.at = append(l.at, time.Since(l.start))
}

func (l *lines) find(sub string) (string, time.Duration, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i, s := range l.text {
		if strings.Contains(s, sub) {
			return s, l.at[i], true
		}
	}
	return "", 0, false
}

// A server whose first answer takes 40 s delays nobody: Start returns
// after startGrace, the records go to the ready server, and the slow one
// joins when its probe answers.
func TestSlowFirstAnswerDelaysNobody(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		slow := &fakeServer{probe: func(n int) (int, time.Duration) {
			if n == 1 {
				return http.StatusOK, 40 * time.Second
			}
			return http.StatusOK, 0
		}}
		fast := &fakeServer{generate: func(int) (int, time.Duration) { return http.StatusOK, time.Second }}
		c := fakeClient(t, fakeFleet{"fast:1": fast, "slow:1": slow}, clockOptions(), "slow:1", "fast:1")
		defer c.Close()
		start := time.Now()
		if err := c.Start(t.Context()); err != nil {
			t.Fatal(err)
		}
		if el := time.Since(start); el != startGrace {
			t.Fatalf("Start took %v, want %v: the slow server held up the start", el, startGrace)
		}
		res, err := generateOne(c)
		if err != nil || res.Server != "http://fast:1" {
			t.Fatalf("first generation: %+v, %v", res, err)
		}
		if el := time.Since(start); el != startGrace+time.Second {
			t.Errorf("first completion at %v, want %v", el, startGrace+time.Second)
		}
		time.Sleep(40 * time.Second)
		synctest.Wait()
		if st := c.Stats().Servers[0]; st.State != StateReady {
			t.Errorf("the slow server was not admitted once its probe answered: %+v", st)
		}
	})
}

// A server never ready while another works is warned about once, at
// NeverReadyWarn, with its reason; its figures say so.
func TestNeverReadyServerIsWarnedAbout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		opts := clockOptions()
		warned := &lines{start: time.Now()}
		opts.Warn = warned.add
		c := fakeClient(t, fakeFleet{"ok:1": {}}, opts, "ok:1", "gone:1")
		defer c.Close()
		if err := c.Start(t.Context()); err != nil {
			t.Fatal(err)
		}
		time.Sleep(3 * time.Minute)
		synctest.Wait()
		line, at, ok := warned.find("http://gone:1 has not been ready")
		if !ok {
			t.Fatalf("no warning about the unreachable server: %q", warned.text)
		}
		if at != time.Minute {
			t.Errorf("warned at %v, want 1m0s", at)
		}
		if !strings.Contains(line, "connection refused") || !strings.Contains(line, "4 request slots") {
			t.Errorf("warning %q lacks the reason or the missing slots", line)
		}
		if len(warned.text) != 1 {
			t.Errorf("warned %d times, want once: %q", len(warned.text), warned.text)
		}
		if st := c.Stats().Servers[1]; !st.NeverReady || st.State != StateDown {
			t.Errorf("figures of the unreachable server: %+v", st)
		}
	})
}

// One server refusing the credentials is left out with a warning and the
// others work; all refusing fails Start at once.
func TestRefusingServerIsLeftOut(t *testing.T) {
	refuse := func() (int, time.Duration) { return http.StatusUnauthorized, 0 }
	synctest.Test(t, func(t *testing.T) {
		opts := clockOptions()
		warned := &lines{start: time.Now()}
		opts.Warn = warned.add
		c := fakeClient(t, fakeFleet{"a:1": {}, "b:1": {}, "key:1": {health: refuse}}, opts, "a:1", "key:1", "b:1")
		defer c.Close()
		if err := c.Start(t.Context()); err != nil {
			t.Fatalf("Start: %v", err)
		}
		line, at, ok := warned.find("http://key:1 refused the credentials")
		if !ok || at != 0 || !strings.Contains(line, "401") || !strings.Contains(line, "no API key was sent") {
			t.Errorf("warning %q at %v", line, at)
		}
		for range 20 {
			res, err := generateOne(c)
			if err != nil || res.Server == "http://key:1" {
				t.Fatalf("%+v, %v", res, err)
			}
		}
	})
	synctest.Test(t, func(t *testing.T) {
		c := fakeClient(t, fakeFleet{"a:1": {health: refuse}, "b:1": {health: refuse}}, clockOptions(), "a:1", "b:1")
		defer c.Close()
		start := time.Now()
		err := c.Start(t.Context())
		var ae *AuthError
		if !errors.As(err, &ae) || len(ae.Servers) != 2 || time.Since(start) != 0 {
			t.Fatalf("Start = %v after %v, want an AuthError naming both at once", err, time.Since(start))
		}
	})
}

// A server its launcher saw answer (ProbeNow) is probed and admitted at
// once, not at the prober's next tick: with probe_interval 5 minutes, the
// run starts a moment after the server came up, not minutes later.
func TestProbeNowAdmitsAServerItsLauncherSawReady(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		up := false
		gpu := &fakeServer{health: func() (int, time.Duration) {
			mu.Lock()
			defer mu.Unlock()
			if !up {
				return http.StatusServiceUnavailable, 0
			}
			return http.StatusOK, 0
		}}
		opts := clockOptions()
		opts.ProbeInterval = 5 * time.Minute
		c := fakeClient(t, fakeFleet{"gpu:1": gpu}, opts, "gpu:1")
		defer c.Close()
		start := time.Now()
		go func() {
			time.Sleep(30 * time.Second)
			mu.Lock()
			up = true
			mu.Unlock()
			c.ProbeNow("http://gpu:1")
		}()
		if err := c.Start(t.Context()); err != nil {
			t.Fatal(err)
		}
		if el := time.Since(start); el > 31*time.Second {
			t.Fatalf("Start returned %v after the start, want about 30s: the launcher's word that the server is ready was not taken", el)
		}
	})
}
