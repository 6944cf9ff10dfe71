// Package sglang is a client for a fleet of SGLang (or other OpenAI-compatible)
// inference servers: it checks that servers are ready, routes each request to
// the least-loaded server with a free slot, retries what can be retried on
// another server, ejects failing servers and re-admits them after a probe,
// and keeps live figures per server.
//
// A Client is built with New, started with Start (readiness), used through
// Sessions (one per record, holding one server slot) and closed with Close.
package sglang

import (
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Options configure a Client. Zero values mean the stated defaults.
type Options struct {
	// API is the endpoint used. Default APIChat.
	API API
	// Model is the model name sent on the chat API. Default: the model the
	// servers report (SGLang ignores the name; other servers need it).
	Model string
	// Sampling is sent with every request.
	Sampling Sampling
	// Thinking says the output starts with thinking, so raw text is split
	// into reasoning and answer when the server does not split it.
	Thinking bool
	// ThinkingForced says the chat template's generation prompt opens the
	// reasoning (chat.Template.ThinkingForced): with Thinking, raw output
	// starts inside it. Default false.
	ThinkingForced bool

	// MaxAttempts bounds the requests sent for one generation. Default 5.
	MaxAttempts int
	// RequestTimeout bounds one attempt; long thinking outputs need long
	// ones. Default 30m.
	RequestTimeout time.Duration
	// BackoffMin and BackoffMax bound the jittered exponential wait between
	// attempts. Defaults 100ms and 10s.
	BackoffMin, BackoffMax time.Duration
	// BreakerFailures is how many consecutive failed attempts eject a server.
	// Default 5.
	BreakerFailures int
	// ProbeInterval is how often a server that is not admitted is probed
	// (health, then a 1-token generation). Default 5s.
	ProbeInterval time.Duration
	// ProbeTimeout bounds the 1-token probe generation. Default 60s.
	ProbeTimeout time.Duration
	// CheckTimeout bounds each health and info request of a readiness
	// check, so a server that accepts connections but never answers is
	// reported down within seconds. Default 10s.
	CheckTimeout time.Duration
	// ReadyTimeout is how long the client waits while no server is admitted
	// (at start, or when all are down mid-run) before giving up with an
	// error that lists every server's reason. Default 10m.
	ReadyTimeout time.Duration
	// Logf receives one line per server state change. Default: discard.
	Logf func(format string, args ...any)
	// Warn receives warnings the user must see while the run goes on, with
	// their kind (WarnRefused, WarnNeverReady, WarnStalled): a server
	// refusing the credentials, a server never ready while the others
	// work, a stalled request. Default: Logf with "warning: ".
	Warn func(kind, text string)
	// NeverReadyWarn is how long after Start a server that was never ready
	// is warned about while others work. Default 1m.
	NeverReadyWarn time.Duration
	// StallTimeout: a request in flight longer than this and than
	// StallFactor times the fleet's p99 latency has stalled: it is sent
	// once more to another server (the first answer wins) and its server
	// is suspect until a probe clears or ejects it. Judged once the fleet
	// has StallMinSamples completions. Default 5m.
	StallTimeout time.Duration
	// Notify, while no server is admitted (at Start or mid-run), receives
	// every NotifyInterval one line naming each server with its state and
	// reason. Default: none.
	Notify func(format string, args ...any)
	// NotifyInterval is how often Notify is called while waiting. Default 5s.
	NotifyInterval time.Duration
	// AnswerBudget bounds the bytes of answers being read or held at once
	// across the whole fleet (every server, every request in flight), so
	// runaway or hostile bodies fail their requests instead of the process
	// running out of memory. Default 256 MiB: a few hundred answers of a
	// few hundred KB each use a tenth of it.
	AnswerBudget int64
	// Stop, when closed, ends the sending of requests: a request not yet
	// sent (waiting for a slot, a retry, a hedge) is not sent, and
	// Generate returns ErrNotSent; requests already sent go on. Nil: never.
	// It is how a run's stop spends nothing past what is in flight.
	Stop <-chan struct{}
}

// ErrNotSent is Generate's error for a request it did not send because
// Options.Stop was closed first: the record was not started, and a next
// run does it.
var ErrNotSent = errors.New("not sent: the run is stopping")

// stopping reports whether Options.Stop is closed.
func (c *Client) stopping() bool {
	select {
	case <-c.opts.Stop:
		return true
	default:
		return false
	}
}

func (o *Options) setDefaults() {
	def := func(p *time.Duration, d time.Duration) {
		if *p <= 0 {
			*p = d
		}
	}
	if o.API == "" {
		o.API = APIChat
	}
	if o.MaxAttempts <= 0 {
		o.MaxAttempts = 5
	}
	if o.BreakerFailures <= 0 {
		o.BreakerFailures = 5
	}
	def(&o.RequestTimeout, 30*time.Minute)
	def(&o.BackoffMin, 100*time.Millisecond)
	def(&o.BackoffMax, 10*time.Second)
	def(&o.ProbeInterval, 5*time.Second)
	def(&o.ProbeTimeout, 60*time.Second)
	def(&o.CheckTimeout, 10*time.Second)
	def(&o.NotifyInterval, 5*time.Second)
	def(&o.ReadyTimeout, 10*time.Minute)
	if o.AnswerBudget <= 0 {
		o.AnswerBudget = 256 << 20
	}
	def(&o.NeverReadyWarn, time.Minute)
	def(&o.StallTimeout, 5*time.Minute)
	if o.Logf == nil {
		o.Logf = func(string, ...any) {}
	}
}

// ServerSpec is one server of the fleet.
type ServerSpec struct {
	// URL is the base URL, e.g. "http://localhost:30000". A user:password
	// in it is sent as Basic auth (unless Header sets Authorization) and
	// removed from the name the server goes by everywhere.
	URL string
	// Concurrency is how many requests may be in flight to it at once;
	// with MaxConcurrency, the starting value (default 16, see adapt.go).
	Concurrency int
	// MaxConcurrency > 0 makes the server's concurrency adaptive, up to
	// this ceiling and the server's running capacity (adapt.go).
	MaxConcurrency int
	// Header is sent with every request to the server: generations,
	// health, info and probes (e.g. "Authorization: Bearer KEY"). Its
	// values never appear in errors, figures or log lines. It may not set
	// the headers the client writes itself (see ReservedHeader).
	Header http.Header
}

// Client sends generations to a fleet. Its methods are safe for concurrent use.
type Client struct {
	opts    Options
	rt      http.RoundTripper // generations: RoundTrip, no redirects or header copies
	hc      *http.Client      // health, info: the same RoundTripper
	servers []*server
	st      *settings // set by Start, once the model is known

	mu      sync.Mutex
	changed chan struct{} // closed (and replaced) when a slot frees or a server's state changes
	waiters int           // sessions waiting in acquire
	// hedgeWaiters are second attempts of stalled requests waiting for a
	// slot: they go first.
	hedgeWaiters int
	hedgeAvoid   map[*server]int // waiting hedges by the server each avoids
	// stallAfter is, in nanoseconds, how long a request may be in flight
	// before it counts as stalled (0: not enough completions to judge).
	stallAfter atomic.Int64
	downFrom   time.Time // when no server was admitted any more; zero while one is
	startAt    time.Time // when Start began: the wait for a first server
	next       int       // rotates tie-breaks among equally loaded servers
	model      string    // the fleet's model, from the first server that reported one

	ridPrefix string
	ridSeq    atomic.Uint64
	// meanWeight is the fleet's mean request weight in tokens (route.go).
	meanWeight atomic.Int64
	bufs       sync.Pool    // answer bodies
	reqBufs    sync.Pool    // request bodies, grown to the prompts
	budget     answerBudget // bytes of answers in flight, fleet-wide

	// ctx ends the probes at Close.
	ctx     context.Context
	cancel  context.CancelFunc
	probers sync.WaitGroup
	started time.Time
}

// server is one server's state; fields below mu are guarded by Client.mu.
type server struct {
	url    string      // base URL without userinfo: the server's name everywhere
	header http.Header // sent with every request (credentials, extra headers)
	// postHeader is header with Content-Type, canonical, shared read-only
	// by every POST to the server.
	postHeader http.Header
	limit      int
	maxLimit   int   // > 0: limit adapts up to this (adapt.go)
	bad        error // a URL or header the client cannot send: fails every check
	stats      *serverStats

	outstanding int
	admitted    bool
	// suspect: a request on it stalled (far beyond the fleet's latency);
	// it gets no new requests until a probe decides (see stall.go).
	suspect  bool
	reason   string // why it is not admitted
	failures int    // consecutive failed attempts
	probing  bool
	// probeNow wakes its prober before the next ProbeInterval (ProbeNow).
	probeNow chan struct{}
	// quarantined: no probe re-admits it before then (Quarantine).
	quarantined time.Time
	checked     bool // its first check ended
	refused     bool // its last check was a refusal of the credentials (401, 403)
	// everAdmitted: it was admitted at least once; neverReadyWarned: the
	// warning that it never was has been given.
	everAdmitted, neverReadyWarned bool
	warnedLimit                    bool // concurrency above max_running_requests was logged
	// Adaptive concurrency (adapt.go): the most running requests it
	// reported, whether its start was set from its capacity, completions
	// since the last back-off, retractions seen, its last /metrics
	// token_usage.
	peakRunning, sinceBackoff, retractions int
	adaptStarted                           bool
	tokenUsage                             float64
	ttft                                   ttftWindow // from /metrics
	// queuedSeen: it queued a request (its capacity is peakRunning);
	// window sums the answers since the limit last moved, which waits
	// for cooldown completions after a cut.
	queuedSeen bool
	window     adaptState
	cooldown   int
	kvCap      int          // > 0: the capacity retractions showed (adapt.go)
	latency    latencyGuard // rising latency (latency.go)
	// Routing (route.go): tokens of the requests on their way or being
	// answered, how many of those, and the queue it last reported.
	tokens, sending atomic.Int64
	waiting         int
	// ctx is cancelled with errEjected when the server is ejected, which
	// aborts its requests in flight so they are re-sent elsewhere.
	ctx    context.Context
	cancel context.CancelCauseFunc
	info   *ServerInfo // read once
}

// New returns a client for servers; it sends nothing until Start.
func New(servers []ServerSpec, opts Options) *Client {
	perHost := 0
	for _, s := range servers {
		perHost = max(perHost, s.Concurrency, s.MaxConcurrency)
	}
	return newClient(servers, opts, newTransport(perHost))
}

// newClient is New over rt: tests of the client's timing give it an
// in-memory one, inside a testing/synctest bubble.
func newClient(servers []ServerSpec, opts Options, rt http.RoundTripper) *Client {
	opts.setDefaults()
	var b [6]byte
	_, _ = crand.Read(b[:])
	c := &Client{
		opts:       opts,
		rt:         rt,
		hc:         newHTTPClient(rt),
		changed:    make(chan struct{}),
		hedgeAvoid: map[*server]int{},
		ridPrefix:  "pipe-" + hex.EncodeToString(b[:]) + "-",
		started:    time.Now(),
		budget:     answerBudget{max: opts.AnswerBudget},
	}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	c.bufs.New = func() any { b := make([]byte, 0, 16<<10); return &b }
	c.reqBufs.New = func() any { b := make([]byte, 0, 1<<10); return &b }
	for _, s := range servers {
		url, header := splitUserinfo(s.URL, s.Header)
		// A bad URL or header fails the server's readiness check.
		bad := checkServerURL(url)
		if bad == nil {
			bad = checkHeader(header)
		}
		limit := s.Concurrency
		if s.MaxConcurrency > 0 {
			if limit <= 0 {
				limit = adaptStart
			}
			limit = min(limit, s.MaxConcurrency)
		}
		c.servers = append(c.servers, &server{url: url, header: header, postHeader: postHeader(header), limit: limit, maxLimit: s.MaxConcurrency, bad: bad,
			stats: newServerStats(c.started), reason: notChecked, probeNow: make(chan struct{}, 1)})
	}
	return c
}

// Capacity is the sum of the servers' concurrency (of an adaptive one,
// its ceiling): how many sessions can have a request in flight at once.
func (c *Client) Capacity() int {
	n := 0
	for _, s := range c.servers {
		n += max(s.limit, s.maxLimit)
	}
	return n
}

// startGrace is how long Start, once a server is ready, still waits for
// the first checks of the others: quick ones (a server down or starting
// up) are then known before the first request, and a slow one (a first
// answer taking 40 s) delays nobody by more than this.
const startGrace = time.Second

// Start checks every server on its own (health, server info once, a
// 1-token probe) and admits each as soon as it is ready; it returns once a
// server is admitted (and the others' first checks ended, or startGrace
// passed). Servers not ready are logged with the reason and probed in the
// background until they are; one that refuses the credentials (401, 403)
// is left out with a warning while the others work. With no server ready
// Start waits up to ReadyTimeout and then fails with every server's reason;
// when every server refused the credentials it fails at once with an
// *AuthError. Servers found serving different models are an error.
func (c *Client) Start(ctx context.Context) error {
	c.mu.Lock()
	c.startAt = time.Now()
	// The wait for a first server begins now: ready_timeout counts from
	// here, as the waiting line says.
	c.downFrom = c.startAt
	for _, s := range c.servers {
		c.startFirstCheck(s)
		c.startMetrics(s)
	}
	c.mu.Unlock()
	c.startNotifier()
	c.startWatcher()
	if err := c.waitFirst(ctx); err != nil {
		return err
	}
	c.mu.Lock()
	models := map[string][]string{}
	for _, s := range c.servers {
		if s.info != nil && s.info.Model != "" {
			models[s.info.Model] = append(models[s.info.Model], s.url)
		}
	}
	c.mu.Unlock()
	if len(models) > 1 {
		var parts []string
		for _, m := range slices.Sorted(maps.Keys(models)) {
			parts = append(parts, fmt.Sprintf("%q on %s", m, strings.Join(models[m], ", ")))
		}
		return fmt.Errorf("servers serve different models: %s", strings.Join(parts, "; "))
	}
	model := c.opts.Model
	if model == "" {
		model = c.Model()
	}
	if model == "" {
		model = "default"
	}
	c.st = newSettings(c.opts.API, model, c.opts.Sampling)
	return nil
}

// startFirstCheck checks s once in the background and admits it when
// ready; otherwise it records why and probes it. Called with c.mu held.
func (c *Client) startFirstCheck(s *server) {
	c.probers.Add(1)
	go func() {
		defer c.probers.Done()
		in := c.check(c.ctx, s, true)
		if c.ctx.Err() != nil {
			return
		}
		if in.State == StateReady {
			c.mu.Lock()
			s.checked = true
			c.mu.Unlock()
			c.admit(s, "")
			return
		}
		c.mu.Lock()
		defer c.mu.Unlock()
		s.checked, s.reason, s.refused = true, in.Reason, in.AuthFailed
		if in.AuthFailed {
			c.warnf(WarnRefused, "server %s refused the credentials: %s; it gets no requests (probed every %v), the run goes on with the other servers",
				s.url, in.Reason, c.opts.ProbeInterval)
		} else {
			c.opts.Logf("server %s not ready: %s; probing every %v", s.url, in.Reason, c.opts.ProbeInterval)
		}
		c.startProber(s)
		c.broadcastLocked()
	}()
}

// waitFirst waits until a server is admitted (see Start), every server
// refused the credentials, ReadyTimeout passed with none admitted, or ctx
// ends.
func (c *Client) waitFirst(ctx context.Context) error {
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	var firstReady time.Time
	for {
		c.mu.Lock()
		wait, done, err := c.startStateLocked(&firstReady)
		if done {
			c.mu.Unlock()
			return err
		}
		ch := c.changed
		c.waiters++
		c.mu.Unlock()
		timer.Reset(wait)
		select {
		case <-ch:
		case <-timer.C:
		case <-ctx.Done():
		}
		c.mu.Lock()
		c.waiters--
		c.mu.Unlock()
		if ctx.Err() != nil {
			return context.Cause(ctx)
		}
	}
}

// startStateLocked tells waitFirst whether the start is over (done, with
// its outcome err) or how long to wait at most for a change. Once a
// server is admitted, the others get startGrace from then to be checked;
// *firstReady records when.
func (c *Client) startStateLocked(firstReady *time.Time) (wait time.Duration, done bool, err error) {
	now := time.Now()
	checked, refused, admitted := c.startCountsLocked()
	n := len(c.servers)
	switch {
	case c.ctx.Err() != nil:
		return 0, true, errors.New("sglang client closed")
	case admitted > 0:
		if firstReady.IsZero() {
			*firstReady = now
		}
		wait = startGrace - now.Sub(*firstReady)
		return wait, checked == n || wait <= 0, nil
	case n > 0 && checked == n && refused == n:
		return 0, true, c.authErrorLocked()
	}
	wait = time.Until(c.startAt.Add(c.opts.ReadyTimeout))
	if wait <= 0 {
		return 0, true, c.allDownErrorLocked()
	}
	return wait, false, nil
}

// startCountsLocked counts the servers checked at least once, those
// refusing the credentials (and not admitted) and those admitted.
func (c *Client) startCountsLocked() (checked, refused, admitted int) {
	for _, s := range c.servers {
		if s.checked {
			checked++
		}
		if s.admitted {
			admitted++
		} else if s.refused {
			refused++
		}
	}
	return checked, refused, admitted
}

// authErrorLocked is the error of a fleet whose every server refused the
// credentials.
func (c *Client) authErrorLocked() error {
	e := &AuthError{}
	for _, s := range c.servers {
		e.Servers = append(e.Servers, ServerInfo{URL: s.url, State: StateDown, Reason: s.reason, AuthFailed: true})
	}
	return e
}

// Kinds of the client's warnings (Options.Warn).
const (
	WarnRefused    = "server_refused"
	WarnNeverReady = "server_never_ready"
	WarnStalled    = "server_stalled"
)

// warnf is a warning of kind: Options.Warn, or the log without one.
func (c *Client) warnf(kind, format string, args ...any) {
	if c.opts.Warn != nil {
		c.opts.Warn(kind, fmt.Sprintf(format, args...))
		return
	}
	c.opts.Logf("warning: "+format, args...)
}

// Close stops the probes and closes idle connections. Sessions must have
// ended.
func (c *Client) Close() {
	c.mu.Lock()
	c.cancel()
	for _, s := range c.servers {
		if s.cancel != nil {
			s.cancel(errors.New("client closed"))
		}
	}
	c.mu.Unlock()
	c.probers.Wait()
	c.hc.CloseIdleConnections()
}

// Proxies names, per server reached through a proxy from the environment
// (HTTPS_PROXY, HTTP_PROXY; NO_PROXY exempts), that proxy without its
// userinfo. Servers reached directly are absent.
func (c *Client) Proxies() map[string]string {
	tr, ok := c.rt.(*http.Transport)
	if !ok || tr.Proxy == nil {
		return nil
	}
	out := map[string]string{}
	for _, s := range c.servers {
		req, err := http.NewRequest(http.MethodGet, s.url, nil)
		if err != nil {
			continue
		}
		if u, err := tr.Proxy(req); err == nil && u != nil {
			out[s.url] = Redact(u.String())
		}
	}
	return out
}

// Model is the model the servers reported ("" if none did).
func (c *Client) Model() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.model
}

