package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/pipe-dev/pipe/cmd/pipe/internal/cmdline"
	"github.com/pipe-dev/pipe/cmd/pipe/internal/textfmt"
	"github.com/pipe-dev/pipe/internal/redact"
	"github.com/pipe-dev/pipe/pipeline"
	"github.com/pipe-dev/pipe/pipeline/engine"
	"github.com/pipe-dev/pipe/pipeline/pipefile"
)

// Notifications: `[pipeline] notify` and `pipe run --notify` name where a
// run says that it warned, stopped, failed or finished, so a user who
// walked away from a detached run hears of it. A target is an http(s) URL,
// to which the message is POSTed as JSON (Slack's incoming webhooks read
// its "text"; other receivers the structured fields), or a shell command
// run with `sh -c`, the same JSON on its stdin and PIPE_NOTIFY_EVENT and
// PIPE_NOTIFY_TEXT in its environment. Delivery is in order, off the run's
// path: a slow or failing target is logged in run.log and never stops or
// slows the run.

// Notification events.
const (
	notifyWarning  = "warning"
	notifyStopped  = "stopped"
	notifyFailed   = "failed"
	notifyFinished = "finished"
)

// notifyMessage is what every target gets. It never holds a secret: URL
// userinfo and the notify URLs' paths are removed from every text in it.
type notifyMessage struct {
	// Text is the whole message for a person, in Slack's "text" format:
	// &, < and > escaped as &amp; &lt; &gt;, which Slack reads as control
	// characters otherwise (api.slack.com/reference/surfaces/formatting,
	// "Escaping text"). PIPE_NOTIFY_TEXT has it unescaped.
	Text     string  `json:"text"`
	Event    string  `json:"event"` // warning, stopped, failed, finished
	Pipeline string  `json:"pipeline"`
	RunDir   string  `json:"run_dir"`
	Host     string  `json:"host"`
	PID      int     `json:"pid"`
	State    string  `json:"state"` // running, draining, stopped, failed, finished
	ElapsedS float64 `json:"elapsed_s"`
	// Finished counts the ids the run directory has finished.
	Finished   int                  `json:"finished_ids"`
	Stages     []engine.StageCounts `json:"stages"`
	TopRejects []notifyRejects      `json:"top_rejects,omitempty"`
	Warning    *runWarning          `json:"warning,omitempty"`
	// WarningsHeld counts warnings not sent since the last message (at
	// most one warning message goes out per notifyWarnEvery); all are in
	// run.log.
	WarningsHeld int    `json:"warnings_not_sent,omitempty"`
	Error        string `json:"error,omitempty"`
	ContinueWith string `json:"continue_with"`
}

type notifyRejects struct {
	Stage  string `json:"stage"`
	Reason string `json:"reason"`
	Count  int64  `json:"count"`
}

// notifyWarnEvery is how often at most a warning is sent: a run that keeps
// warning (servers flapping) must not flood a channel. The stop, failure
// and finish are always sent.
const notifyWarnEvery = 10 * time.Minute

// notifyTimeout bounds one delivery to one target.
const notifyTimeout = 20 * time.Second

// notifier delivers messages to its targets, in order, from one goroutine.
type notifier struct {
	targets []string
	log     func(msg string, args ...any) // run.log, level WARN
	// secrets are removed from every message (the notify URLs themselves).
	secrets []string
	queue   chan notifyMessage
	done    chan struct{}
	client  *http.Client
	now     func() time.Time

	mu       sync.Mutex // warnings: called from the run's progress callback
	lastWarn time.Time
	held     int
}

// newNotifier starts delivering to targets; nil when there are none.
func newNotifier(targets []string, log func(msg string, args ...any)) *notifier {
	if len(targets) == 0 {
		return nil
	}
	n := &notifier{targets: targets, log: log, queue: make(chan notifyMessage, 64), done: make(chan struct{}),
		client: &http.Client{Timeout: notifyTimeout}, now: time.Now}
	for _, t := range targets {
		if pipefile.IsNotifyURL(t) {
			n.secrets = append(n.secrets, t)
		}
	}
	go n.deliver()
	return n
}

