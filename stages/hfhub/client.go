// Package hfhub publishes files to a dataset repository of the Hugging
// Face Hub over its HTTP API, as huggingface_hub's sources do it
// (src/huggingface_hub/_commit_api.py, lfs.py, hf_api.py at ee0a451):
// preupload to learn which files go by LFS, the LFS batch API and its
// basic or multipart uploads for their content, and an NDJSON commit that
// names its parent commit. No Go client of the Hub uploads, so this is
// written from those sources; a test server in internal/testrig/hubtest
// speaks the same protocol.
//
// Requests are not retried here: the caller waits out outages
// (internal/outage) with Transient and Asked, and a commit whose answer
// was lost is found by reading the branch, not by committing twice.
package hfhub

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/pipe-dev/pipe/internal/outage"
	"github.com/pipe-dev/pipe/internal/termsafe"
)

// Client talks to one dataset repository.
type Client struct {
	endpoint string // "https://huggingface.co", no trailing slash
	repo     string // "namespace/name"
	token    string
	http     *http.Client
}

// DefaultEndpoint is the Hub; HF_ENDPOINT names another, as for
// huggingface_hub (constants.py).
const DefaultEndpoint = "https://huggingface.co"

// repoID is a Hub repository id: namespace/name, each 1 to 96 of letters,
// digits, "-", "_" and ".", not starting or ending with "-" or ".", no "--"
// or ".." (huggingface_hub utils/_validators.py, validate_repo_id).
var repoID = regexp.MustCompile(`^[A-Za-z0-9_]([A-Za-z0-9_.-]{0,94}[A-Za-z0-9_])?/[A-Za-z0-9_]([A-Za-z0-9_.-]{0,94}[A-Za-z0-9_])?$`)

// CheckRepo says what is wrong with a repository id, or nil.
func CheckRepo(id string) error {
	if !repoID.MatchString(id) || strings.Contains(id, "--") || strings.Contains(id, "..") {
		return fmt.Errorf("%q is not a Hub repository id: want NAMESPACE/NAME, each of letters, digits, -, _ and . (not starting or ending with - or ., no -- or ..), e.g. my-org/regen-qwen3", id)
	}
	return nil
}

// CheckRevision says what is wrong with a branch name, or nil: a git ref
// name pipe can push to (no spaces, control characters, "..", "~^:?*[\\").
func CheckRevision(rev string) error {
	if rev == "" || strings.ContainsAny(rev, " ~^:?*[\\") || strings.Contains(rev, "..") || strings.HasPrefix(rev, "/") ||
		strings.HasSuffix(rev, "/") || strings.HasSuffix(rev, ".lock") || strings.IndexFunc(rev, func(r rune) bool { return r < 0x20 || r == 0x7f }) >= 0 {
		return fmt.Errorf("%q is not a branch name: no spaces, control characters, .., ~ ^ : ? * [ \\, no leading or trailing /", rev)
	}
	return nil
}

// New returns a client of repo at endpoint, authenticated by token.
func New(endpoint, repo, token string, hc *http.Client) (*Client, error) {
	if err := CheckRepo(repo); err != nil {
		return nil, err
	}
	u, err := url.Parse(endpoint)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return nil, fmt.Errorf("endpoint %q: want an http(s) URL such as %s", endpoint, DefaultEndpoint)
	}
	if hc == nil {
		hc = &http.Client{Timeout: 10 * time.Minute}
	}
	return &Client{endpoint: strings.TrimRight(endpoint, "/"), repo: repo, token: token, http: hc}, nil
}

// Repo is the repository id.
func (c *Client) Repo() string { return c.repo }

// URL is the repository's page.
func (c *Client) URL() string { return c.endpoint + "/datasets/" + c.repo }

// Error is the Hub answering a request with an error status.
type Error struct {
	Op      string // what was asked: "commit", "preupload", ...
	Status  int
	Code    string // X-Error-Code: RepoNotFound, RevisionNotFound, ...
	Message string // the Hub's message, terminal-safe and cut
	// Wait is what the Hub asked to wait before asking again (RateLimit's
	// t, else Retry-After, each plus a second as huggingface_hub adds).
	Wait time.Duration
}

func (e *Error) Error() string {
	s := fmt.Sprintf("the Hub answered %s with %d %s", e.Op, e.Status, http.StatusText(e.Status))
	if e.Code != "" {
		s += " (" + e.Code + ")"
	}
	if e.Message != "" {
		s += ": " + e.Message
	}
	return s
}

// Transient reports whether err can pass by itself: no answer at all, or
// an answer huggingface_hub retries (utils/_http.py,
// _http_backoff_base: 408, 429, 500, 502, 503, 504).
func Transient(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) {
		return false
	}
	var he *Error
	if errors.As(err, &he) {
		switch he.Status {
		case 408, 429, 500, 502, 503, 504:
			return true
		}
		return false
	}
	return outage.NoAnswer(err)
}