// Settings is what every request sends besides its prompt: API, model and
// sampling settings, for recording with each completion. It is shared; do
// not modify it. Valid after Start.
func (c *Client) Settings() map[string]any { return c.st.record }

// ContextLength is the smallest context length the servers reported, 0 if
// none did.
func (c *Client) ContextLength() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, s := range c.servers {
		if s.info != nil && s.info.ContextLength > 0 && (n == 0 || s.info.ContextLength < n) {
			n = s.info.ContextLength
		}
	}
	return n
}

// admittedLocked counts admitted servers.
func (c *Client) admittedLocked() int {
	n := 0
	for _, s := range c.servers {
		if s.admitted {
			n++
		}
	}
	return n
}

// broadcastLocked wakes sessions waiting for a slot.
func (c *Client) broadcastLocked() {
	if c.waiters > 0 {
		close(c.changed)
		c.changed = make(chan struct{})
	}
}

// admit puts s into rotation.
func (c *Client) admit(s *server, how string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ctx.Err() != nil {
		return
	}
	s.admitted, s.reason, s.failures, s.refused, s.everAdmitted = true, "", 0, false, true
	s.ctx, s.cancel = context.WithCancelCause(context.Background())
	c.downFrom = time.Time{}
	s.startAdaptiveLocked()
	if s.maxLimit == 0 && s.info != nil && s.info.MaxRunningRequests > 0 && s.limit > s.info.MaxRunningRequests && !s.warnedLimit {
		// Not an error: the server queues the rest (its prefix cache may
		// still like them there), but the user's number is above what it
		// runs at once.
		s.warnedLimit = true
		c.opts.Logf("server %s runs at most %d requests at once (max_running_requests); the other %d of its concurrency %d wait in its queue",
			s.url, s.info.MaxRunningRequests, s.limit-s.info.MaxRunningRequests, s.limit)
	}
	if how != "" {
		c.opts.Logf("server %s %s", s.url, how)
	}
	c.broadcastLocked()
}

