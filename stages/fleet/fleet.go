// Package fleet launches the servers of a generation stage and keeps them
// alive: each in a guard of its own (guard.go), its output in a bounded log
// in the run directory, ready only once a one-token generation answers,
// restarted with backoff after any exit it was not asked for, a hang (its
// probes unanswered) or a log line that means it is broken, and ended —
// every process it started — when the run ends, is stopped, or pipe dies.
package fleet

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"github.com/pipe-dev/pipe/internal/termsafe"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Config is a launched fleet.
type Config struct {
	// Name prefixes each server's name and log file ("gen" → gen-0.log).
	Name string
	// Command is run by /bin/sh for each server, after {port}, {gpus},
	// {index} and {host} are replaced by the server's.
	Command string
	Count   int
	// GPUs are the devices handed out, GPUsPerServer to each server in
	// order (CUDA_VISIBLE_DEVICES and {gpus}); none: no variable set.
	GPUs          []string
	GPUsPerServer int
	Host          string
	Port          int // the first server's; the others count up
	Env           map[string]string
	Dir           string
	LogDir        string
	// LogBytes bounds a log file; at it, the file moves to NAME.log.1
	// (replacing the one before) and a new one starts.
	LogBytes int64
	// ReadyTimeout is how long a start may take to answer a generation;
	// ProbeEvery how often a ready server is asked for one token, each
	// probe waiting ProbeTimeout; HangProbes failed in a row is a hang.
	ReadyTimeout, ProbeEvery, ProbeTimeout time.Duration
	HangProbes                             int
	// Restarts is how many times a server is started again before it is
	// given up; Backoff the first wait before a restart (doubled each
	// time, at most 5 minutes); StopGrace the time between SIGTERM and
	// SIGKILL.
	Restarts           int
	Backoff, StopGrace time.Duration
	// Header is sent with each probe (an API key).
	Header http.Header `json:"-"`
	// Event is told of every start, readiness, crash, hang, restart and
	// give-up, as a line for the terminal and the log.
	Event func(kind, server, text string) `json:"-"`
	// Ready, when set, is called with a server's URL each time a start of
	// it answers its first generation: a client waiting on its own probe
	// timer can take it at once.
	Ready func(url string) `json:"-"`
}

// FatalLines are log lines after which a server is broken whatever it
// answers: it is ended and started again.
var FatalLines = []string{
	"CUDA out of memory",
	"torch.OutOfMemoryError",
	"Detected errors during sampling",
	"NCCL timeout",
	"Watchdog caught collective operation timeout",
	"CUDA error: an illegal memory access",
}

// State of a server.
const (
	StateStarting = "starting"
	StateReady    = "ready"
	StateBackoff  = "restarting"
	StateGivenUp  = "given up"
	StateStopped  = "stopped"
)

// Event is one thing that happened to a launched server.
type Event struct {
	Seq    int       `json:"seq"` // 1, 2, … over the fleet's life
	T      time.Time `json:"t"`
	Server string    `json:"server"`
	Start  int       `json:"start"` // which start of the server (1: the first)
	Kind   string    `json:"kind"`  // EventStarted, EventReady, …
	Text   string    `json:"text"`
	// Tail is the server's last lines of output, for an end not asked for.
	Tail []string `json:"tail,omitempty"`
}

// Kinds of Event.
const (
	EventStarted    = "started"
	EventReady      = "ready"
	EventCrash      = "crash"
	EventHang       = "hang"
	EventFatal      = "fatal_line"
	EventNeverReady = "never_ready"
	EventRestarting = "restarting"
	EventGivenUp    = "given_up"
	EventNoStart    = "could_not_start"
	EventBreaker    = "breaker"
)

// maxEvents bounds the events a fleet keeps (the oldest go first).
const maxEvents = 512

// Stats are a server's events since the run began.
type Stats struct {
	Name, URL, State string
	Starts           int // processes started
	Crashes          int // exits nobody asked for, whatever the code
	Hangs            int // killed after HangProbes unanswered probes
	Fatal            int // killed after a FatalLines line
	NeverReady       int // killed after ReadyTimeout without a generation
	Breaker          int // ended by Restart (its answers' quality)
	LastExit         string
	ReadyAfter       time.Duration // the last start's time to its first generation
}

