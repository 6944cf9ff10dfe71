package sglang

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// rawServer answers each request on a connection with the next of answers
// (raw HTTP bytes; "" closes the connection without answering; hold waits
// until the client closes it) and records the requests it read.
type rawServer struct {
	ln       net.Listener
	mu       sync.Mutex
	requests []string
	conns    int
	arrived  chan struct{} // receives once per request read
	wg       sync.WaitGroup
}

func startRawServer(t *testing.T, answers func(conn, req int) string) *rawServer {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &rawServer{ln: ln, arrived: make(chan struct{}, 100)}
	s.wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s.mu.Lock()
			ci := s.conns
			s.conns++
			s.mu.Unlock()
			s.wg.Go(func() {
				defer c.Close()
				br := bufio.NewReader(c)
				for ri := 0; ; ri++ {
					req, err := http.ReadRequest(br)
					if err != nil {
						return
					}
					body, _ := io.ReadAll(req.Body)
					s.mu.Lock()
					s.requests = append(s.requests, req.Method+" "+req.URL.Path+" "+req.Header.Get("Content-Type")+" "+string(body))
					s.mu.Unlock()
					select {
					case s.arrived <- struct{}{}:
					default:
					}
					a := answers(ci, ri)
					if a == "" {
						return
					}
					if a == hold {
						_, _ = io.Copy(io.Discard, br)
						return
					}
					a, closeAfter := strings.CutSuffix(a, closeMark)
					if _, err := io.WriteString(c, a); err != nil || closeAfter {
						return
					}
				}
			})
		}
	})
	t.Cleanup(func() { ln.Close(); s.wg.Wait() })
	return s
}

const (
	hold      = "hold"
	closeMark = "\x00close" // at the end of an answer: close the connection after it
)

func (s *rawServer) url() string { return "http://" + s.ln.Addr().String() }

func ok(body string) string {
	return "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + body
}

func TestConnFraming(t *testing.T) {
	answers := []string{
		ok(`{"a":1}`),
		"HTTP/1.1 100 Continue\r\n\r\n" + ok(`{"after":"continue"}`),
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n7;ext=1\r\n{\"chunk\r\n5\r\ned\":1\r\n1\r\n}\r\n0\r\nTrailer: x\r\n\r\n",
		"HTTP/1.1 503 Service Unavailable\r\ncontent-length: 42\r\n\r\n" + `{"error":{"message":"queue full"}}        `,
		"HTTP/1.0 200 OK\r\n\r\n" + `{"until":"eof"}` + closeMark,
	}
	s := startRawServer(t, func(_, ri int) string {
		if ri < len(answers) {
			return answers[ri]
		}
		return ""
	})
	p, err := newConnPool(s.url(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer p.close()
	want := []struct {
		status int
		body   string
	}{{200, `{"a":1}`}, {200, `{"after":"continue"}`}, {200, `{"chunked":1}`}, {503, `{"error":{"message":"queue full"}}        `}, {200, `{"until":"eof"}`}}
	var buf []byte
	for i, w := range want {
		status, err := p.post(context.Background(), nil, time.Now().Add(time.Minute), "/generate", []byte(`{"i":`+strconv.Itoa(i)+`}`), &buf)
		if err != nil || status != w.status || string(buf) != w.body {
			t.Fatalf("answer %d: %d %q %v; want %d %q", i, status, buf, err, w.status, w.body)
		}
	}
	// All on one kept-alive connection until the HTTP/1.0 answer closed it.
	if s.conns != 1 || len(p.idle) != 0 {
		t.Errorf("%d connections, %d idle; want 1 and 0", s.conns, len(p.idle))
	}
	if got := s.requests[2]; got != `POST /generate application/json {"i":2}` {
		t.Errorf("request %q", got)
	}
}

func TestConnStaleKeepAliveIsResent(t *testing.T) {
	// The server answers one request per connection, then closes it without
	// saying so, as an idle keep-alive timeout does.
	s := startRawServer(t, func(_, ri int) string {
		if ri == 0 {
			return ok(`{"ok":true}`)
		}
		return ""
	})
	p, _ := newConnPool(s.url(), nil)
	defer p.close()
	var buf []byte
	for i := range 3 {
		status, err := p.post(context.Background(), nil, time.Now().Add(time.Minute), "/x", []byte(`{}`), &buf)
		if err != nil || status != 200 {
			t.Fatalf("request %d: %d %v", i, status, err)
		}
	}
	if s.conns < 3 {
		t.Errorf("%d connections for 3 requests on closing connections", s.conns)
	}
}

func TestConnTornAnswerIsAnError(t *testing.T) {
	s := startRawServer(t, func(_, _ int) string {
		return "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n{\"text\":\"half" + closeMark
	})
	p, _ := newConnPool(s.url(), nil)
	defer p.close()
	var buf []byte
	_, err := p.post(context.Background(), nil, time.Now().Add(time.Minute), "/x", []byte(`{}`), &buf)
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("err = %v, want unexpected EOF", err)
	}
}

func TestConnCancelClosesTheConnection(t *testing.T) {
	s := startRawServer(t, func(_, _ int) string { return hold })
	p, _ := newConnPool(s.url(), nil)
	defer p.close()
	ctx, cancel := context.WithCancelCause(context.Background())
	go func() {
		<-s.arrived
		cancel(errors.New("stop now"))
	}()
	var buf []byte
	_, err := p.post(ctx, nil, time.Now().Add(time.Minute), "/x", []byte(`{}`), &buf)
	if err == nil || !strings.Contains(context.Cause(ctx).Error(), "stop now") {
		t.Fatalf("err = %v", err)
	}
}

func TestConnDeadline(t *testing.T) {
	s := startRawServer(t, func(_, _ int) string { return hold })
	p, _ := newConnPool(s.url(), nil)
	defer p.close()
	var buf []byte
	_, err := p.post(context.Background(), nil, time.Now().Add(50*time.Millisecond), "/x", []byte(`{}`), &buf)
	if e := transportError("s", err, context.Background()); e.Class != ClassTimeout {
		t.Fatalf("err = %v, classed %s; want a timeout", err, e.Class)
	}
}

func TestConnAbortedByEjection(t *testing.T) {
	s := startRawServer(t, func(_, _ int) string { return hold })
	p, _ := newConnPool(s.url(), nil)
	defer p.close()
	sctx, eject := context.WithCancelCause(context.Background())
	go func() {
		<-s.arrived
		eject(errEjected)
	}()
	var buf []byte
	_, err := p.post(context.Background(), sctx, time.Now().Add(time.Minute), "/x", []byte(`{}`), &buf)
	if e := transportError("s", err, sctx); e.Class != ClassEjected {
		t.Fatalf("err = %v, classed %s; want ejected", err, e.Class)
	}
}