// ejectLocked takes s out of rotation, aborts its requests in flight (they
// are re-sent elsewhere) and starts probing it.
func (c *Client) ejectLocked(s *server, reason string) {
	if !s.admitted {
		return
	}
	s.admitted, s.reason = false, reason
	s.cancel(errEjected)
	s.stats.ejections.Add(1)
	c.opts.Logf("server %s ejected: %s; probing every %v", s.url, reason, c.opts.ProbeInterval)
	if c.admittedLocked() == 0 {
		c.downFrom = time.Now()
	}
	c.startProber(s)
	c.broadcastLocked()
}

// Quarantine ejects the server at url (its requests in flight are sent
// elsewhere) and keeps it out for d whatever its probes say: for what its
// answers show and its health does not (a quality breaker on a server pipe
// did not launch and cannot restart). It reports whether url is one of
// the client's servers.
func (c *Client) Quarantine(url, reason string, d time.Duration) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, s := range c.servers {
		if s.url == url {
			s.quarantined = time.Now().Add(d)
			c.ejectLocked(s, reason)
			return true
		}
	}
	return false
}

// startProber probes s until it is ready again, then admits it.
func (c *Client) startProber(s *server) {
	if s.probing {
		return
	}
	s.probing = true
	c.probers.Add(1)
	go func() {
		defer c.probers.Done()
		t := time.NewTimer(c.opts.ProbeInterval)
		defer t.Stop()
		for {
			select {
			case <-c.ctx.Done():
				return
			case <-t.C:
			case <-s.probeNow:
			}
			c.mu.Lock()
			if wait := time.Until(s.quarantined); wait > 0 {
				c.mu.Unlock()
				t.Reset(min(wait, c.opts.ProbeInterval))
				continue
			}
			c.mu.Unlock()
			in := c.check(c.ctx, s, true)
			c.mu.Lock()
			if in.State != StateReady {
				s.reason, s.refused = in.Reason, in.AuthFailed
				c.mu.Unlock()
				t.Reset(c.opts.ProbeInterval)
				continue
			}
			s.probing = false
			c.mu.Unlock()
			c.admit(s, "ready again: re-admitted")
			return
		}
	}()
}

