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
		ReadBufferSize:  32 << 10,
		WriteBufferSize: 32 << 10,
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
// body into *buf (replacing its contents). The request ends at ctx's end,
// after timeout (cause errRequestTimeout), or when abort (nil: none) ends;
// ending a request closes its connection, which makes SGLang abort it and
// free its slot.
func (c *Client) postJSON(ctx, abort context.Context, s *server, path string, body []byte, timeout time.Duration, buf *[]byte) (status int, err error) {
	ctx, cancel := context.WithTimeoutCause(ctx, timeout, errRequestTimeout)
	defer cancel()
	if abort != nil {
		stop := context.AfterFunc(abort, cancel)
		defer stop()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.url+path, bytes.NewReader(body))
	if err != nil {
		return 0, fmt.Errorf("bad server URL %s", Redact(s.url))
	}
	req.Header = s.postHeader
	// RoundTrip, not Client.Do: a generation follows no redirect (a 307
	// would send it again) and needs no per-request copy of its headers.
	resp, err := c.rt.RoundTrip(req)
	if err != nil {
		return 0, requestError(ctx, err)
	}
	defer resp.Body.Close()
	if resp.ContentLength > maxBody {
		return 0, fmt.Errorf("answer of %d bytes is too large", resp.ContentLength)
	}
	b := bytes.NewBuffer((*buf)[:0])
	if resp.ContentLength > 0 {
		b.Grow(int(resp.ContentLength) + bytes.MinRead)
	}
	_, err = b.ReadFrom(io.LimitReader(resp.Body, maxBody+1))
	*buf = b.Bytes()
	if err != nil {
		return 0, requestError(ctx, err)
	}
	if len(*buf) > maxBody {
		return 0, fmt.Errorf("answer larger than %d bytes", maxBody)
	}
	return resp.StatusCode, nil
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