// Fleet is the launched servers.
type Fleet struct {
	cfg     Config
	servers []*server
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	exe     string

	evMu   sync.Mutex
	events []Event
	seq    int
}

// Events are the fleet's events so far (at most the last maxEvents).
func (f *Fleet) Events() []Event {
	f.evMu.Lock()
	defer f.evMu.Unlock()
	return append([]Event(nil), f.events...)
}

type server struct {
	f     *Fleet
	index int
	name  string
	url   string
	port  int
	gpus  []string

	// kick asks the running start to end and the server to start again
	// (a breaker on its answers' quality).
	kick chan string

	mu    sync.Mutex
	stats Stats
	proc  *exec.Cmd
	stdin io.WriteCloser
	tail  []string // the last lines of its output
}

// Start launches every server and supervises them until Close; it returns
// at once (URLs are known before any is ready: WaitReady waits).
func Start(ctx context.Context, cfg Config) (*Fleet, error) {
	if cfg.Count < 1 {
		return nil, fmt.Errorf("launch: count must be at least 1")
	}
	if need := cfg.Count * cfg.GPUsPerServer; len(cfg.GPUs) > 0 && need > len(cfg.GPUs) {
		return nil, fmt.Errorf("launch: %d servers × %d GPUs need %d GPUs, %d given (%s)", cfg.Count, cfg.GPUsPerServer, need, len(cfg.GPUs), strings.Join(cfg.GPUs, ","))
	}
	if cfg.Host == "" {
		cfg.Host = "127.0.0.1"
	}
	defaults(&cfg)
	// /proc/self/exe runs this very binary even after an upgrade replaced
	// or removed its file during a two-day run; os.Executable's path may
	// then be gone.
	exe := "/proc/self/exe"
	if _, err := os.Stat(exe); err != nil {
		if exe, err = os.Executable(); err != nil {
			return nil, fmt.Errorf("launch: finding pipe's own binary for the server guards: %w", err)
		}
	}
	if err := os.MkdirAll(cfg.LogDir, 0o755); err != nil {
		return nil, fmt.Errorf("launch: %w", err)
	}
	ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	f := &Fleet{cfg: cfg, cancel: cancel, exe: exe}
	for i := range cfg.Count {
		s := &server{f: f, index: i, name: fmt.Sprintf("%s-%d", cfg.Name, i), port: cfg.Port + i, kick: make(chan string, 1)}
		s.url = "http://" + net.JoinHostPort(cfg.Host, strconv.Itoa(s.port))
		if len(cfg.GPUs) > 0 {
			s.gpus = cfg.GPUs[i*cfg.GPUsPerServer : (i+1)*cfg.GPUsPerServer]
		}
		s.stats = Stats{Name: s.name, URL: s.url, State: StateStarting}
		f.servers = append(f.servers, s)
	}
	for _, s := range f.servers {
		f.wg.Add(1)
		go func() {
			defer f.wg.Done()
			s.supervise(ctx)
		}()
	}
	return f, nil
}

func defaults(c *Config) {
	set := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	set(&c.ReadyTimeout, 30*time.Minute)
	set(&c.ProbeEvery, 30*time.Second)
	set(&c.ProbeTimeout, time.Minute)
	set(&c.Backoff, 10*time.Second)
	set(&c.StopGrace, 30*time.Second)
	if c.HangProbes <= 0 {
		c.HangProbes = 3
	}
	if c.LogBytes <= 0 {
		c.LogBytes = 64 << 20
	}
	if c.GPUsPerServer <= 0 {
		c.GPUsPerServer = 1
	}
}

// URLs are the servers' base URLs, in order.
func (f *Fleet) URLs() []string {
	var out []string
	for _, s := range f.servers {
		out = append(out, s.url)
	}
	return out
}