// ProbeNow has the server at url probed now rather than at its prober's
// next tick: its launcher saw it answer a generation. A quarantined
// server still waits out its quarantine; for an admitted one the word is
// kept, and its next prober probes at once (one early probe at most). A
// URL not the client's is ignored.
func (c *Client) ProbeNow(url string) {
	for _, s := range c.servers {
		if s.url == url {
			select {
			case s.probeNow <- struct{}{}:
			default:
			}
		}
	}
}

// startNotifier calls Options.Notify every NotifyInterval while no server
// is admitted, until Close.
func (c *Client) startNotifier() {
	if c.opts.Notify == nil {
		return
	}
	c.probers.Add(1)
	go func() {
		defer c.probers.Done()
		t := time.NewTicker(c.opts.NotifyInterval)
		defer t.Stop()
		for {
			select {
			case <-c.ctx.Done():
				return
			case <-t.C:
			}
			if line, ok := c.Waiting(); ok {
				c.opts.Notify("%s", line)
			}
		}
	}()
}

// Waiting says, while no server is admitted (after Start began), for how
// long the client has been waiting and each server's state and reason, e.g.
// "no server ready for 15s (gives up after 10m0s): http://a:30000 down
// (/health: no answer within 10s); http://b:30000 checking". ok is false
// while a server is admitted.
func (c *Client) Waiting() (line string, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.startAt.IsZero() || c.admittedLocked() > 0 || c.ctx.Err() != nil {
		return "", false
	}
	since := c.downFrom
	if since.IsZero() {
		since = c.startAt
	}
	var b strings.Builder
	fmt.Fprintf(&b, "no server ready for %v (gives up after %v):", time.Since(since).Round(time.Second), c.opts.ReadyTimeout)
	for i, s := range c.servers {
		if i > 0 {
			b.WriteString(";")
		}
		if s.reason == notChecked {
			fmt.Fprintf(&b, " %s checking", s.url)
			continue
		}
		fmt.Fprintf(&b, " %s down (%s)", s.url, s.reason)
	}
	return b.String(), true
}