// Asked is the wait the Hub asked for with err, 0 if none.
func Asked(err error) time.Duration {
	var he *Error
	if errors.As(err, &he) {
		return he.Wait
	}
	return 0
}

// Refused reports whether err is the Hub refusing for good: the token,
// the permissions, no such repository (a 4xx it does not ask to retry).
func Refused(err error) bool {
	var he *Error
	return errors.As(err, &he) && !Transient(err) && he.Status >= 400 && he.Status < 500
}

// request is one HTTP exchange: JSON or other body out, JSON in.
type request struct {
	op, method, url string
	body            io.Reader
	size            int64 // body's length when known (-1: unknown)
	contentType     string
	accept          string
	auth            bool
	out             any // decoded from a 2xx JSON answer (nil: discarded)
}

// maxAnswer bounds what is read of an answer: the Hub's are small, and a
// server that is not the Hub is not trusted with memory.
const maxAnswer = 16 << 20

func (c *Client) do(ctx context.Context, r request) (http.Header, error) {
	req, err := http.NewRequestWithContext(ctx, r.method, r.url, r.body)
	if err != nil {
		return nil, err
	}
	if r.size >= 0 && r.body != nil {
		req.ContentLength = r.size
	}
	if r.contentType != "" {
		req.Header.Set("Content-Type", r.contentType)
	}
	if r.accept != "" {
		req.Header.Set("Accept", r.accept)
	}
	if r.auth {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	req.Header.Set("User-Agent", "pipe")
	resp, err := c.http.Do(req)
	if err != nil {
		// url.Error names the URL, which holds no token (it goes in a header).
		return nil, fmt.Errorf("%s: %w", r.op, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
	if err != nil {
		return nil, fmt.Errorf("%s: reading the answer: %w", r.op, err)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return nil, answerError(r.op, resp, body)
	}
	if r.out != nil {
		if err := json.Unmarshal(body, r.out); err != nil {
			return nil, fmt.Errorf("%s: the answer is not the JSON expected: %v", r.op, err)
		}
	}
	return resp.Header, nil
}

// answerError is the Error of a non-2xx answer (utils/_http.py,
// hf_raise_for_status: X-Error-Code, X-Error-Message, {"error": ...} or
// {"errors": [{"message"}]}).
func answerError(op string, resp *http.Response, body []byte) *Error {
	e := &Error{Op: op, Status: resp.StatusCode, Code: termsafe.Line(termsafe.Cut(resp.Header.Get("X-Error-Code"), 60))}
	msg := resp.Header.Get("X-Error-Message")
	var j struct {
		Error  any `json:"error"`
		Errors []struct {
			Message string `json:"message"`
		} `json:"errors"`
	}
	if msg == "" && json.Unmarshal(body, &j) == nil {
		switch v := j.Error.(type) {
		case string:
			msg = v
		case []any:
			parts := make([]string, 0, len(v))
			for _, p := range v {
				parts = append(parts, fmt.Sprint(p))
			}
			msg = strings.Join(parts, "; ")
		}
		if msg == "" && len(j.Errors) > 0 {
			msg = j.Errors[0].Message
		}
	}
	e.Message = termsafe.Line(termsafe.Cut(strings.TrimSpace(msg), 300))
	e.Wait = askedWait(resp.Header)
	return e
}

// rateLimitT is RateLimit's t: `"api";r=0;t=55`.
var rateLimitT = regexp.MustCompile(`(?:^|;)\s*t=(\d+)`)

// askedWait is the wait an answer asks for: RateLimit's t, else an
// integer Retry-After, plus a second each (utils/_http.py).
func askedWait(h http.Header) time.Duration {
	if m := rateLimitT.FindStringSubmatch(h.Get("RateLimit")); m != nil {
		if n, err := strconv.Atoi(m[1]); err == nil && n < 86400 {
			return time.Duration(n+1) * time.Second
		}
	}
	if n, err := strconv.Atoi(strings.TrimSpace(h.Get("Retry-After"))); err == nil && n >= 0 && n < 86400 {
		return time.Duration(n+1) * time.Second
	}
	return 0
}

// api is the URL of an API path of the repository: /api/datasets/REPO/...
func (c *Client) api(parts ...string) string {
	return c.endpoint + "/api/datasets/" + c.repo + "/" + strings.Join(parts, "/")
}

// jsonBody is v as a request body.
func jsonBody(v any) (io.Reader, int64) {
	b, _ := json.Marshal(v)
	return bytes.NewReader(b), int64(len(b))
}
