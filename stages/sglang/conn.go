package sglang

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/textproto"
	"net/url"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// The hot path speaks HTTP/1.1 itself over kept-alive connections, one
// request at a time per connection, in the calling goroutine: net/http's
// client hands every request to two more goroutines (writeLoop, readLoop)
// and back, which costs more CPU per completion than parsing it. Probes and
// info requests, which are rare, use net/http.
//
// What it needs from servers is what SGLang (uvicorn), ollama and the
// simulator do: a status line and headers, then a body framed by
// Content-Length, chunked transfer coding, or the end of the connection.

// connIdleMax is how long an idle connection is trusted: uvicorn, which
// serves SGLang, closes keep-alive connections idle for 5 s.
const connIdleMax = 4 * time.Second

// maxBody bounds one answer, so a broken server cannot exhaust memory.
const maxBody = 256 << 20

// connPool holds one server's idle connections. Safe for concurrent use.
type connPool struct {
	addr      string // host:port to dial
	hostHdr   string // Host header
	extraHdr  []byte // the server's own headers ("Name: value\r\n"…), e.g. Authorization
	tlsConfig *tls.Config
	dialer    net.Dialer

	mu   sync.Mutex
	idle []*conn
	done bool
}

type conn struct {
	nc       net.Conn
	br       *bufio.Reader
	wbuf     []byte // the request as written: head and body in one write
	lastUsed time.Time
}

// newConnPool returns the pool of base, a URL without userinfo; every
// request carries header (checked here: a value with a newline would inject
// headers). Its errors name neither header values nor userinfo.
func newConnPool(base string, header http.Header) (*connPool, error) {
	u, err := url.Parse(base)
	if err != nil {
		return nil, fmt.Errorf("%s is not a URL", Redact(base))
	}
	if u.User != nil {
		return nil, fmt.Errorf("%s: userinfo in the URL (a bug: the client sends it as a header)", Redact(base))
	}
	if err := checkHeader(header); err != nil {
		return nil, err
	}
	p := &connPool{hostHdr: u.Host, dialer: net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}}
	names := slices.Sorted(maps.Keys(header))
	for _, name := range names {
		for _, v := range header[name] {
			p.extraHdr = append(p.extraHdr, textproto.CanonicalMIMEHeaderKey(name)...)
			p.extraHdr = append(p.extraHdr, ": "...)
			p.extraHdr = append(p.extraHdr, v...)
			p.extraHdr = append(p.extraHdr, "\r\n"...)
		}
	}
	port := u.Port()
	switch u.Scheme {
	case "http":
		if port == "" {
			port = "80"
		}
	case "https":
		if port == "" {
			port = "443"
		}
		p.tlsConfig = &tls.Config{ServerName: u.Hostname()}
	default:
		return nil, fmt.Errorf("%s: unsupported scheme %q", Redact(base), u.Scheme)
	}
	p.addr = net.JoinHostPort(u.Hostname(), port)
	return p, nil
}

// get returns an idle connection or dials a new one; reused says which.
func (p *connPool) get(ctx context.Context, deadline time.Time) (c *conn, reused bool, err error) {
	now := time.Now()
	p.mu.Lock()
	for len(p.idle) > 0 {
		c = p.idle[len(p.idle)-1]
		p.idle = p.idle[:len(p.idle)-1]
		if now.Sub(c.lastUsed) < connIdleMax {
			p.mu.Unlock()
			return c, true, nil
		}
		c.nc.Close()
	}
	p.mu.Unlock()
	nd := p.dialer
	nd.Deadline = deadline
	var nc net.Conn
	if p.tlsConfig != nil {
		d := tls.Dialer{NetDialer: &nd, Config: p.tlsConfig}
		nc, err = d.DialContext(ctx, "tcp", p.addr)
	} else {
		nc, err = nd.DialContext(ctx, "tcp", p.addr)
	}
	if err != nil {
		return nil, false, err
	}
	return &conn{nc: nc, br: bufio.NewReaderSize(nc, 32<<10)}, false, nil
}

func (p *connPool) put(c *conn) {
	c.lastUsed = time.Now()
	p.mu.Lock()
	if p.done {
		p.mu.Unlock()
		c.nc.Close()
		return
	}
	p.idle = append(p.idle, c)
	p.mu.Unlock()
}