// notChecked is the reason of a server whose first check has not ended.
const notChecked = "not checked yet"

// acquire takes a slot on the admitted server with the lowest load
// (in-flight / concurrency) that has one free, preferring any server but
// avoid. It waits while none is free; with no server admitted for
// ReadyTimeout it fails. A hedge (the second attempt of a stalled request)
// never takes avoid, and goes before the sessions waiting for a first slot:
// the stalled request has waited longest.
func (c *Client) acquire(ctx context.Context, avoid *server) (*server, error) {
	return c.acquireSlot(ctx, avoid, false)
}

func (c *Client) acquireSlot(ctx context.Context, avoid *server, hedge bool) (*server, error) {
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	if hedge {
		defer c.waitAsHedge(avoid)()
	}
	for {
		if c.stopping() {
			return nil, ErrNotSent
		}
		c.mu.Lock()
		if s := c.takeLocked(avoid, hedge); s != nil {
			c.mu.Unlock()
			return s, nil
		}
		if c.ctx.Err() != nil {
			c.mu.Unlock()
			return nil, errors.New("sglang client closed")
		}
		deadline, err := c.downDeadlineLocked(&timer)
		if err != nil {
			c.mu.Unlock()
			return nil, err
		}
		ch := c.changed
		c.waiters++
		c.mu.Unlock()
		select {
		case <-ch:
		case <-deadline:
		case <-ctx.Done():
		case <-c.opts.Stop:
		}
		c.mu.Lock()
		c.waiters--
		c.mu.Unlock()
		if ctx.Err() != nil {
			return nil, context.Cause(ctx)
		}
	}
}

