package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pipe-dev/pipe/pipeline"
)

// hookReceiver is a local HTTP receiver of notifications, as a Slack
// incoming webhook is: it records each POSTed JSON body.
type hookReceiver struct {
	*httptest.Server
	mu     sync.Mutex
	bodies []string
	status int // answered; 200 unless set
}

func newHookReceiver(t *testing.T) *hookReceiver {
	h := &hookReceiver{status: http.StatusOK}
	h.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		h.mu.Lock()
		defer h.mu.Unlock()
		if r.Method == http.MethodPost && r.Header.Get("Content-Type") == "application/json" {
			h.bodies = append(h.bodies, string(b))
		}
		w.WriteHeader(h.status)
	}))
	t.Cleanup(h.Close)
	return h
}

func (h *hookReceiver) got() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.bodies...)
}

func decodeMessages(t *testing.T, bodies []string) []notifyMessage {
	t.Helper()
	out := make([]notifyMessage, len(bodies))
	for i, b := range bodies {
		if err := json.Unmarshal([]byte(b), &out[i]); err != nil {
			t.Fatalf("message %d is not JSON: %v\n%s", i, err, b)
		}
	}
	return out
}

func events(ms []notifyMessage) string {
	var e []string
	for _, m := range ms {
		e = append(e, m.Event)
	}
	return strings.Join(e, " ")
}

// At most one warning goes out per notifyWarnEvery; the ones held back are
// counted in the next message, and the end is always sent.
func TestNotifyRateLimitsWarnings(t *testing.T) {
	h := newHookReceiver(t)
	var logged []string
	n := newNotifier([]string{h.URL + "/hook"}, func(msg string, args ...any) { logged = append(logged, msg) })
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	n.now = func() time.Time { return now }
	about := &notifyBase{plan: testPlan(t), again: "pipe run p.toml", host: "gpu1", pid: 42}
	ls := &liveStatus{ElapsedS: 60, Finished: 7}
	warn := func(text string) {
		n.warning(about.message(notifyWarning, stateRunning, ls, &runWarning{Kind: "disk", Text: text}, nil))
	}
	warn("one")
	now = now.Add(time.Minute)
	warn("two")
	now = now.Add(time.Minute)
	warn("three")
	now = now.Add(notifyWarnEvery)
	warn("four")
	n.send(about.message(notifyFinished, stateFinished, ls, nil, nil))
	n.close(10 * time.Second)
	ms := decodeMessages(t, h.got())
	if got := events(ms); got != "warning warning finished" {
		t.Fatalf("events %q, want two warnings and the finish", got)
	}
	if ms[0].Warning.Text != "one" || ms[1].Warning.Text != "four" || ms[1].WarningsHeld != 2 || ms[2].WarningsHeld != 0 {
		t.Errorf("messages: %+v", ms)
	}
	if !strings.Contains(ms[1].Text, "2 more warnings since the last message, in ") {
		t.Errorf("text does not say the held warnings:\n%s", ms[1].Text)
	}
	if len(logged) != 0 {
		t.Errorf("logged %q", logged)
	}
}

// A notifier that fails (a command exiting 3, a receiver answering 500, a
// receiver that is gone) is logged, without the webhook's secret path, and
// the others still get the message.
func TestNotifyFailingTargetsAreLogged(t *testing.T) {
	good, bad := newHookReceiver(t), newHookReceiver(t)
	bad.status = http.StatusInternalServerError
	gone := httptest.NewServer(http.NotFoundHandler())
	gone.Close()
	var mu sync.Mutex
	var logged []string
	env := filepath.Join(t.TempDir(), "env")
	n := newNotifier([]string{"echo oops >&2; exit 3", bad.URL + "/services/T0KEN", gone.URL + "/services/T0KEN", good.URL,
		`printf '%s\n%s' "$PIPE_NOTIFY_EVENT" "$PIPE_NOTIFY_TEXT" > ` + env},
		func(msg string, args ...any) {
			mu.Lock()
			defer mu.Unlock()
			logged = append(logged, fmt.Sprint(append([]any{msg}, args...)...))
		})
	about := &notifyBase{plan: testPlan(t), again: "pipe run p.toml --set 'x.y=a<b'", host: "gpu1", pid: 42}
	n.send(about.message(notifyFailed, stateFailed, &liveStatus{}, nil, fmt.Errorf("server %s/x: down", bad.URL+"/services/T0KEN")))
	n.close(30 * time.Second)
	if len(good.got()) != 1 {
		t.Fatalf("the working receiver got %d messages", len(good.got()))
	}
	all := strings.Join(logged, "\n")
	if len(logged) != 3 || !strings.Contains(all, "exit status 3: oops") || !strings.Contains(all, "HTTP 500") || strings.Contains(all, "T0KEN") {
		t.Fatalf("logged:\n%s", all)
	}
	if m := decodeMessages(t, good.got())[0]; strings.Contains(good.got()[0], "T0KEN") || !strings.Contains(m.Error, "/…/x: down") ||
		!strings.HasSuffix(m.Text, "continue with: pipe run p.toml --set 'x.y=a&lt;b'") {
		t.Fatalf("message: %s", good.got()[0])
	}
	// The command's environment has the event and the text unescaped.
	if got, _ := os.ReadFile(env); !strings.HasPrefix(string(got), "failed\npipe: p FAILED (") || !strings.HasSuffix(string(got), "continue with: pipe run p.toml --set 'x.y=a<b'") {
		t.Fatalf("the command's environment: %q", got)
	}
}

func TestRedactNotifyFlags(t *testing.T) {
	got, changed := redactNotifyFlags([]string{"pipe", "run", "--notify", "https://hooks.slack.com/services/T0/B0/XYZ", "--notify=curl -d @- https://u:pw@h.example/x?k=1", "--notify", "cat >> notes", "p.toml"})
	want := "pipe run --notify https://hooks.slack.com/… --notify=curl -d @- https://h.example/… --notify cat >> notes p.toml"
	if !changed || strings.Join(got, " ") != want {
		t.Fatalf("got %q (%v), want %q", strings.Join(got, " "), changed, want)
	}
}

// testPlan is a plan of a small pipeline file, for the messages.
func testPlan(t *testing.T) *pipeline.Plan {
	t.Helper()
	dir := t.TempDir()
	p := filepath.Join(dir, "p.toml")
	os.WriteFile(filepath.Join(dir, "in.jsonl"), []byte(`{"id":"a","prompt":"x"}`+"\n"), 0o644)
	os.WriteFile(p, []byte("[pipeline]\nname = \"p\"\n\n[[stage]]\nid = \"in\"\nkind = \"read-prompts\"\npath = \"in.jsonl\"\n\n[[stage]]\nid = \"out\"\nkind = \"write-jsonl\"\ninput = \"in\"\npath = \"out.jsonl\"\n"), 0o644)
	plan, probs := loadPlan(p, nil, "")
	if len(probs) > 0 {
		t.Fatal(probs)
	}
	return plan
}