// close closes the idle connections; connections in use are closed when
// they are returned.
func (p *connPool) close() {
	p.mu.Lock()
	idle := p.idle
	p.idle, p.done = nil, true
	p.mu.Unlock()
	for _, c := range idle {
		c.nc.Close()
	}
}

// errStale is a kept-alive connection the server had closed: the request
// never reached it, so it is re-sent on a new connection at once.
var errStale = errors.New("kept-alive connection closed by the server")

// post sends body as a JSON POST to path and reads the answer's body into
// *buf (replacing its contents), by deadline. Cancelling ctx or abort (nil:
// none) closes the connection, which makes SGLang abort the request and free
// its slot; the error is then ctx's cause or the connection's.
func (p *connPool) post(ctx, abort context.Context, deadline time.Time, path string, body []byte, buf *[]byte) (status int, err error) {
	for try := 0; ; try++ {
		c, reused, err := p.get(ctx, deadline)
		if err != nil {
			return 0, err
		}
		status, keep, err := p.exchange(ctx, abort, deadline, c, path, body, buf)
		if err == nil {
			if keep {
				p.put(c)
			} else {
				c.nc.Close()
			}
			return status, nil
		}
		c.nc.Close()
		if errors.Is(err, errStale) && reused && try < 2 && ctx.Err() == nil && (abort == nil || abort.Err() == nil) {
			continue
		}
		return 0, err
	}
}

// exchange writes one request on c and reads its answer. keep says whether
// c may carry another request.
func (p *connPool) exchange(ctx, abort context.Context, deadline time.Time, c *conn, path string, body []byte, buf *[]byte) (status int, keep bool, err error) {
	// Deadlines are the runtime poller's: no timer or context per request.
	if err := c.nc.SetDeadline(deadline); err != nil {
		return 0, false, err
	}
	closeConn := func() { c.nc.Close() }
	stop := context.AfterFunc(ctx, closeConn)
	stopAbort := func() bool { return true }
	if abort != nil {
		stopAbort = context.AfterFunc(abort, closeConn)
	}
	defer func() {
		a, b := stop(), stopAbort()
		if !a || !b {
			// A context ended: the connection is closed (or about to be).
			keep = false
			if err == nil {
				err = net.ErrClosed
			}
		}
		if !a {
			err = context.Cause(ctx)
		}
	}()
	w := append(c.wbuf[:0], "POST "...)
	w = append(w, path...)
	w = append(w, " HTTP/1.1\r\nHost: "...)
	w = append(w, p.hostHdr...)
	w = append(w, "\r\nUser-Agent: pipe\r\n"...)
	w = append(w, p.extraHdr...)
	w = append(w, "Content-Type: application/json\r\nContent-Length: "...)
	w = strconv.AppendInt(w, int64(len(body)), 10)
	w = append(w, "\r\n\r\n"...)
	w = append(w, body...)
	if cap(w) <= 1<<20 {
		c.wbuf = w
	}
	if _, err := c.nc.Write(w); err != nil {
		return 0, false, staleOr(err)
	}
	status, keep, err = readResponse(c.br, buf)
	if err != nil {
		return 0, false, err
	}
	return status, keep, nil
}

// staleOr classes an error before any answer byte as a stale connection.
func staleOr(err error) error {
	if errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) || isConnReset(err) {
		return fmt.Errorf("%w: %v", errStale, err)
	}
	return err
}

func isConnReset(err error) bool {
	return errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}