// waitAsHedge counts a hedge waiting for a slot on a server other than
// avoid, so the sessions leave it the free slots it could take; the
// returned func ends the wait.
func (c *Client) waitAsHedge(avoid *server) (done func()) {
	c.mu.Lock()
	c.hedgeWaiters++
	c.hedgeAvoid[avoid]++
	c.mu.Unlock()
	return func() {
		c.mu.Lock()
		c.hedgeWaiters--
		c.hedgeAvoid[avoid]--
		c.broadcastLocked()
		c.mu.Unlock()
	}
}

// takeLocked takes a slot on the server pickLocked chooses, or returns
// nil. A slot a waiting hedge could take is left to it (a hedge never
// takes the server it avoids, so that one stays open to all).
func (c *Client) takeLocked(avoid *server, hedge bool) *server {
	s := c.pickLocked(avoid, hedge)
	if s == nil || !hedge && c.hedgeWaiters-c.hedgeAvoid[s] != 0 {
		return nil
	}
	s.outstanding++
	return s
}

// downDeadlineLocked is the channel that fires when the fleet has had no
// server admitted for ReadyTimeout (nil while one is), set on *timer; the
// error once that time has passed.
func (c *Client) downDeadlineLocked(timer **time.Timer) (<-chan time.Time, error) {
	if c.downFrom.IsZero() {
		return nil, nil
	}
	wait := time.Until(c.downFrom.Add(c.opts.ReadyTimeout))
	if wait <= 0 {
		return nil, c.allDownErrorLocked()
	}
	if *timer == nil {
		*timer = time.NewTimer(wait)
	} else {
		(*timer).Reset(wait)
	}
	return (*timer).C, nil
}

// pickLocked returns the least-loaded admitted server (loadLocked) with a
// free slot that is not suspect; avoid only when no other has one, and
// never when strict.
func (c *Client) pickLocked(avoid *server, strict bool) *server {
	var best, fallback *server
	n := len(c.servers)
	for k := 0; k < n; k++ {
		s := c.servers[(c.next+k)%n]
		if !s.admitted || s.suspect || s.outstanding >= s.limit {
			continue
		}
		if s == avoid {
			if !strict {
				fallback = s
			}
			continue
		}
		if best == nil || c.loadLocked(s) < c.loadLocked(best) {
			best = s
		}
	}
	c.next++
	if best == nil {
		return fallback
	}
	return best
}

// release frees s's slot.
func (c *Client) release(s *server) {
	c.mu.Lock()
	s.outstanding--
	c.broadcastLocked()
	c.mu.Unlock()
}

// AllDownError is returned when no server was admitted for ReadyTimeout.
type AllDownError struct {
	Wait    time.Duration
	Servers []ServerInfo
}

func (e *AllDownError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "no server ready for %v:", e.Wait)
	for _, s := range e.Servers {
		fmt.Fprintf(&b, " %s: %s;", s.URL, s.Reason)
	}
	return strings.TrimSuffix(b.String(), ";")
}

func (c *Client) allDownErrorLocked() error {
	e := &AllDownError{Wait: c.opts.ReadyTimeout}
	for _, s := range c.servers {
		e.Servers = append(e.Servers, ServerInfo{URL: s.url, State: StateDown, Reason: s.reason})
	}
	return e
}

