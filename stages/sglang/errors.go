package sglang

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
)

// Error classes: the counters of the live figures and the retry decision.
// HTTP statuses are classed "http_NNN".
const (
	ClassTransport   = "transport"    // connection refused, reset, torn body: retried
	ClassTimeout     = "timeout"      // request_timeout passed: retried
	ClassBadResponse = "bad_response" // a 200 whose body is not a result: retried
	ClassAbort       = "abort"        // finish_reason "abort" not caused by the prompt: retried
	ClassEjected     = "ejected"      // in flight on a server the breaker ejected: re-sent
	// ClassInvalidRequest is a request refused before it was sent (tools
	// that are not a JSON array, tool-call arguments that are not JSON):
	// BadRequest, never retried.
	ClassInvalidRequest = "invalid_request"
)

// Error is a failed attempt. Its Message is the server's own words when it
// gave any.
type Error struct {
	Class   string
	Status  int    // HTTP status; 0 when there was no response
	Message string // the server's message, or the transport error
	Server  string // base URL
}

func (e *Error) Error() string {
	if e.Server == "" {
		return fmt.Sprintf("%s: %s", e.Class, e.Message)
	}
	if e.Status != 0 {
		return fmt.Sprintf("%s: HTTP %d: %s", e.Server, e.Status, e.Message)
	}
	return fmt.Sprintf("%s: %s: %s", e.Server, e.Class, e.Message)
}

// Retryable reports whether another attempt may succeed: transport errors,
// timeouts, torn or aborted outputs and 408/429/5xx. A 400 never is: the
// request itself is wrong (prompt too long, duplicate rid, bad field).
func (e *Error) Retryable() bool {
	if e.Class == ClassInvalidRequest {
		return false
	}
	switch e.Status {
	case 0:
		return true
	case http.StatusRequestTimeout, http.StatusTooManyRequests:
		return true
	}
	return e.Status >= 500
}

// ServerFault reports whether the answer says the server, not the request,
// is at fault: a 4xx other than the request-specific ones (400, 413, 422)
// and the retryable 408/429, e.g. 401, 403, 404, 409. The server is
// ejected at once and the request is re-sent elsewhere as a new attempt.
func (e *Error) ServerFault() bool {
	return e.Status >= 400 && e.Status < 500 && !e.Retryable() && !e.BadRequest()
}

// BadRequest reports whether the server refused the request as such (400,
// or a prompt-caused abort): the record is rejected, not retried.
func (e *Error) BadRequest() bool {
	return e.Class == "http_400" || e.Class == "http_413" || e.Class == "http_422" || e.Class == ClassRejectedAbort ||
		e.Class == ClassInvalidRequest
}

// ClassRejectedAbort is a 200 with finish_reason "abort" whose message says
// the prompt does not fit: older servers answer an over-long prompt so.
const ClassRejectedAbort = "abort_prompt"

// RejectReason is the reason code a record refused by the server is rejected
// with: "prompt_too_long" when the message says so, else "bad_request".
func (e *Error) RejectReason() string {
	if promptTooLong(e.Message) {
		return "prompt_too_long"
	}
	return "bad_request"
}

func promptTooLong(msg string) bool {
	m := strings.ToLower(msg)
	for _, s := range []string{"context length", "context_length", "longer than", "too long", "maximum context", "exceeds"} {
		if strings.Contains(m, s) {
			return true
		}
	}
	return false
}

// statusError builds the Error of a non-200 answer.
func statusError(server string, status int, body []byte) *Error {
	return &Error{Class: "http_" + strconv.Itoa(status), Status: status, Message: errorMessage(status, body), Server: server}
}

// errorMessage finds the message in the body shapes SGLang and its
// neighbours use: {"error":{"message":…}}, {"error":"…"},
// {"object":"error","message":…}, {"detail":…}; else the body's text.
func errorMessage(status int, body []byte) string {
	if status >= 300 && status < 400 {
		return "a redirect, not followed (pipe follows none: give the server's own URL)"
	}
	var v struct {
		Error   json.RawMessage `json:"error"`
		Message json.RawMessage `json:"message"`
		Detail  json.RawMessage `json:"detail"`
	}
	if json.Unmarshal(body, &v) == nil {
		if msg := messageOf(v.Error); msg != "" {
			return msg
		}
		if msg := messageOf(v.Message); msg != "" {
			return msg
		}
		if msg := messageOf(v.Detail); msg != "" {
			return msg
		}
	}
	text := strings.TrimSpace(string(body))
	if len(text) > 500 {
		text = text[:500] + "…"
	}
	if text == "" {
		text = http.StatusText(status)
	}
	return text
}

// messageOf reads a message given as a string, an object with "message" or
// "msg", or anything else (shown as compact JSON).
func messageOf(raw json.RawMessage) string {
	if len(raw) == 0 || string(raw) == "null" {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var obj struct {
		Message string `json:"message"`
		Msg     string `json:"msg"`
	}
	if json.Unmarshal(raw, &obj) == nil {
		if obj.Message != "" {
			return obj.Message
		}
		if obj.Msg != "" {
			return obj.Msg
		}
	}
	return string(raw)
}

// transportError classes an error from sending or reading a request. sctx
// is the server's admission context (cancelled with errEjected when the
// breaker ejects it); the caller has already checked that its own context
// is alive.
func transportError(server string, err error, sctx context.Context) *Error {
	switch {
	case errors.Is(context.Cause(sctx), errEjected):
		return &Error{Class: ClassEjected, Message: "server ejected while the request was in flight", Server: server}
	case errors.Is(err, errRequestTimeout):
		return &Error{Class: ClassTimeout, Message: "no answer within request_timeout", Server: server}
	}
	return &Error{Class: ClassTransport, Message: trimURL(err.Error()), Server: server}
}

// trimURL shortens url.Error's `Post "http://…/generate": dial tcp …` to
// the part that says what happened.
func trimURL(s string) string {
	if strings.HasPrefix(s, "Post \"") || strings.HasPrefix(s, "Get \"") {
		if j := strings.Index(s, `": `); j >= 0 {
			return s[j+3:]
		}
	}
	return s
}

var errEjected = errors.New("server ejected")
