package sglang

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/textproto"
	"sync"
	"time"
)

// Server states in ServerInfo.
const (
	StateReady = "ready"
	StateDown  = "down"
)

// ServerInfo is what a readiness check learned about one server.
type ServerInfo struct {
	URL           string
	Model         string // model_path (or the first /v1/models id)
	Version       string // SGLang version; "" when not reported
	ContextLength int    // 0 when not reported
	// MaxRunningRequests, MaxTotalNumTokens and MaxReqInputLen are the
	// server's own limits from /server_info (server_args and
	// scheduler_info, merged at the top level by http_server.py's
	// server_info); 0 when not reported. SGLang's context_length there is
	// the CLI argument, null unless set: the model's length then comes from
	// /v1/models' max_model_len.
	MaxRunningRequests int
	MaxTotalNumTokens  int
	MaxReqInputLen     int
	State              string // StateReady or StateDown
	Reason             string // why it is down
	// AuthFailed says the server refused the credentials sent (HTTP 401
	// or 403); Reason then says what was sent, never the credentials.
	AuthFailed bool
}

// endpoint is a server as the net/http path reaches it: its base URL
// without userinfo and the headers every request carries.
type endpoint struct {
	url    string
	header http.Header
}

// Probe checks servers without generating anything: health, then server
// and model info, with each server's Header (and URL userinfo, as Basic
// auth) like a Client. It is what `pipe run --dry-run` shows. A server is
// StateReady when its health endpoint answers 200 (or it has none, like
// non-SGLang servers, and its info endpoints answer) and no request was
// refused for its credentials. Only URL and Header of the specs are used.
func Probe(ctx context.Context, servers []ServerSpec, timeout time.Duration) []ServerInfo {
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	hc := newHTTPClient(newTransport(2))
	defer hc.CloseIdleConnections()
	out := make([]ServerInfo, len(servers))
	var wg sync.WaitGroup
	for i, spec := range servers {
		wg.Go(func() {
			u, h := splitUserinfo(spec.URL, spec.Header)
			ep := endpoint{u, h}
			in := ServerInfo{URL: u, State: StateReady}
			if err := checkHeader(h); err != nil {
				in.State, in.Reason = StateDown, err.Error()
				out[i] = in
				return
			}
			hasHealth, reason, refused := health(ctx, hc, ep, timeout)
			if reason != "" {
				in.State, in.Reason, in.AuthFailed = StateDown, reason, refused
				out[i] = in
				return
			}
			if reason := readInfo(ctx, hc, ep, timeout, &in); reason != "" {
				in.State, in.Reason, in.AuthFailed = StateDown, reason, true
			} else if !hasHealth && in.Model == "" {
				in.State, in.Reason = StateDown, "no /health and no model info: not an inference server?"
			}
			out[i] = in
		})
	}
	wg.Wait()
	return out
}

// check is the readiness check of one server: health, info (read once),
// and, when generate is set, a 1-token generation on the configured API.
func (c *Client) check(ctx context.Context, s *server, generate bool) ServerInfo {
	in := ServerInfo{URL: s.url, State: StateDown}
	if s.bad != nil {
		in.Reason = s.bad.Error()
		return in
	}
	ep := endpoint{s.url, s.header}
	if _, reason, refused := health(ctx, c.hc, ep, c.opts.CheckTimeout); reason != "" {
		in.Reason, in.AuthFailed = reason, refused
		return in
	}
	c.mu.Lock()
	known := s.info
	fleetModel := c.model
	c.mu.Unlock()
	if known == nil {
		if reason := readInfo(ctx, c.hc, ep, c.opts.CheckTimeout, &in); reason != "" {
			// Not kept: the info is read again with the next probe.
			in.Reason, in.AuthFailed = reason, true
			return in
		}
		c.mu.Lock()
		saved := in
		s.info = &saved
		// The first server to report a model names the fleet's: the
		// others are checked against it.
		if c.model == "" {
			c.model = in.Model
		}
		fleetModel = c.model
		c.mu.Unlock()
	} else {
		in.Model, in.Version, in.ContextLength = known.Model, known.Version, known.ContextLength
		in.MaxRunningRequests, in.MaxTotalNumTokens, in.MaxReqInputLen = known.MaxRunningRequests, known.MaxTotalNumTokens, known.MaxReqInputLen
	}
	if fleetModel != "" && in.Model != "" && in.Model != fleetModel {
		in.Reason = fmt.Sprintf("serves model %q, the other servers %q", in.Model, fleetModel)
		return in
	}
	if generate {
		model := c.opts.Model
		if model == "" {
			model = fleetModel
		}
		if model == "" {
			model = in.Model
		}
		if model == "" {
			model = "default"
		}
		if reason, refused := c.probeGenerate(ctx, s, newProbeSettings(c.opts.API, model)); reason != "" {
			in.Reason, in.AuthFailed = reason, refused
			return in
		}
	}
	in.State = StateReady
	return in
}

