package sglang

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
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
	State         string // StateReady or StateDown
	Reason        string // why it is down
}

// Probe checks servers without generating anything: health, then server
// and model info. It is what `pipe run --dry-run` shows. A server is
// StateReady when its health endpoint answers 200 (or it has none, like
// non-SGLang servers, and its info endpoints answer).
func Probe(ctx context.Context, urls []string, timeout time.Duration) []ServerInfo {
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	hc := &http.Client{Transport: &http.Transport{Proxy: nil, DisableCompression: true}}
	defer hc.CloseIdleConnections()
	out := make([]ServerInfo, len(urls))
	var wg sync.WaitGroup
	for i, u := range urls {
		wg.Go(func() {
			u = strings.TrimRight(u, "/")
			in := ServerInfo{URL: u, State: StateReady}
			hasHealth, reason := health(ctx, hc, u, timeout)
			if reason != "" {
				in.State, in.Reason = StateDown, reason
				out[i] = in
				return
			}
			readInfo(ctx, hc, u, timeout, &in)
			if !hasHealth && in.Model == "" {
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
	if _, reason := health(ctx, c.hc, s.url, c.opts.ProbeTimeout); reason != "" {
		in.Reason = reason
		return in
	}
	c.mu.Lock()
	known := s.info
	fleetModel := c.model
	c.mu.Unlock()
	if known == nil {
		readInfo(ctx, c.hc, s.url, c.opts.ProbeTimeout, &in)
		c.mu.Lock()
		saved := in
		s.info = &saved
		c.mu.Unlock()
	} else {
		in.Model, in.Version, in.ContextLength = known.Model, known.Version, known.ContextLength
	}
	if fleetModel != "" && in.Model != "" && in.Model != fleetModel {
		in.Reason = fmt.Sprintf("serves model %q, the other servers %q", in.Model, fleetModel)
		return in
	}
	if generate && c.probeSt != nil {
		if reason := c.probeGenerate(ctx, s.url); reason != "" {
			in.Reason = reason
			return in
		}
	}
	in.State = StateReady
	return in
}

// health reads GET /health. A 404 means the server has no such endpoint
// (older or non-SGLang servers): not a failure. It returns a reason when the
// server is not ready.
func health(ctx context.Context, hc *http.Client, url string, timeout time.Duration) (has bool, reason string) {
	status, body, err := get(ctx, hc, url+"/health", timeout)
	switch {
	case err != nil:
		return false, "unreachable: " + trimURL(err.Error())
	case status == http.StatusOK:
		return true, ""
	case status == http.StatusNotFound:
		return false, ""
	case status == http.StatusServiceUnavailable:
		return true, "starting up (/health answers 503)"
	}
	return true, fmt.Sprintf("/health answers %d: %s", status, errorMessage(status, body))
}

// readInfo fills model, version and context length from whichever info
// endpoints the server has; none is required.
func readInfo(ctx context.Context, hc *http.Client, url string, timeout time.Duration, in *ServerInfo) {
	var si struct {
		ModelPath       string `json:"model_path"`
		ServedModelName string `json:"served_model_name"`
		ContextLength   num    `json:"context_length"`
		Version         string `json:"version"`
	}
	for _, p := range []string{"/get_server_info", "/server_info"} {
		if getJSON(ctx, hc, url+p, timeout, &si) {
			in.Model, in.Version, in.ContextLength = si.ModelPath, si.Version, si.ContextLength.int()
			if in.Model == "" {
				in.Model = si.ServedModelName
			}
			break
		}
	}
	if in.Model == "" {
		var mi struct {
			ModelPath string `json:"model_path"`
		}
		for _, p := range []string{"/get_model_info", "/model_info"} {
			if getJSON(ctx, hc, url+p, timeout, &mi) && mi.ModelPath != "" {
				in.Model = mi.ModelPath
				break
			}
		}
	}
	if in.Model == "" || in.ContextLength == 0 {
		var ms struct {
			Data []struct {
				ID          string `json:"id"`
				MaxModelLen num    `json:"max_model_len"`
			} `json:"data"`
		}
		if getJSON(ctx, hc, url+"/v1/models", timeout, &ms) && len(ms.Data) > 0 {
			if in.Model == "" {
				in.Model = ms.Data[0].ID
			}
			if in.ContextLength == 0 {
				in.ContextLength = ms.Data[0].MaxModelLen.int()
			}
		}
	}
}

// newProbeSettings are the settings of the 1-token readiness probe.
func newProbeSettings(api API, model string) *settings {
	return newSettings(api, model, Sampling{MaxOutputTokens: 1})
}

// probeGenerate sends a 1-token generation; it returns why it failed.
func (c *Client) probeGenerate(ctx context.Context, url string) string {
	ctx, cancel := context.WithTimeout(ctx, c.opts.ProbeTimeout)
	defer cancel()
	req := &Request{Messages: []Message{{Role: "user", Content: "Hi"}}, Text: "Hi"}
	rid := c.ridPrefix + "probe-" + fmt.Sprint(c.ridSeq.Add(1))
	body := c.probeSt.appendBody(nil, req, rid)
	var buf bytes.Buffer
	status, resp, err := c.post(ctx, url+c.probeSt.path(), body, &buf)
	switch {
	case err != nil && ctx.Err() == context.DeadlineExceeded:
		return fmt.Sprintf("1-token probe: no answer within %v", c.opts.ProbeTimeout)
	case err != nil:
		return "1-token probe: " + trimURL(err.Error())
	case status != http.StatusOK:
		return fmt.Sprintf("1-token probe: HTTP %d: %s", status, errorMessage(status, resp))
	}
	var r Result
	if err := parseResult(c.opts.API, resp, false, &r); err != nil {
		return "1-token probe: " + err.Error()
	}
	return ""
}

func get(ctx context.Context, hc *http.Client, url string, timeout time.Duration) (int, []byte, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
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

func getJSON(ctx context.Context, hc *http.Client, url string, timeout time.Duration, v any) bool {
	status, body, err := get(ctx, hc, url, timeout)
	return err == nil && status == http.StatusOK && json.Unmarshal(body, v) == nil
}