// Server is the index of the server at url, -1 when it is not one of
// the fleet's.
func (f *Fleet) Server(url string) int {
	for i, s := range f.servers {
		if s.url == url {
			return i
		}
	}
	return -1
}

// Start is which start of server i is running (1: its first process).
func (f *Fleet) Start(i int) int {
	s := f.servers[i]
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stats.Starts
}

// Name is server i's name ("gen-0").
func (f *Fleet) Name(i int) string { return f.servers[i].name }

// Restart ends server i's running start and starts it again, why being
// the event's text: for what its answers show and its process does not
// (a quality breaker). A restart already asked for is not asked twice.
func (f *Fleet) Restart(i int, why string) {
	select {
	case f.servers[i].kick <- why:
	default:
	}
}

// Stats are every server's.
func (f *Fleet) Stats() []Stats {
	var out []Stats
	for _, s := range f.servers {
		s.mu.Lock()
		out = append(out, s.stats)
		s.mu.Unlock()
	}
	return out
}

// Close ends every server (SIGTERM, the grace, SIGKILL, each guard ending
// all its server's processes) and waits for them.
func (f *Fleet) Close() error {
	f.cancel()
	f.wg.Wait()
	return nil
}

func (s *server) event(kind string, tail []string, format string, args ...any) {
	text := fmt.Sprintf(format, args...)
	s.mu.Lock()
	start := s.stats.Starts
	s.mu.Unlock()
	f := s.f
	f.evMu.Lock()
	f.seq++
	f.events = append(f.events, Event{Seq: f.seq, T: time.Now().UTC(), Server: s.name, Start: start, Kind: kind, Text: text, Tail: tail})
	if len(f.events) > maxEvents {
		f.events = f.events[len(f.events)-maxEvents:]
	}
	f.evMu.Unlock()
	if f.cfg.Event != nil {
		if len(tail) > 0 {
			text += "; its last lines:\n    " + strings.Join(tail, "\n    ")
		}
		f.cfg.Event(kind, s.name, text)
	}
}

func (s *server) setState(st string) {
	s.mu.Lock()
	s.stats.State = st
	s.mu.Unlock()
}

// supervise runs the server until ctx ends: start, wait for a generation,
// watch, and after each end not asked for, start again.
func (s *server) supervise(ctx context.Context) {
	cfg := &s.f.cfg
	backoff := cfg.Backoff
	// same counts the starts in a row that ended the same way before any
	// generation: a command that cannot work (a typo, a missing model)
	// is given up after sameEnds of them, not after every restart.
	same, lastEnd := 0, ""
	for restarts := 0; ; restarts++ {
		if restarts > 0 {
			if restarts > cfg.Restarts || same >= sameEnds {
				why := fmt.Sprintf("given up after %d restarts in a row (restarts = %d)", restarts-1, cfg.Restarts)
				if same >= sameEnds {
					why = fmt.Sprintf("given up: its last %d starts ended the same way before any generation answered", same)
				}
				s.setState(StateGivenUp)
				s.event(EventGivenUp, nil, "%s; the run goes on without it. Its log: %s", why, s.logPath())
				return
			}
			s.setState(StateBackoff)
			s.event(EventRestarting, nil, "restarting in %s (restart %d of at most %d in a row)", backoff.Round(100*time.Millisecond), restarts, cfg.Restarts)
			if !sleep(ctx, backoff) {
				s.setState(StateStopped)
				return
			}
			backoff = min(2*backoff, 5*time.Minute)
		}
		if ctx.Err() != nil {
			s.setState(StateStopped)
			return
		}
		kind, why, served := s.run(ctx)
		if ctx.Err() != nil {
			s.setState(StateStopped)
			return
		}
		s.mu.Lock()
		tail := append([]string(nil), s.tail...)
		s.mu.Unlock()
		s.event(kind, tail, "%s", why)
		end := kind + "\x00" + why
		if len(tail) > 0 {
			end += "\x00" + tail[len(tail)-1]
		}
		switch {
		case served >= longService:
			// An hour of service: what follows is a new crash, not a
			// crash loop; the count and the backoff start again.
			restarts, backoff, same = 0, cfg.Backoff, 0
		case served == 0 && end == lastEnd:
			same++
		case served == 0:
			same = 1
		default:
			same = 0
		}
		lastEnd = end
	}
}

