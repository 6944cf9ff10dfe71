package hubtest

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
)

// A Fault is what the server does instead of answering a request normally;
// queue one with Fail.
type Fault struct {
	// Status, e.g. 429 or 503, is sent with {"error": ...}; the request
	// is not applied.
	Status int
	// RetryAfter, when > 0, is sent as "Retry-After: N", in seconds:
	// utils/_http.http_backoff waits that long (plus 1 s) before retrying.
	RetryAfter int
	// RateLimitReset, when > 0, is sent as `RateLimit: "api";r=0;t=N`:
	// on a 429 http_backoff prefers its t (parse_ratelimit_headers) to
	// Retry-After.
	RateLimitReset int
	// Lose, instead of a Status, applies the request as usual, then closes
	// the connection without a response: the client cannot tell that its
	// request took effect (a commit made, an object stored).
	Lose bool
}

// LoseResponse is the Fault that applies a request and loses its response.
func LoseResponse() Fault { return Fault{Lose: true} }

type queuedFault struct {
	route string
	left  int
	fault Fault
}

// Fail makes the next n requests on route get f instead of their answer.
// Faults on one route are served in the order queued, before the token is
// checked. Route names: whoami,
// create, validate-yaml, info, preupload, lfs-batch, upload (a basic or part PUT),
// upload-complete (multipart completion), verify, commit, tree, resolve.
func (s *Server) Fail(route string, n int, f Fault) {
	s.t.Helper()
	if routes[route] == nil {
		s.t.Fatalf("hubtest: Fail: no route %q", route)
	}
	if n < 1 || f.Lose == (f.Status != 0) || !f.Lose && f.Status < 400 {
		s.t.Fatalf("hubtest: Fail(%q, %d, %+v): want n ≥ 1 and either Lose or an error Status", route, n, f)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults = append(s.faults, queuedFault{route, n, f})
}

// takeFault returns the fault the next request on route gets, if any.
func (s *Server) takeFault(route string) (Fault, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := range s.faults {
		q := &s.faults[i]
		if q.route != route {
			continue
		}
		f := q.fault
		if q.left--; q.left == 0 {
			s.faults = slices.Delete(s.faults, i, i+1)
		}
		return f, true
	}
	return Fault{}, false
}

func (f Fault) write(w http.ResponseWriter) {
	if f.RetryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(f.RetryAfter))
	}
	if f.RateLimitReset > 0 {
		w.Header().Set("RateLimit", fmt.Sprintf(`"api";r=0;t=%d`, f.RateLimitReset))
	}
	writeError(w, &hubError{status: f.Status, msg: http.StatusText(f.Status)})
}

// loseResponse applies r, logs the status of its answer, drops the answer
// and closes the connection.
func (s *Server) loseResponse(w http.ResponseWriter, r *http.Request, rt *route, at target, setStatus func(int)) {
	rec := httptest.NewRecorder()
	s.handle(rec, r, rt, at)
	setStatus(rec.Code)
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		panic("hubtest: cannot hijack the connection to lose a response: " + err.Error())
	}
	conn.Close()
}
