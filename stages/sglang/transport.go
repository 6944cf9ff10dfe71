package sglang

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/textproto"
	"net/url"
	"sync"
	"sync/atomic"
	"time"
)

// Every request — generations, health, info and probes — goes through one
// net/http Transport, so servers get what the standard library gives:
// proxies from the environment (HTTPS_PROXY, NO_PROXY; loopback is never
// proxied), TLS with the system roots (SSL_CERT_FILE), HTTP/2 where a
// gateway offers it, and kept-alive connections.
//
// Re-sends: the Transport re-sends a POST on its own only when not one byte
// of it was written (or, on HTTP/2, when the server refused the stream
// unprocessed), so the server cannot have seen it. Any other failure is
// returned, and Session.Generate decides: a new attempt, with a fresh rid,
// counted against max_attempts.

// Redirects: none is followed, on any request (health, info, the 1-token
// probe, generations). Following one would send the request's credentials
// (Authorization from api_key or a URL's user:password, and every
// headers_env value) wherever a server's Location points: net/http drops
// Authorization only when the host changes, a port on the same host keeps
// it, and it keeps every other header; a 307 would also send a generation
// twice. A 3xx is an answer like any other status, said to be a redirect.

// newHTTPClient is the client of the GET paths (health, info) over rt,
// following no redirect.
func newHTTPClient(rt http.RoundTripper) *http.Client {
	return &http.Client{Transport: rt, CheckRedirect: func(*http.Request, []*http.Request) error {
		return http.ErrUseLastResponse
	}}
}

// idleTimeout is how long an idle connection is kept: uvicorn, which serves
// SGLang, closes keep-alive connections idle for 5 s.
const idleTimeout = 4 * time.Second

// maxBody bounds one answer, so a broken server cannot exhaust memory.
const maxBody = 256 << 20

// errRequestTimeout is the cause of a request that ran past request_timeout.
var errRequestTimeout = errors.New("no answer within request_timeout")

// newTransport returns the client's Transport. perHost is how many idle
// connections to keep per server: its concurrency, so that a full fleet
// reuses connections instead of dialling.
func newTransport(perHost int) *http.Transport {
	return &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		ForceAttemptHTTP2:     true,
		DisableCompression:    true, // JSON answers of a few KB: gzip costs more CPU than it saves
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: time.Second,
		MaxIdleConnsPerHost:   max(perHost, 2),
		IdleConnTimeout:       idleTimeout,
		// No ResponseHeaderTimeout: a server answers a generation only when
		// it is done, minutes later; request_timeout bounds the attempt.
		// net/http's own 4 KiB, not more: every kept connection holds both
		// buffers (a fleet of 7 x 48 held 21 MiB of them at 32 KiB, twice
		// that in RSS with the collector's headroom), and an answer's body
		// is read past the buffer straight into its own.
		ReadBufferSize:  4 << 10,
		WriteBufferSize: 4 << 10,
	}
}

// checkServerURL says what is wrong with base (a URL without userinfo) as a
// server's base URL; its errors never repeat a userinfo.
func checkServerURL(base string) error {
	u, err := url.Parse(base)
	if err != nil {
		return fmt.Errorf("%s is not a URL", Redact(base))
	}
	if u.User != nil {
		return fmt.Errorf("%s: userinfo in the URL (a bug: the client sends it as a header)", Redact(base))
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return fmt.Errorf("%s: unsupported scheme %q", Redact(base), u.Scheme)
	}
	return nil
}

// postJSON sends body as a JSON POST to path on s and reads the answer's
// body into *buf (replacing its contents; a nil *buf is taken from c.bufs
// once the answer's headers are in). The request ends at ctx's end,
// after timeout (cause errRequestTimeout), or when abort (nil: none) ends;
// ending a request closes its connection, which makes SGLang abort it and
// free its slot. held is what *buf takes of the fleet's answer budget: the
// caller gives it back (c.budget.give) once done with *buf, error or not.
func (c *Client) postJSON(ctx, abort context.Context, s *server, path string, body []byte, timeout time.Duration, buf *[]byte) (status int, held int64, err error) {
	ctx, cancel := context.WithTimeoutCause(ctx, timeout, errRequestTimeout)
	defer cancel()
	if abort != nil {
		stop := context.AfterFunc(abort, cancel)
		defer stop()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.url+path, bytes.NewReader(body))
	if err != nil {
		return 0, 0, fmt.Errorf("bad server URL %s", Redact(s.url))
	}
	req.Header = s.postHeader
	// RoundTrip, not Client.Do: a generation follows no redirect (a 307
	// would send it again) and needs no per-request copy of its headers.
	resp, err := c.rt.RoundTrip(req)
	if err != nil {
		return 0, 0, requestError(ctx, err)
	}
	defer resp.Body.Close()
	if resp.ContentLength > maxBody {
		return 0, 0, fmt.Errorf("answer of %d bytes is too large", resp.ContentLength)
	}
	if *buf == nil {
		*buf = *c.bufs.Get().(*[]byte)
	}
	*buf, held, err = c.budget.read(resp.Body, (*buf)[:0], resp.ContentLength)
	if err != nil {
		return 0, held, requestError(ctx, err)
	}
	return resp.StatusCode, held, nil
}

// answerBudget is the fleet's bound on answer bytes in flight: the
// capacity of every buffer an answer is being read into or is held in.
// Reading takes from it as a buffer grows and fails when it would go
// beyond max, so at 48 requests in flight to each of 7 servers a
// never-ending body costs at most max, not 336 times maxBody.
type answerBudget struct {
	max  int64
	used atomic.Int64
}