// warning sends m (a notifyWarning) unless a warning was sent less than
// notifyWarnEvery ago; then it is counted and said with the next message.
func (n *notifier) warning(m notifyMessage) {
	if n == nil {
		return
	}
	n.mu.Lock()
	now := n.now()
	if !n.lastWarn.IsZero() && now.Sub(n.lastWarn) < notifyWarnEvery {
		n.held++
		n.mu.Unlock()
		return
	}
	n.lastWarn = now
	n.mu.Unlock()
	n.send(m)
}

// send queues m; a full queue (targets far slower than the run) drops it,
// logged.
func (n *notifier) send(m notifyMessage) {
	if n == nil {
		return
	}
	n.mu.Lock()
	m.WarningsHeld, n.held = n.held, 0
	n.mu.Unlock()
	if m.WarningsHeld > 0 {
		m.Text = notifyText(m)
	}
	m = n.scrub(m)
	select {
	case n.queue <- m:
	default:
		n.log("notify: message dropped, the targets are too slow", "event", m.Event)
	}
}

// close delivers what is queued, waiting at most wait, and stops.
func (n *notifier) close(wait time.Duration) {
	if n == nil {
		return
	}
	close(n.queue)
	select {
	case <-n.done:
	case <-time.After(wait):
		n.log("notify: gave up delivering the last messages", "waited", wait.String())
	}
}

func (n *notifier) deliver() {
	defer close(n.done)
	for m := range n.queue {
		plain := m.Text
		m.Text = slackEscape.Replace(m.Text)
		body, _ := json.Marshal(m)
		m.Text = plain
		for _, t := range n.targets {
			if err := n.deliverTo(t, m, body); err != nil {
				n.log("notify failed; the run goes on", "target", redactTarget(t), "event", m.Event, "err", n.scrubText(err.Error()))
			}
		}
	}
}

func (n *notifier) deliverTo(target string, m notifyMessage, body []byte) error {
	ctx, cancel := context.WithTimeout(context.Background(), notifyTimeout)
	defer cancel()
	if pipefile.IsNotifyURL(target) {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, target, bytes.NewReader(body))
		if err != nil {
			return err
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := n.client.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		got, _ := io.ReadAll(io.LimitReader(resp.Body, 200))
		if resp.StatusCode/100 != 2 {
			return fmt.Errorf("HTTP %d: %s", resp.StatusCode, strings.TrimSpace(string(got)))
		}
		return nil
	}
	cmd := exec.CommandContext(ctx, "sh", "-c", target)
	cmd.Stdin = bytes.NewReader(append(body, '\n'))
	cmd.Env = append(os.Environ(), "PIPE_NOTIFY_EVENT="+m.Event, "PIPE_NOTIFY_TEXT="+m.Text)
	cmd.WaitDelay = time.Second // a background child keeping the pipes open
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		if s := strings.TrimSpace(stderr.String()); s != "" {
			return fmt.Errorf("%v: %.200s", err, s)
		}
		return err
	}
	return nil
}

// scrub removes secrets from every text of m.
func (n *notifier) scrub(m notifyMessage) notifyMessage {
	m.Text, m.Error, m.ContinueWith = n.scrubText(m.Text), n.scrubText(m.Error), n.scrubText(m.ContinueWith)
	if m.Warning != nil {
		w := *m.Warning
		w.Text = n.scrubText(w.Text)
		m.Warning = &w
	}
	return m
}

func (n *notifier) scrubText(s string) string {
	for _, sec := range n.secrets {
		s = strings.ReplaceAll(s, sec, redactTarget(sec))
	}
	return redact.Userinfo(s)
}

var slackEscape = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;")

var urlPath = regexp.MustCompile(`(https?://[^/\s'"?#]+)[/?#][^\s'"]*`)

// redactTarget is a notify target as it may be shown: URLs keep their
// scheme and host, not their path or query (a Slack webhook's path is its
// secret) nor userinfo.
func redactTarget(t string) string {
	return urlPath.ReplaceAllString(redact.Userinfo(t), "$1/…")
}

// redactNotifyFlags redacts the URLs in --notify values of a command line,
// for run.json and the command that continues the run.
func redactNotifyFlags(args []string) ([]string, bool) {
	out := append([]string(nil), args...)
	changed := false
	for i := 0; i < len(out); i++ {
		a := out[i]
		if a == "--" {
			break
		}
		name, val, hasVal := strings.Cut(a, "=")
		if name != "--notify" && name != "-notify" {
			continue
		}
		if !hasVal && i+1 < len(out) {
			i++
			r := redactTarget(out[i])
			changed = changed || r != out[i]
			out[i] = r
		} else if hasVal {
			r := redactTarget(val)
			changed = changed || r != val
			out[i] = name + "=" + r
		}
	}
	return out, changed
}