// sameEnds is how many starts in a row that end the same way before any
// generation give a server up; longService is the time in service after
// which a crash counts as a first one again.
const (
	sameEnds    = 3
	longService = time.Hour
	// exitSeen is how long a process that stopped answering is given to
	// be seen exiting before it is judged hung.
	exitSeen = 2 * time.Second
)

// run starts the server once and returns when it ended on its own or was
// ended: kind is the Event's, why says which, served how long it had
// answered generations (0: never).
func (s *server) run(ctx context.Context) (kind, why string, served time.Duration) {
	cfg := &s.f.cfg
	started := time.Now()
	select { // a breaker's ask from the start before is spent
	case <-s.kick:
	default:
	}
	if kind, why, free := s.portFree(ctx); !free {
		return kind, why, 0
	}
	cmd, exited, fatal, err := s.launch()
	if err != nil {
		return EventNoStart, fmt.Sprintf("could not start: %v", err), 0
	}
	s.event(EventStarted, nil, "started (pid %d, port %d%s): %s", cmd.Process.Pid, s.port, s.gpuText(), s.command())
	p := &process{s: s, cmd: cmd, exited: exited, started: started}
	readyBy := time.NewTimer(cfg.ReadyTimeout)
	defer readyBy.Stop()
	p.probe = time.NewTicker(min(time.Second, cfg.ProbeEvery))
	defer p.probe.Stop()
	probing := false
	answers := make(chan probeAnswer, 1)
	for {
		select {
		case <-ctx.Done():
			s.stop(cmd, exited)
			return "", "stopped", p.served()
		case err := <-exited:
			return p.crashed(err)
		case why := <-s.kick:
			return p.end(EventBreaker, func(st *Stats) { st.Breaker++ }, why+": ended")
		case line := <-fatal:
			return p.end(EventFatal, func(st *Stats) { st.Fatal++ }, fmt.Sprintf("printed %q: broken whatever it answers, ended", line))
		case <-readyBy.C:
			if !p.ready {
				return p.end(EventNeverReady, func(st *Stats) { st.NeverReady++ }, fmt.Sprintf("no generation answered within %s (ready_timeout) of its start: ended", cfg.ReadyTimeout))
			}
		case <-p.probe.C:
			if !probing {
				probing = true
				go func() {
					ok, err := s.probe(ctx)
					answers <- probeAnswer{ok, err}
				}()
			}
		case a := <-answers:
			probing = false
			if kind, why, served, over := p.probed(a); over {
				return kind, why, served
			}
		}
	}
}

// portFree waits for the server's port to be free; when it is not, kind
// and why are run's outcome. Something else listening on the port would
// answer the probes in the server's stead: pipe would judge and use a
// process it did not start (a server left by another job, a previous
// start not yet gone).
func (s *server) portFree(ctx context.Context) (kind, why string, free bool) {
	switch {
	case s.waitPortFree(ctx):
		return "", "", true
	case ctx.Err() != nil:
		return "", "stopped", false
	}
	return EventNoStart, fmt.Sprintf("could not start: port %d is in use by another process (for %s); pipe does not send requests to a server it did not start", s.port, portWait), false
}

// probeAnswer is the outcome of one probe: ok, or why not.
type probeAnswer struct {
	ok  bool
	err error
}

// process is one start of a server as run watches it: ready once a
// probe answered, failed the probes unanswered in a row since.
type process struct {
	s       *server
	cmd     *exec.Cmd
	exited  <-chan error
	probe   *time.Ticker
	started time.Time
	readyAt time.Time
	ready   bool
	failed  int
}

// served is how long the process has answered generations (0: not yet).
func (p *process) served() time.Duration {
	if !p.ready {
		return 0
	}
	return time.Since(p.readyAt)
}

