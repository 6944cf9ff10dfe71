package sim

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"sort"
	"sync"
	"time"
)

// Fleet is a set of simulated servers started together. Its methods are safe
// for concurrent use.
type Fleet struct {
	cfg     Config
	texts   *texts
	start   time.Time
	servers []*Server

	stopSched chan struct{} // closed by Close: ends the die/revive schedule
	schedDone chan struct{} // closed when the schedule goroutine has returned
	stopCtx   func() bool   // detaches the context.AfterFunc
	closeOnce sync.Once
}

// Start starts cfg's servers, each listening before Start returns, and a
// schedule for FaultDie faults. The fleet runs until Close or until ctx is
// done; Close waits until every goroutine it started has returned.
func Start(ctx context.Context, cfg Config) (*Fleet, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	f := &Fleet{cfg: cfg, stopSched: make(chan struct{}), schedDone: make(chan struct{})}
	if cfg.Tokenizer != nil {
		f.texts = buildTexts(cfg.Tokenizer)
	} else {
		f.texts = approxTexts()
	}
	addrs := cfg.Addrs
	if len(addrs) == 0 {
		addrs = make([]string, cfg.Count)
		for i := range addrs {
			addrs[i] = "127.0.0.1:0"
		}
	}
	f.start = time.Now()
	for i, a := range addrs {
		s := &Server{fleet: f, index: i, addr: a}
		if err := s.listen(); err != nil {
			for _, t := range f.servers {
				t.Kill()
			}
			return nil, fmt.Errorf("sim: server %d: %w", i, err)
		}
		f.servers = append(f.servers, s)
	}
	go f.schedule()
	f.stopCtx = context.AfterFunc(ctx, func() { f.Close() })
	return f, nil
}

// Config returns the fleet's configuration with defaults filled in.
func (f *Fleet) Config() Config { return f.cfg }

// Servers returns the servers in address order.
func (f *Fleet) Servers() []*Server { return f.servers }

// URLs returns each server's base URL ("http://127.0.0.1:PORT").
func (f *Fleet) URLs() []string {
	out := make([]string, len(f.servers))
	for i, s := range f.servers {
		out[i] = s.URL()
	}
	return out
}

// Close kills every server and waits for all their goroutines (handlers,
// schedule) to return. It is idempotent and always returns nil.
func (f *Fleet) Close() error {
	f.closeOnce.Do(func() {
		f.stopCtx()
		close(f.stopSched)
		<-f.schedDone
		for _, s := range f.servers {
			s.close()
		}
	})
	return nil
}

// now returns the simulated time since the fleet started.
func (f *Fleet) now() time.Duration {
	return time.Duration(float64(time.Since(f.start)) * f.cfg.Speed)
}

// schedule carries out the FaultDie faults: kill at At, revive at At+For.
func (f *Fleet) schedule() {
	defer close(f.schedDone)
	type event struct {
		at     time.Duration // wall time since start
		server int
		revive bool
	}
	var evs []event
	for _, ft := range f.cfg.Faults {
		if ft.Kind != FaultDie {
			continue
		}
		for i := range f.servers {
			if ft.appliesTo(i) {
				evs = append(evs, event{f.cfg.wall(ft.At), i, false}, event{f.cfg.wall(ft.At + ft.For), i, true})
			}
		}
	}
	sort.SliceStable(evs, func(a, b int) bool { return evs[a].at < evs[b].at })
	for _, e := range evs {
		t := time.NewTimer(time.Until(f.start.Add(e.at)))
		select {
		case <-f.stopSched:
			t.Stop()
			return
		case <-t.C:
		}
		s := f.servers[e.server]
		if e.revive {
			_ = s.Revive() // a port taken meanwhile leaves the server dead, as a real crash loop would
		} else {
			s.Kill()
		}
	}
}

// Server is one simulated SGLang server.
type Server struct {
	fleet *Fleet
	index int

	// transition serializes Kill and Revive, so a revival never races the
	// old listener's close for the port.
	transition sync.Mutex
	mu         sync.Mutex
	addr       string // the bound address once listening (port fixed across revivals)
	life       *life  // nil while dead
	closed     bool
}

// Index is the server's position in the fleet (what Fault.Servers names).
func (s *Server) Index() int { return s.index }

// Addr returns the listen address, "127.0.0.1:PORT".
func (s *Server) Addr() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.addr
}

// URL returns the base URL, "http://127.0.0.1:PORT".
func (s *Server) URL() string { return "http://" + s.Addr() }

// Alive reports whether the server is listening.
func (s *Server) Alive() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.life != nil
}

// Kill stops the server abruptly, like a crashed process: the port refuses
// connections, every open connection is closed and every request in flight is
// dropped. It waits for the server's goroutines to return. Killing a dead
// server does nothing.
func (s *Server) Kill() {
	s.transition.Lock()
	defer s.transition.Unlock()
	s.mu.Lock()
	l := s.life
	s.life = nil
	s.mu.Unlock()
	if l != nil {
		l.kill()
	}
}

// Revive starts a killed server again on the same address with fresh state
// (counters, queue, warm-up). Reviving a live server does nothing.
func (s *Server) Revive() error {
	s.transition.Lock()
	defer s.transition.Unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return errors.New("sim: fleet closed")
	}
	if s.life != nil {
		return nil
	}
	return s.listenLocked()
}

func (s *Server) listen() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.listenLocked()
}

func (s *Server) listenLocked() error {
	ln, err := net.Listen("tcp", s.addr)
	if err != nil {
		return err
	}
	s.addr = ln.Addr().String()
	l := newLife(s, ln)
	s.life = l
	go l.serve()
	return nil
}

func (s *Server) close() {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.Kill()
}

// current returns the live state, or nil while dead.
func (s *Server) current() *life {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.life
}

// Stats is a snapshot of one server's counters since it last started.
type Stats struct {
	Running, Queued  int
	Requests         int64 // generation requests that got a running slot
	PromptTokens     int64
	GenerationTokens int64
}

// Stats returns the server's counters; zero while dead.
func (s *Server) Stats() Stats {
	l := s.current()
	if l == nil {
		return Stats{}
	}
	running, queued := l.adm.counts()
	return Stats{Running: running, Queued: queued, Requests: l.requests.Load(),
		PromptTokens: l.promptTokens.Load(), GenerationTokens: l.genTokens.Load()}
}

// httpServer builds the net/http server of one life.
func httpServer(h http.Handler) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: time.Minute,
		ErrorLog:          log.New(io.Discard, "", 0), // a killed connection is expected, not news
	}
}