// notifyBase is what every message says of the run.
type notifyBase struct {
	plan  *pipeline.Plan
	again string // the command that continues the run
	host  string
	pid   int
}

func (b *notifyBase) message(event, state string, ls *liveStatus, w *runWarning, runErr error) notifyMessage {
	m := notifyMessage{Event: event, Pipeline: b.plan.File.Name, RunDir: absPath(b.plan.File.RunDir), Host: b.host,
		PID: b.pid, State: state, ContinueWith: b.again, Warning: w}
	if runErr != nil {
		m.Error = runErr.Error()
	}
	if ls != nil {
		m.ElapsedS, m.Finished = ls.ElapsedS, ls.Finished
		for _, st := range ls.Stages {
			m.Stages = append(m.Stages, st.StageCounts)
			for r, c := range st.Reasons {
				m.TopRejects = append(m.TopRejects, notifyRejects{Stage: st.ID, Reason: r, Count: c})
			}
		}
		sort.Slice(m.TopRejects, func(i, j int) bool {
			a, b := m.TopRejects[i], m.TopRejects[j]
			return a.Count > b.Count || (a.Count == b.Count && a.Stage+"\x00"+a.Reason < b.Stage+"\x00"+b.Reason)
		})
		m.TopRejects = m.TopRejects[:min(len(m.TopRejects), 5)]
	}
	m.Text = notifyText(m)
	return m
}

// notifyText is the message for a person, in a few lines.
func notifyText(m notifyMessage) string {
	var b strings.Builder
	dir := pipeline.DisplayPath(m.RunDir)
	switch m.Event {
	case notifyWarning:
		fmt.Fprintf(&b, "pipe: warning from %s (%s on %s): %s\n", m.Pipeline, dir, m.Host, m.Warning.Text)
	case notifyFailed:
		fmt.Fprintf(&b, "pipe: %s FAILED (%s on %s): %s\n", m.Pipeline, dir, m.Host, firstLine(m.Error))
	case notifyStopped:
		fmt.Fprintf(&b, "pipe: %s stopped (%s on %s); everything processed is committed\n", m.Pipeline, dir, m.Host)
	default:
		fmt.Fprintf(&b, "pipe: %s finished (%s on %s)\n", m.Pipeline, dir, m.Host)
	}
	fmt.Fprintf(&b, "state %s after %s: %d ids finished", m.State, textfmt.Elapsed(m.ElapsedS), m.Finished)
	for _, st := range m.Stages {
		if st.Rejected > 0 || st.Failed > 0 {
			fmt.Fprintf(&b, "; %s %d in, %d out, %d rejected, %d failed", st.ID, st.In, st.Out, st.Rejected, st.Failed)
		}
	}
	b.WriteString("\n")
	if len(m.TopRejects) > 0 {
		parts := make([]string, len(m.TopRejects))
		for i, r := range m.TopRejects {
			parts[i] = fmt.Sprintf("%s %s %d", r.Stage, r.Reason, r.Count)
		}
		fmt.Fprintf(&b, "top rejects: %s\n", strings.Join(parts, ", "))
	}
	if m.WarningsHeld > 0 {
		what := "warnings"
		if m.WarningsHeld == 1 {
			what = "warning"
		}
		fmt.Fprintf(&b, "%d more %s since the last message, in %s\n", m.WarningsHeld, what, filepath.Join(dir, runLogFile))
	}
	switch m.Event {
	case notifyWarning:
		fmt.Fprintf(&b, "watch: pipe status %s   stop: pipe stop %s", cmdline.Join([]string{dir}), cmdline.Join([]string{dir}))
	case notifyFinished:
		fmt.Fprintf(&b, "report: pipe report %s", cmdline.Join([]string{dir}))
	default:
		fmt.Fprintf(&b, "continue with: %s", m.ContinueWith)
	}
	return b.String()
}

func firstLine(s string) string {
	first, _, _ := strings.Cut(s, "\n")
	return first
}

func absPath(p string) string {
	if a, err := filepath.Abs(p); err == nil {
		return a
	}
	return p
}