// health reads GET /health. A 404 means the server has no such endpoint
// (older or non-SGLang servers): not a failure. It returns a reason when the
// server is not ready; refused says the reason is a 401 or 403.
func health(ctx context.Context, hc *http.Client, ep endpoint, timeout time.Duration) (has bool, reason string, refused bool) {
	status, body, err := get(ctx, hc, ep, "/health", timeout)
	switch {
	case err != nil && ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded):
		return false, fmt.Sprintf("/health: no answer within %v", timeout), false
	case err != nil:
		return false, "unreachable: " + trimURL(err.Error()), false
	case status == http.StatusOK:
		return true, "", false
	case status == http.StatusNotFound:
		return false, "", false
	case status == http.StatusServiceUnavailable:
		return true, "starting up (/health answers 503)", false
	case authRefused(status):
		return true, fmt.Sprintf("/health answers %d: %s (%s)", status, errorMessage(status, body), authNote(ep.header)), true
	}
	return true, fmt.Sprintf("/health answers %d: %s", status, errorMessage(status, body)), false
}

// readInfo fills model, version and context length from whichever info
// endpoints the server has; none is required. When none gave the model and
// one refused the credentials (401, 403), that refusal is returned (a
// gateway that refuses only some info paths is no refusal).
func readInfo(ctx context.Context, hc *http.Client, ep endpoint, timeout time.Duration, in *ServerInfo) (refused string) {
	ir := infoReader{ctx: ctx, hc: hc, ep: ep, timeout: timeout}
	ir.serverInfo(in)
	if in.Model == "" {
		ir.modelInfo(in)
	}
	if in.Model == "" || in.ContextLength == 0 {
		ir.models(in)
	}
	if in.Model != "" {
		return ""
	}
	return ir.refused
}

// infoReader reads a server's info endpoints; refused is the first
// refusal of the credentials met ("" if none).
type infoReader struct {
	ctx     context.Context
	hc      *http.Client
	ep      endpoint
	timeout time.Duration
	refused string
}

// getJSON decodes the 200 answer of GET path into v; false for any other
// answer.
func (ir *infoReader) getJSON(path string, v any) bool {
	status, body, err := get(ir.ctx, ir.hc, ir.ep, path, ir.timeout)
	if err == nil && authRefused(status) && ir.refused == "" {
		ir.refused = fmt.Sprintf("%s answers %d: %s (%s)", path, status, errorMessage(status, body), authNote(ir.ep.header))
	}
	return err == nil && status == http.StatusOK && json.Unmarshal(body, v) == nil
}

// serverInfoBody is the part of /server_info pipe reads.
type serverInfoBody struct {
	ModelPath          string `json:"model_path"`
	ServedModelName    string `json:"served_model_name"`
	ContextLength      num    `json:"context_length"`
	Version            string `json:"version"`
	MaxRunningRequests num    `json:"max_running_requests"`
	MaxTotalNumTokens  num    `json:"max_total_num_tokens"`
	MaxReqInputLen     num    `json:"max_req_input_len"`
	DPSize             num    `json:"dp_size"`
	// The scheduler's derived limit (SGLang 2026, scheduler.py's
	// get_internal_state): set even when the CLI's
	// max_running_requests is null.
	InternalStates []struct {
		EffectiveMaxRunning num `json:"effective_max_running_requests_per_dp"`
	} `json:"internal_states"`
}

// serverInfo fills in from /server_info, else the deprecated
// /get_server_info.
func (ir *infoReader) serverInfo(in *ServerInfo) {
	var si serverInfoBody
	// The new paths first: the deprecated /get_* log a warning on the
	// server with every call (http_server.py, SGLang 2026).
	for _, p := range []string{"/server_info", "/get_server_info"} {
		if ir.getJSON(p, &si) {
			si.fill(in)
			return
		}
	}
}