// readResponse reads one HTTP/1.x response: status line, headers (1xx
// answers skipped) and the body into *buf.
func readResponse(br *bufio.Reader, buf *[]byte) (status int, keep bool, err error) {
	first := true
	for {
		line, err := br.ReadSlice('\n')
		if err != nil {
			if first && len(line) == 0 {
				return 0, false, staleOr(err)
			}
			return 0, false, torn(err)
		}
		first = false
		// "HTTP/1.1 200 OK"
		if len(line) < 12 || !bytes.HasPrefix(line, []byte("HTTP/1.")) || line[8] != ' ' {
			return 0, false, fmt.Errorf("malformed HTTP status line %q", trimCRLF(line))
		}
		http10 := line[7] == '0'
		status, err = strconv.Atoi(string(line[9:12]))
		if err != nil {
			return 0, false, fmt.Errorf("malformed HTTP status line %q", trimCRLF(line))
		}
		length, chunked, closeConn := int64(-1), false, http10
		for {
			line, err := br.ReadSlice('\n')
			if err != nil {
				return 0, false, torn(err)
			}
			line = trimCRLF(line)
			if len(line) == 0 {
				break
			}
			name, value, ok := bytes.Cut(line, []byte(":"))
			if !ok {
				continue
			}
			value = bytes.TrimSpace(value)
			switch {
			case asciiEqualFold(name, "content-length"):
				n, err := strconv.ParseInt(string(value), 10, 64)
				if err != nil || n < 0 {
					return 0, false, fmt.Errorf("bad Content-Length %q", value)
				}
				length = n
			case asciiEqualFold(name, "transfer-encoding"):
				chunked = bytes.Contains(bytes.ToLower(value), []byte("chunked"))
			case asciiEqualFold(name, "connection"):
				v := bytes.ToLower(value)
				if bytes.Contains(v, []byte("close")) {
					closeConn = true
				} else if bytes.Contains(v, []byte("keep-alive")) {
					closeConn = false
				}
			}
		}
		if status >= 100 && status < 200 {
			continue // 100 Continue and friends: the real answer follows
		}
		*buf = (*buf)[:0]
		switch {
		case status == 204 || status == 304:
		case chunked:
			if err := readChunked(br, buf); err != nil {
				return 0, false, err
			}
		case length >= 0:
			if length > maxBody {
				return 0, false, fmt.Errorf("answer of %d bytes is too large", length)
			}
			*buf = grow(*buf, int(length))
			if _, err := io.ReadFull(br, *buf); err != nil {
				return 0, false, torn(err)
			}
		default:
			// No framing: the body ends with the connection.
			closeConn = true
			b := bytes.NewBuffer(*buf)
			if _, err := b.ReadFrom(io.LimitReader(br, maxBody)); err != nil {
				return 0, false, torn(err)
			}
			*buf = b.Bytes()
		}
		return status, !closeConn, nil
	}
}

func readChunked(br *bufio.Reader, buf *[]byte) error {
	for {
		line, err := br.ReadSlice('\n')
		if err != nil {
			return torn(err)
		}
		line = trimCRLF(line)
		if i := bytes.IndexByte(line, ';'); i >= 0 {
			line = line[:i]
		}
		n, err := strconv.ParseInt(string(bytes.TrimSpace(line)), 16, 64)
		if err != nil || n < 0 {
			return fmt.Errorf("bad chunk size %q", line)
		}
		if n == 0 {
			// Trailers, then the blank line.
			for {
				t, err := br.ReadSlice('\n')
				if err != nil {
					return torn(err)
				}
				if len(trimCRLF(t)) == 0 {
					return nil
				}
			}
		}
		if int64(len(*buf))+n > maxBody {
			return fmt.Errorf("answer larger than %d bytes", maxBody)
		}
		start := len(*buf)
		*buf = grow(*buf, start+int(n))
		if _, err := io.ReadFull(br, (*buf)[start:]); err != nil {
			return torn(err)
		}
		if _, err := br.Discard(2); err != nil { // the chunk's CRLF
			return torn(err)
		}
	}
}

// grow returns b resized to n bytes, reusing its array when it is large enough.
func grow(b []byte, n int) []byte {
	if cap(b) >= n {
		return b[:n]
	}
	nb := make([]byte, n, max(n, 2*cap(b)))
	copy(nb, b)
	return nb
}

// torn is a connection that ended in the middle of an answer.
func torn(err error) error {
	if errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}

func trimCRLF(b []byte) []byte {
	for len(b) > 0 && (b[len(b)-1] == '\n' || b[len(b)-1] == '\r') {
		b = b[:len(b)-1]
	}
	return b
}

func asciiEqualFold(b []byte, s string) bool {
	if len(b) != len(s) {
		return false
	}
	for i := range len(b) {
		c := b[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != s[i] {
			return false
		}
	}
	return true
}