// crashed is run's outcome when the process exited with err unasked.
func (p *process) crashed(err error) (kind, why string, served time.Duration) {
	p.s.mu.Lock()
	p.s.stats.Crashes++
	p.s.stats.LastExit = exitText(err)
	p.s.mu.Unlock()
	return EventCrash, fmt.Sprintf("exited (%s) though nobody asked it to: a crash", exitText(err)), p.served()
}

// end counts the reason the process is ended in the server's stats, ends
// it, and is run's outcome.
func (p *process) end(kind string, count func(*Stats), why string) (string, string, time.Duration) {
	p.s.mu.Lock()
	count(&p.s.stats)
	p.s.mu.Unlock()
	p.s.stop(p.cmd, p.exited)
	return kind, why, p.served()
}

// probed takes a probe's answer: the first answered makes the process
// ready (and probes slow to ProbeEvery); HangProbes unanswered in a row
// after that end it (over) as hung.
func (p *process) probed(a probeAnswer) (kind, why string, served time.Duration, over bool) {
	cfg := &p.s.f.cfg
	switch {
	case a.ok && !p.ready:
		p.becameReady()
	case a.ok:
		p.failed = 0
	case p.ready:
		p.failed++
		if p.failed >= cfg.HangProbes {
			kind, why, served = p.hung(a.err)
			return kind, why, served, true
		}
	}
	return "", "", 0, false
}

// becameReady records the process's first answered generation.
func (p *process) becameReady() {
	s := p.s
	p.ready, p.failed, p.readyAt = true, 0, time.Now()
	p.probe.Reset(s.f.cfg.ProbeEvery)
	s.mu.Lock()
	s.stats.State = StateReady
	s.stats.ReadyAfter = time.Since(p.started)
	s.mu.Unlock()
	s.event(EventReady, nil, "ready: a one-token generation answered %s after its start", time.Since(p.started).Round(100*time.Millisecond))
	if s.f.cfg.Ready != nil {
		s.f.cfg.Ready(s.url)
	}
}

// hung ends a process whose probes went unanswered (the last with
// lastErr), unless it is seen exiting within exitSeen: a server on its way
// out refuses connections before its exit is seen, and that is a crash,
// not a hang.
func (p *process) hung(lastErr error) (kind, why string, served time.Duration) {
	cfg := &p.s.f.cfg
	select {
	case err := <-p.exited:
		return p.crashed(err)
	case <-time.After(exitSeen):
	}
	return p.end(EventHang, func(st *Stats) { st.Hangs++ },
		fmt.Sprintf("hung: %d one-token generations in a row went unanswered within %s (last: %v); ended", p.failed, cfg.ProbeTimeout, lastErr))
}

// launch starts the server's guard with the server's environment, its
// output to the log and scanned for fatal lines.
func (s *server) launch() (*exec.Cmd, <-chan error, <-chan string, error) {
	cfg := &s.f.cfg
	cmd := exec.Command(s.f.exe)
	cmd.Dir = cfg.Dir
	cmd.Env = append(os.Environ(), guardEnv+"="+s.command(), guardGraceEnv+"="+cfg.StopGrace.String())
	if len(s.gpus) > 0 {
		cmd.Env = append(cmd.Env, "CUDA_VISIBLE_DEVICES="+strings.Join(s.gpus, ","))
	}
	for k, v := range cfg.Env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	// Its own session: a Ctrl-C on pipe's terminal is pipe's to handle,
	// not sent to every server at once.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, nil, nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, nil, nil, err
	}
	cmd.Stderr = cmd.Stdout
	log, err := openLog(s.logPath(), cfg.LogBytes)
	if err != nil {
		return nil, nil, nil, err
	}
	if err := cmd.Start(); err != nil {
		log.Close()
		return nil, nil, nil, err
	}
	s.mu.Lock()
	s.proc, s.stdin, s.tail = cmd, stdin, nil
	s.stats.Starts++
	s.stats.State = StateStarting
	s.mu.Unlock()
	fatal := make(chan string, 1)
	copied := make(chan struct{})
	go func() {
		defer close(copied)
		defer log.Close()
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			log.WriteLine(line)
			s.keep(line)
			for _, f := range FatalLines {
				if strings.Contains(line, f) {
					select {
					case fatal <- boundLine(line):
					default:
					}
				}
			}
		}
		io.Copy(io.Discard, out)
	}()
	exited := make(chan error, 1)
	go func() {
		<-copied
		exited <- cmd.Wait()
	}()
	return cmd, exited, fatal, nil
}