// fill copies si into in. The running capacity is the scheduler's
// effective one (per data-parallel rank, times their count) when given,
// else the CLI's; the model is the served name when the path is empty.
func (si *serverInfoBody) fill(in *ServerInfo) {
	in.Model, in.Version, in.ContextLength = si.ModelPath, si.Version, si.ContextLength.int()
	in.MaxRunningRequests, in.MaxTotalNumTokens, in.MaxReqInputLen = si.MaxRunningRequests.int(), si.MaxTotalNumTokens.int(), si.MaxReqInputLen.int()
	if len(si.InternalStates) > 0 {
		if n := si.InternalStates[0].EffectiveMaxRunning.int(); n > 0 {
			in.MaxRunningRequests = n * max(1, si.DPSize.int())
		}
	}
	if in.Model == "" {
		in.Model = si.ServedModelName
	}
}

// modelInfo fills the model from /model_info, else /get_model_info.
func (ir *infoReader) modelInfo(in *ServerInfo) {
	var mi struct {
		ModelPath string `json:"model_path"`
	}
	for _, p := range []string{"/model_info", "/get_model_info"} {
		if ir.getJSON(p, &mi) && mi.ModelPath != "" {
			in.Model = mi.ModelPath
			return
		}
	}
}

// models fills what is still missing of the model and context length
// from the OpenAI API's /v1/models: its first model.
func (ir *infoReader) models(in *ServerInfo) {
	var ms struct {
		Data []struct {
			ID          string `json:"id"`
			MaxModelLen num    `json:"max_model_len"`
		} `json:"data"`
	}
	if !ir.getJSON("/v1/models", &ms) || len(ms.Data) == 0 {
		return
	}
	if in.Model == "" {
		in.Model = ms.Data[0].ID
	}
	if in.ContextLength == 0 {
		in.ContextLength = ms.Data[0].MaxModelLen.int()
	}
}

// newProbeSettings are the settings of the 1-token readiness probe.
func newProbeSettings(api API, model string) *settings {
	return newSettings(api, model, Sampling{MaxOutputTokens: 1})
}

// probeGenerate sends a 1-token generation to s; it returns why it failed,
// and whether that was a refusal of the credentials.
func (c *Client) probeGenerate(ctx context.Context, s *server, st *settings) (reason string, refused bool) {
	req := &Request{Messages: []Message{{Role: "user", Content: "Hi"}}, Text: "Hi"}
	rid := c.ridPrefix + "probe-" + fmt.Sprint(c.ridSeq.Add(1))
	body := st.appendBody(nil, req, rid)
	var resp []byte
	status, held, err := c.postJSON(ctx, nil, s, st.path(), body, c.opts.ProbeTimeout, &resp)
	defer c.budget.give(held)
	switch {
	case errors.Is(err, errRequestTimeout):
		return fmt.Sprintf("1-token probe: no answer within %v", c.opts.ProbeTimeout), false
	case err != nil:
		return "1-token probe: " + trimURL(err.Error()), false
	case authRefused(status):
		return fmt.Sprintf("1-token probe: HTTP %d: %s (%s)", status, errorMessage(status, resp), authNote(s.header)), true
	case status != http.StatusOK:
		return fmt.Sprintf("1-token probe: HTTP %d: %s", status, errorMessage(status, resp)), false
	}
	var r Result
	if err := parseResult(c.opts.API, resp, ThinkOff, &r); err != nil {
		return "1-token probe: " + err.Error(), false
	}
	return "", false
}

// newRequest is a net/http request to base+path carrying header. base has
// no userinfo; the error does not repeat the URL.
func newRequest(ctx context.Context, method, base, path string, header http.Header, body io.Reader) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, method, base+path, body)
	if err != nil {
		return nil, fmt.Errorf("bad server URL %s", Redact(base))
	}
	for k, vs := range header {
		req.Header[textproto.CanonicalMIMEHeaderKey(k)] = vs
	}
	return req, nil
}

func get(ctx context.Context, hc *http.Client, ep endpoint, path string, timeout time.Duration) (int, []byte, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := newRequest(ctx, http.MethodGet, ep.url, path, ep.header, nil)
	if err != nil {
		return 0, nil, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	return resp.StatusCode, body, err
}