// Session is one record's use of the fleet: its turns go to one server (the
// prefix cache then serves the conversation so far), and it holds that
// server's slot until Close. A failed attempt moves it to another server.
type Session struct {
	c *Client
	s *server
}

// Session starts a session; it takes no slot until the first Generate.
func (c *Client) Session() *Session { return &Session{c: c} }

// Close releases the session's slot.
func (ss *Session) Close() {
	if ss.s != nil {
		ss.c.release(ss.s)
		ss.s = nil
	}
}

// ExhaustedError is returned when every attempt failed.
type ExhaustedError struct {
	Attempts int
	Last     *Error
}

func (e *ExhaustedError) Error() string {
	return fmt.Sprintf("gave up after %d attempts; last: %v", e.Attempts, e.Last)
}

func (e *ExhaustedError) Unwrap() error { return e.Last }

// Generate sends req, retrying retryable failures with jittered exponential
// backoff, each attempt with a fresh rid and preferably on another server.
// A server fault (a 4xx such as 401, 403, 404 that is not about the request)
// ejects that server and the request is re-sent elsewhere as a new attempt.
// A request cut short because its server was ejected is re-sent elsewhere at
// once and does not count against MaxAttempts (up to MaxAttempts times).
// It returns a *Error that is BadRequest when the server refused the
// request or it could not be sent (ClassInvalidRequest: tools that are
// not a JSON array, tool-call arguments that are not JSON), an
// *ExhaustedError after MaxAttempts, an *AllDownError when no
// server was admitted for ReadyTimeout, or ctx's cause.
func (ss *Session) Generate(ctx context.Context, req *Request) (*Result, error) {
	c := ss.c
	if err := c.st.checkRequest(req); err != nil {
		return nil, &Error{Class: ClassInvalidRequest, Message: err.Error()}
	}
	var avoid *server
	var fails failures
	for sent := 1; ; sent++ {
		ss.dropEjected()
		if sent > 1 && c.stopping() {
			return nil, ErrNotSent // a retry is a request not yet sent
		}
		if err := ss.ensureServer(ctx, avoid); err != nil {
			return nil, err
		}
		s := ss.s
		// A stalled attempt is sent once more elsewhere (a counted
		// attempt) while the budget allows; the first answer wins.
		res, won, err, hedged := c.race(ctx, s, req, sent < c.opts.MaxAttempts)
		if hedged {
			sent++
		}
		if ctx.Err() != nil {
			return nil, context.Cause(ctx)
		}
		if err == nil {
			ss.s = won
			res.Attempts = sent
			c.succeeded(won, res)
			return res, nil
		}
		// A server fault (401, 403, 404 …) ejected s; the request is
		// re-sent elsewhere as a counted attempt.
		if !err.Retryable() && !err.ServerFault() {
			return nil, err
		}
		ss.Close()
		avoid = s
		if err := c.beforeRetry(ctx, &fails, err, sent); err != nil {
			return nil, err
		}
	}
}

// dropEjected lets go of the session's server if it was ejected, as it
// may have been between turns.
func (ss *Session) dropEjected() {
	if ss.s == nil {
		return
	}
	ss.c.mu.Lock()
	gone := !ss.s.admitted
	ss.c.mu.Unlock()
	if gone {
		ss.Close()
	}
}

// ensureServer gives the session a slot, preferably not on avoid, if it
// holds none.
func (ss *Session) ensureServer(ctx context.Context, avoid *server) error {
	if ss.s != nil {
		return nil
	}
	s, err := ss.c.acquire(ctx, avoid)
	if err != nil {
		return err
	}
	ss.s = s
	return nil
}

// failures counts a request's failed attempts: counted ones, and re-sends
// after an ejection, which do not count (up to MaxAttempts of them).
type failures struct{ counted, ejected int }

// beforeRetry counts the retryable failure err after sent attempts and
// waits the backoff before the next; an ejection is re-sent at once. The
// error is the end of the request: an *ExhaustedError at MaxAttempts
// counted failures, or what ended the wait.
func (c *Client) beforeRetry(ctx context.Context, f *failures, err *Error, sent int) error {
	if err.Class == ClassEjected && f.ejected < c.opts.MaxAttempts {
		f.ejected++
		return nil
	}
	f.counted++
	if f.counted >= c.opts.MaxAttempts {
		return &ExhaustedError{Attempts: sent, Last: err}
	}
	return c.sleepBackoff(ctx, c.backoff(f.counted))
}

// backoff is the wait after the n-th failed attempt: exponential from
// BackoffMin, capped at BackoffMax, with "equal jitter" (half fixed, half
// random) so retries of a burst do not arrive together.
func (c *Client) backoff(n int) time.Duration {
	d := c.opts.BackoffMin << min(n-1, 30)
	if d <= 0 || d > c.opts.BackoffMax {
		d = c.opts.BackoffMax
	}
	return d/2 + rand.N(d/2+1)
}

// sleepBackoff waits d before a retry, or until ctx ends, or until the
// sending stops (then the retry is not sent: ErrNotSent).
func (c *Client) sleepBackoff(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	case <-c.opts.Stop:
		return ErrNotSent
	}
}

