package hubtest

import "net/http"

// Request is one request as the server saw it. It never holds a token:
// only whether one was sent and accepted.
type Request struct {
	Method string
	// Route is the route's name (see Fail); "" when the path matched none.
	Route string
	// Path is the URL path, unescaped, without the query.
	Path string
	// Status is the status sent; for a lost response, the one that was
	// not sent.
	Status int
	// AuthHeader says the request carried an Authorization header, and
	// Authorized that it named a token added with AddToken.
	AuthHeader, Authorized bool
	// Fault says a queued Fault answered; Lost that it was LoseResponse.
	Fault, Lost bool
}

// Requests returns every request served so far, in the order they came.
// A request's Status is set before its client can see the answer.
func (s *Server) Requests() []Request {
	s.logMu.Lock()
	defer s.logMu.Unlock()
	return append([]Request(nil), s.requests...)
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	_, authorized := s.token(r)
	req := Request{Method: r.Method, Path: r.URL.Path,
		AuthHeader: r.Header.Get("Authorization") != "", Authorized: authorized}
	rt, at, err := parseRoute(r)
	if rt != nil {
		req.Route = rt.name
	}
	var f Fault
	if err == nil {
		f, req.Fault = s.takeFault(rt.name)
		req.Lost = req.Fault && f.Lose
	}
	s.logMu.Lock()
	i := len(s.requests)
	s.requests = append(s.requests, req)
	s.logMu.Unlock()
	setStatus := func(status int) {
		s.logMu.Lock()
		s.requests[i].Status = status
		s.logMu.Unlock()
	}

	rec := &recorder{ResponseWriter: w, setStatus: setStatus}
	switch {
	case err != nil:
		writeError(rec, err)
	case req.Lost:
		s.loseResponse(w, r, rt, at, setStatus)
	case req.Fault:
		f.write(rec)
	default:
		s.handle(rec, r, rt, at)
	}
	if !req.Lost && !rec.wrote {
		rec.WriteHeader(http.StatusOK)
	}
}

// handle checks the token rt needs, then runs it.
func (s *Server) handle(w http.ResponseWriter, r *http.Request, rt *route, at target) {
	err := s.authorize(r, rt.access)
	if err == nil {
		err = rt.handle(s, w, r, at)
	}
	if err != nil {
		writeError(w, err)
	}
}

// recorder logs the status a handler sends before the client gets it.
type recorder struct {
	http.ResponseWriter
	setStatus func(int)
	wrote     bool
}

func (r *recorder) WriteHeader(code int) {
	if !r.wrote {
		r.wrote = true
		r.setStatus(code)
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *recorder) Write(b []byte) (int, error) {
	if !r.wrote {
		r.WriteHeader(http.StatusOK)
	}
	return r.ResponseWriter.Write(b)
}