// errBudget ends the reading of an answer that would take the fleet's
// answer bytes beyond the budget.
type errBudget struct{ max, read int64 }

func (e *errBudget) Error() string {
	return fmt.Sprintf("answer cut at %d bytes: the answers in flight would exceed the fleet's %d MiB budget for them", e.read, e.max>>20)
}

func (b *answerBudget) take(n int64) bool {
	if b.used.Add(n) > b.max {
		b.used.Add(-n)
		return false
	}
	return true
}

func (b *answerBudget) give(n int64) { b.used.Add(-n) }

// fill reads r into p until p is full or r ends (end); a torn body's
// io.ErrUnexpectedEOF is an error, unlike io.ReadFull's own.
func fill(r io.Reader, p []byte) (n int, end bool, err error) {
	for n < len(p) {
		m, err := r.Read(p[n:])
		n += m
		if err == io.EOF {
			return n, true, nil
		}
		if err != nil {
			return n, false, err
		}
	}
	return n, false, nil
}

// chunkSize is the unit an answer beyond its buffer is read in.
const chunkSize = 64 << 10

// chunks are reused: an answer cut by the budget leaves no garbage behind,
// so a stream of hostile bodies does not grow the heap beyond the budget
// (reading by doubling a buffer left each old one to the collector, and
// the process's RSS reached four times the budget).
var chunks = sync.Pool{New: func() any { c := make([]byte, chunkSize); return &c }}

// read reads r to its end into buf (length 0); size is the Content-Length,
// or -1. What does not fit in buf is read in chunks taken from the budget
// first, then joined into one buffer of the answer's size. It returns the
// buffer and the budget it holds (its capacity), also with an error. More
// than maxBody is an error.
func (b *answerBudget) read(r io.Reader, buf []byte, size int64) ([]byte, int64, error) {
	held := int64(cap(buf))
	if !b.take(held) {
		return buf, 0, &errBudget{max: b.max}
	}
	if size > 0 && int64(cap(buf)) < size+1 {
		// Known length: one buffer of the right size (+1 to see the end).
		if !b.take(size + 1) {
			return buf, held, &errBudget{max: b.max}
		}
		b.give(held)
		buf, held = make([]byte, 0, size+1), size+1
	}
	n, end, err := fill(r, buf[:cap(buf)])
	buf = buf[:n]
	if err != nil || end {
		return buf, held, err
	}
	return b.readSpill(r, buf, held)
}

// spill is the part of an answer beyond its buffer: chunks, each full but
// the last, which holds last bytes. Each chunk holds chunkSize of the
// budget until release.
type spill struct {
	chunks []*[]byte
	last   int
}

// readSpill reads the rest of r, beyond the full buf that holds held of
// the budget, into chunks, then joins buf and them into one buffer of the
// answer's size, which holds its size of the budget instead of held.
func (b *answerBudget) readSpill(r io.Reader, buf []byte, held int64) ([]byte, int64, error) {
	var sp spill
	defer b.release(&sp)
	if err := b.fillSpill(r, len(buf), &sp); err != nil {
		return buf, held, err
	}
	total := len(buf) + (len(sp.chunks)-1)*chunkSize + sp.last
	if !b.take(int64(total)) {
		return buf, held, &errBudget{max: b.max, read: int64(total)}
	}
	joined := append(make([]byte, 0, total), buf...)
	for i, c := range sp.chunks {
		if i == len(sp.chunks)-1 {
			joined = append(joined, (*c)[:sp.last]...)
		} else {
			joined = append(joined, *c...)
		}
	}
	b.give(held)
	return joined, int64(total), nil
}

// fillSpill reads r to its end into chunks taken from the budget, after
// inBuf bytes in the answer's buffer. More than maxBody in all is an error.
func (b *answerBudget) fillSpill(r io.Reader, inBuf int, sp *spill) error {
	for {
		total := int64(inBuf) + int64(len(sp.chunks))*chunkSize // every chunk so far is full
		if total > maxBody {
			return fmt.Errorf("answer larger than %d bytes", maxBody)
		}
		if !b.take(chunkSize) {
			return &errBudget{max: b.max, read: total}
		}
		c := chunks.Get().(*[]byte)
		sp.chunks = append(sp.chunks, c)
		n, end, err := fill(r, *c)
		sp.last = n
		if err != nil || end {
			return err
		}
	}
}

// release puts sp's chunks back in the pool and gives back their budget.
func (b *answerBudget) release(sp *spill) {
	for _, c := range sp.chunks {
		chunks.Put(c)
	}
	b.give(int64(len(sp.chunks)) * chunkSize)
}

// postHeader returns h with Content-Type: application/json, canonical.
func postHeader(h http.Header) http.Header {
	out := make(http.Header, len(h)+1)
	for k, vs := range h {
		out[textproto.CanonicalMIMEHeaderKey(k)] = vs
	}
	out["Content-Type"] = []string{"application/json"}
	return out
}

// requestError is err with the cause of ctx's end, when it ended: the
// caller tells a timeout from an ejection from a stop by it.
func requestError(ctx context.Context, err error) error {
	if cause := context.Cause(ctx); cause != nil {
		return fmt.Errorf("%w (%v)", cause, trimURL(err.Error()))
	}
	return err
}