// stop ends the running server: SIGTERM to its guard, which ends every
// process with the grace; the guard itself is killed past twice that.
func (s *server) stop(cmd *exec.Cmd, exited <-chan error) {
	cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-exited:
	case <-time.After(2*s.f.cfg.StopGrace + 5*time.Second):
		cmd.Process.Kill()
		<-exited
	}
	s.mu.Lock()
	s.stdin.Close()
	s.mu.Unlock()
}

// probe asks for one token; ok when a generation answers.
func (s *server) probe(ctx context.Context) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, s.f.cfg.ProbeTimeout)
	defer cancel()
	body := []byte(`{"text": "Hello", "sampling_params": {"max_new_tokens": 1, "temperature": 0}}`)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.url+"/generate", bytes.NewReader(body))
	if err != nil {
		return false, err
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range s.f.cfg.Header {
		req.Header[k] = v
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false, err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode != http.StatusOK {
		return false, fmt.Errorf("HTTP %d", resp.StatusCode)
	}
	var ans struct {
		Text     *string `json:"text"`
		MetaInfo struct {
			CompletionTokens int `json:"completion_tokens"`
		} `json:"meta_info"`
	}
	if err := json.Unmarshal(b, &ans); err != nil || ans.Text == nil {
		return false, fmt.Errorf("the answer is not a generation")
	}
	return true, nil
}

func (s *server) command() string {
	r := strings.NewReplacer("{port}", strconv.Itoa(s.port), "{gpus}", strings.Join(s.gpus, ","),
		"{index}", strconv.Itoa(s.index), "{host}", s.f.cfg.Host)
	return r.Replace(s.f.cfg.Command)
}

func (s *server) gpuText() string {
	if len(s.gpus) == 0 {
		return ""
	}
	return ", GPUs " + strings.Join(s.gpus, ",")
}

func (s *server) logPath() string {
	return filepath.Join(s.f.cfg.LogDir, s.name+".log")
}

// keep remembers the last lines of output, bounded.
func (s *server) keep(line string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tail = append(s.tail, boundLine(line))
	if len(s.tail) > 10 {
		s.tail = s.tail[len(s.tail)-10:]
	}
}

// portWait is how long a start waits for its port to be free (a var for
// tests).
var portWait = time.Minute

// waitPortFree waits up to portWait for nothing to listen on the port.
func (s *server) waitPortFree(ctx context.Context) bool {
	for range int(portWait / (500 * time.Millisecond)) {
		l, err := net.Listen("tcp", net.JoinHostPort(s.f.cfg.Host, strconv.Itoa(s.port)))
		if err == nil {
			l.Close()
			return true
		}
		if !sleep(ctx, 500*time.Millisecond) {
			return false
		}
	}
	return false
}

func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// exitText is how the guard's status reads: the server's exit code or
// the signal that ended it.
func exitText(err error) string {
	var ee *exec.ExitError
	switch {
	case err == nil:
		return "status 0"
	case !asExit(err, &ee):
		return err.Error()
	case ee.ExitCode() > 128:
		return "signal " + syscall.Signal(ee.ExitCode()-128).String()
	}
	return fmt.Sprintf("status %d", ee.ExitCode())
}

func asExit(err error, ee **exec.ExitError) bool {
	e, ok := err.(*exec.ExitError)
	*ee = e
	return ok
}

// boundLine makes a line of a server's output safe to show: at most 300
// bytes, control characters escaped.
func boundLine(line string) string { return termsafe.Line(termsafe.Cut(line, 300)) }
