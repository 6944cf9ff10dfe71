package stages

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pipe-dev/pipe/pipeline/engine"
	"github.com/pipe-dev/pipe/pipeline/figure"
	"github.com/pipe-dev/pipe/stages/sglang"
)

// lockedBuffer is a run log tests can read while the run writes it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func TestGenerateForbiddenServerIsEjectedAndTheRunCompletes(t *testing.T) {
	// One of three servers starts answering 403 to generations mid-run (its
	// gateway revoked the route): it is ejected with the reason in the run
	// log, its requests go to the others, and every record is written once.
	f := startTestFleet(t, quickSim(3))
	urls := f.URLs()
	u, err := url.Parse(urls[2])
	if err != nil {
		t.Fatal(err)
	}
	rp := httputil.NewSingleHostReverseProxy(u)
	rp.ErrorLog = log.New(io.Discard, "", 0)
	var posts atomic.Int64
	bad := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && posts.Add(1) > 20 {
			w.WriteHeader(http.StatusForbidden)
			w.Write([]byte(`{"detail":"Forbidden"}`))
			return
		}
		rp.ServeHTTP(w, r)
	}))
	defer bad.Close()
	urls[2] = bad.URL
	const n = 300
	var runLog lockedBuffer
	dir, sum, err := runGenPipeline(t, context.Background(),
		genPipeline(serversKey(urls)+fastGenKeys+readyKey+"concurrency = 4\n"), genPrompts(n), engine.Options{Log: &runLog})
	if err != nil {
		t.Fatalf("the run stopped: %v", err)
	}
	recs := mustAllOut(t, dir, sum, n)
	retried := 0
	for _, r := range recs {
		if r.Completion.Attempts > 1 {
			retried++
		}
	}
	if retried == 0 {
		t.Errorf("no record counts the refused attempt")
	}
	if want := `stage "gen": server ` + bad.URL + ` ejected: HTTP 403: Forbidden`; !strings.Contains(runLog.String(), want) {
		t.Errorf("run log lacks %q:\n%s", want, runLog.String())
	}
	figs := stageSummary(t, sum, "gen").Figures
	name := strings.TrimPrefix(bad.URL, "http://")
	state, _ := figure.Find(figs, "state", "server", name)
	ej, _ := figure.Find(figs, "ejections", "server", name)
	if badStat := state.FormatValue(); !strings.HasPrefix(badStat, "ejected (HTTP 403") && !strings.HasPrefix(badStat, "ejected (1-token probe: HTTP 403") || ej.Value != 1 {
		t.Errorf("figures of the refusing server: state %q, ejections %v", badStat, ej.Value)
	}
}

func TestGenerateReportShowsWaitingForServers(t *testing.T) {
	// The only server accepts connections and never answers: within the
	// health check's timeout the stage's figures say no server is ready and
	// why, and the run log gets the same line every NotifyInterval.
	release := make(chan struct{})
	hang := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	defer hang.Close()
	defer close(release)
	var runLog lockedBuffer
	g := &generate{id: "gen", log: &runLog}
	g.client = sglang.New([]sglang.ServerSpec{{URL: hang.URL, Concurrency: 2}}, sglang.Options{
		CheckTimeout: 100 * time.Millisecond, ProbeInterval: 20 * time.Millisecond, ReadyTimeout: time.Minute,
		NotifyInterval: 20 * time.Millisecond,
		Logf:           g.logf, Notify: g.logf,
	})
	defer g.client.Close()
	ctx, cancel := context.WithCancelCause(context.Background())
	started := make(chan error, 1)
	go func() { started <- g.client.Start(ctx) }()
	want := hang.URL + " down (/health: no answer within 100ms)"
	var waiting string
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if w, ok := figure.Find(g.Report(), "waiting_for_servers"); ok && strings.Contains(w.Detail, want) {
			waiting = w.Detail
			break
		}
	}
	if waiting == "" {
		t.Fatalf("Report never said which server it waits for and why: %v", g.Report())
	}
	t.Logf("waiting for servers: %s", waiting)
	for deadline := time.Now().Add(10 * time.Second); !strings.Contains(runLog.String(), `stage "gen": no server ready for `) || !strings.Contains(runLog.String(), want); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("run log lacks %q:\n%s", want, runLog.String())
		}
	}
	stop := errors.New("test over")
	cancel(stop)
	if err := <-started; !errors.Is(err, stop) {
		t.Errorf("Start = %v", err)
	}
}