// attempt sends one request to s. sctx is s's admission context: its
// cancellation (ejection) aborts the request.
func (c *Client) attempt(ctx context.Context, s *server, sctx context.Context, req *Request) (*Result, *Error) {
	if s.bad != nil {
		return nil, &Error{Class: ClassTransport, Message: s.bad.Error(), Server: s.url}
	}
	reqBuf := c.reqBufs.Get().(*[]byte)
	defer c.putBuf(&c.reqBufs, reqBuf)
	// The answer's buffer is taken only once its headers are in (postJSON),
	// so the requests waiting minutes on a server hold none.
	var respBuf []byte
	defer func() { c.putBuf(&c.bufs, &respBuf) }()
	rid := c.ridPrefix + strconv.FormatUint(c.ridSeq.Add(1), 10)
	*reqBuf = c.st.appendBody((*reqBuf)[:0], req, rid)
	defer c.inFlight(s, req)()
	start := time.Now()
	status, held, err := c.postJSON(ctx, sctx, s, c.st.path(), *reqBuf, c.opts.RequestTimeout, &respBuf)
	defer c.budget.give(held)
	if err != nil {
		return nil, transportError(s.url, err, sctx)
	}
	respBody := respBuf
	if status != http.StatusOK {
		return nil, statusError(s.url, status, respBody)
	}
	res := &Result{Server: s.url, Latency: time.Since(start)}
	if err := parseResult(c.opts.API, respBody, c.opts.thinkMode(), res); err != nil {
		return nil, &Error{Class: ClassBadResponse, Message: err.Error(), Server: s.url}
	}
	// A figure that was NaN, Inf or out of range was read as absent (0);
	// the server's errors name it, and the record stands.
	for _, name := range res.dropped {
		s.stats.failed("dropped_" + name)
	}
	if res.FinishReason == "abort" {
		if promptTooLong(res.AbortMessage) {
			return nil, &Error{Class: ClassRejectedAbort, Message: res.AbortMessage, Server: s.url}
		}
		return nil, &Error{Class: ClassAbort, Message: "finish_reason abort: " + res.AbortMessage, Server: s.url}
	}
	return res, nil
}

// putBuf keeps a buffer for reuse in pool unless an unusually large
// answer grew it (or none was taken).
func (c *Client) putBuf(pool *sync.Pool, b *[]byte) {
	if n := cap(*b); n > 0 && n <= 4<<20 {
		pool.Put(b)
	}
}

// succeeded records a completion.
func (c *Client) succeeded(s *server, r *Result) {
	c.mu.Lock()
	s.failures = 0
	if r.LoadReported {
		s.waiting = r.WaitingReqs
	}
	c.adaptLocked(s, r)
	c.mu.Unlock()
	s.stats.completed(r)
}

// failed records a failed attempt; a server fault (a 4xx that is not about
// the request) ejects s at once, consecutive retryable failures (timeouts
// included) after BreakerFailures.
func (c *Client) failed(s *server, e *Error) {
	s.stats.failed(e.Class)
	if e.ServerFault() {
		c.mu.Lock()
		defer c.mu.Unlock()
		if s.admitted && s.ctx != nil {
			c.ejectLocked(s, fmt.Sprintf("HTTP %d: %s", e.Status, e.Message))
		}
		return
	}
	if !e.Retryable() || e.Class == ClassEjected {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if e.Status == http.StatusServiceUnavailable {
		c.backOffLocked(s)
	}
	s.failures++
	if s.failures >= c.opts.BreakerFailures && s.admitted {
		c.ejectLocked(s, fmt.Sprintf("%d consecutive failures, last: %s", s.failures, e.Message))
	}
}

func (o Options) thinkMode() ThinkMode {
	switch {
	case !o.Thinking:
		return ThinkOff
	case o.ThinkingForced:
		return ThinkForced
	}
	return ThinkOn
}

// startWatcher looks at the fleet every second (more often with short
// settings) until Close: it warns about servers never ready while others
// work.
func (c *Client) startWatcher() {
	every := min(time.Second, c.opts.NeverReadyWarn/2)
	c.probers.Add(1)
	go func() {
		defer c.probers.Done()
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-c.ctx.Done():
				return
			case <-t.C:
			}
			c.watch(time.Now())
			c.updateStallAfter()
		}
	}()
}

// watch is one look of the watcher.
func (c *Client) watch(now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.admittedLocked() == 0 || now.Sub(c.startAt) < c.opts.NeverReadyWarn {
		// With none admitted, Notify's waiting line says it all.
		return
	}
	for _, s := range c.servers {
		if s.everAdmitted || s.neverReadyWarned {
			continue
		}
		s.neverReadyWarned = true
		reason := s.reason
		if reason == notChecked {
			reason = "its first check has not answered yet"
		}
		c.warnf(WarnNeverReady, "server %s has not been ready in the %v since the start while the others work: %s; its %d request slots are missing from the fleet (probed every %v)",
			s.url, now.Sub(c.startAt).Round(time.Second), reason, s.limit, c.opts.ProbeInterval)
	}
}
