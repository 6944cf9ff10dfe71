package sglang

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Result is one completion and everything the server said about it.
type Result struct {
	Reasoning string
	Answer    string
	// Text is the raw generated text on the native API (thinking markers
	// included); empty on the chat API.
	Text string
	// FinishReason is "stop", "length", "abort", … as the server said it.
	FinishReason string
	// MatchedStop is the stop token id (int) or string that ended the
	// output, nil when none was reported.
	MatchedStop any
	// AbortMessage is the server's message with finish_reason "abort".
	AbortMessage string

	PromptTokens     int
	CompletionTokens int
	CachedTokens     int
	ReasoningTokens  int
	// OutputIDs are the sampled token ids (native API), including the
	// matched EOS.
	OutputIDs []int

	// Speculative decoding figures; zero when the server has none.
	SpecVerifyCt     int
	SpecAcceptLength float64

	// ServerLatency is the server's own e2e_latency, when reported.
	ServerLatency time.Duration
	// Latency is the wall time of the successful attempt, as the client saw it.
	Latency time.Duration
	// Server is the base URL of the server that answered.
	Server string
	// Attempts counts the requests sent for this result, the successful one
	// included.
	Attempts int
}

// num is a number that may arrive as an integer, a float, a numeric string
// or null: server versions disagree, and a figure must never fail a parse.
type num float64

func (n *num) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] == '"' {
		b = b[1 : len(b)-1]
	}
	if len(b) == 0 || string(b) == "null" {
		return nil
	}
	f, err := strconv.ParseFloat(string(b), 64)
	if err == nil {
		*n = num(f)
	}
	return nil
}

func (n num) int() int { return int(n) }

// nativeResponse is POST /generate's answer; unknown fields are ignored and
// every optional field may be missing.
type nativeResponse struct {
	Text      string `json:"text"`
	OutputIDs []int  `json:"output_ids"`
	MetaInfo  struct {
		FinishReason     json.RawMessage `json:"finish_reason"`
		PromptTokens     num             `json:"prompt_tokens"`
		CompletionTokens num             `json:"completion_tokens"`
		CachedTokens     num             `json:"cached_tokens"`
		ReasoningTokens  num             `json:"reasoning_tokens"`
		E2ELatency       num             `json:"e2e_latency"`
		SpecVerifyCt     num             `json:"spec_verify_ct"`
		SpecAcceptLength num             `json:"spec_accept_length"`
	} `json:"meta_info"`
}

// chatResponse is POST /v1/chat/completions' answer.
type chatResponse struct {
	Choices []struct {
		Message struct {
			Content          *string `json:"content"`
			ReasoningContent *string `json:"reasoning_content"`
		} `json:"message"`
		FinishReason json.RawMessage `json:"finish_reason"`
		MatchedStop  json.RawMessage `json:"matched_stop"`
	} `json:"choices"`
	Usage struct {
		PromptTokens        num `json:"prompt_tokens"`
		CompletionTokens    num `json:"completion_tokens"`
		ReasoningTokens     num `json:"reasoning_tokens"`
		PromptTokensDetails *struct {
			CachedTokens num `json:"cached_tokens"`
		} `json:"prompt_tokens_details"`
		CompletionTokensDetails *struct {
			ReasoningTokens num `json:"reasoning_tokens"`
		} `json:"completion_tokens_details"`
	} `json:"usage"`
	// Some SGLang versions attach meta_info-like figures to chat answers.
	MetaInfo *struct {
		SpecVerifyCt     num `json:"spec_verify_ct"`
		SpecAcceptLength num `json:"spec_accept_length"`
	} `json:"meta_info"`
}

// parseResult decodes a 200 body of api into r. thinking says whether the
// output is expected to start with thinking (enable_thinking), for splitting
// raw text when the server did not.
func parseResult(api API, body []byte, thinking bool, r *Result) error {
	if api == APIGenerate {
		if bytes.HasPrefix(bytes.TrimSpace(body), []byte("[")) {
			return fmt.Errorf("bad /generate response: a list (batch) where one result was expected")
		}
		var resp nativeResponse
		if err := json.Unmarshal(body, &resp); err != nil {
			return fmt.Errorf("bad /generate response: %v", err)
		}
		m := &resp.MetaInfo
		r.Text = resp.Text
		r.OutputIDs = resp.OutputIDs
		r.FinishReason, r.MatchedStop, r.AbortMessage = parseFinish(m.FinishReason, nil)
		r.PromptTokens = m.PromptTokens.int()
		r.CompletionTokens = m.CompletionTokens.int()
		r.CachedTokens = m.CachedTokens.int()
		r.ReasoningTokens = m.ReasoningTokens.int()
		r.ServerLatency = time.Duration(float64(m.E2ELatency) * float64(time.Second))
		r.SpecVerifyCt = m.SpecVerifyCt.int()
		r.SpecAcceptLength = float64(m.SpecAcceptLength)
		if r.SpecAcceptLength == 0 && r.SpecVerifyCt > 0 {
			r.SpecAcceptLength = float64(r.CompletionTokens) / float64(r.SpecVerifyCt)
		}
		if thinking {
			r.Reasoning, r.Answer = SplitThinking(resp.Text)
		} else {
			r.Answer = strings.TrimSpace(resp.Text)
		}
		return nil
	}
	var resp chatResponse
	if err := json.Unmarshal(body, &resp); err != nil {
		return fmt.Errorf("bad chat response: %v", err)
	}
	if len(resp.Choices) == 0 {
		return fmt.Errorf("bad chat response: no choices")
	}
	ch := &resp.Choices[0]
	r.FinishReason, r.MatchedStop, r.AbortMessage = parseFinish(ch.FinishReason, ch.MatchedStop)
	content, reasoning := ch.Message.Content, ch.Message.ReasoningContent
	switch {
	case reasoning != nil:
		r.Reasoning = *reasoning
		if content != nil {
			r.Answer = *content
		}
	case content != nil && thinking:
		// No reasoning parser on the server: split the raw text here.
		r.Reasoning, r.Answer = SplitThinking(*content)
	case content != nil:
		r.Answer = *content
	}
	u := &resp.Usage
	r.PromptTokens = u.PromptTokens.int()
	r.CompletionTokens = u.CompletionTokens.int()
	r.ReasoningTokens = u.ReasoningTokens.int()
	if d := u.PromptTokensDetails; d != nil {
		r.CachedTokens = d.CachedTokens.int()
	}
	if d := u.CompletionTokensDetails; d != nil && r.ReasoningTokens == 0 {
		r.ReasoningTokens = d.ReasoningTokens.int()
	}
	if m := resp.MetaInfo; m != nil {
		r.SpecVerifyCt = m.SpecVerifyCt.int()
		r.SpecAcceptLength = float64(m.SpecAcceptLength)
	}
	return nil
}

// parseFinish reads a finish_reason given as a string or as SGLang's object
// ({"type":"stop","matched":151645}, {"type":"abort","message":…}) and a
// separate matched_stop, if any.
func parseFinish(fr, matched json.RawMessage) (reason string, stop any, abortMsg string) {
	fr = bytes.TrimSpace(fr)
	switch {
	case len(fr) == 0 || string(fr) == "null":
	case fr[0] == '"':
		_ = json.Unmarshal(fr, &reason)
	case fr[0] == '{':
		var obj struct {
			Type    string          `json:"type"`
			Matched json.RawMessage `json:"matched"`
			Message string          `json:"message"`
		}
		_ = json.Unmarshal(fr, &obj)
		reason, abortMsg = obj.Type, obj.Message
		if len(matched) == 0 {
			matched = obj.Matched
		}
	}
	return reason, parseStop(matched), abortMsg
}

// parseStop returns a matched stop as an int (a token id) or a string.
func parseStop(b json.RawMessage) any {
	b = bytes.TrimSpace(b)
	if len(b) == 0 || string(b) == "null" {
		return nil
	}
	if b[0] == '"' {
		var s string
		if json.Unmarshal(b, &s) == nil {
			return s
		}
		return nil
	}
	if n, err := strconv.Atoi(string(b)); err == nil {
		return n
	}
	return nil
}

// SplitThinking splits raw Qwen3-style output "<think>\n…\n</think>\n\nanswer"
// into reasoning and answer, trimmed of surrounding whitespace as SGLang's
// qwen3 reasoning parser does. With no "</think>", output that starts with
// "<think>" is all reasoning (truncated thinking); any other output is all
// answer. Only the first "</think>" splits, so a leaked later one stays in
// the answer for validation to find.
func SplitThinking(text string) (reasoning, answer string) {
	const open, closeTag = "<think>", "</think>"
	t := strings.TrimLeft(text, " \t\r\n")
	if i := strings.Index(t, closeTag); i >= 0 {
		r := strings.TrimPrefix(t[:i], open)
		return strings.TrimSpace(r), strings.TrimSpace(t[i+len(closeTag):])
	}
	if strings.HasPrefix(t, open) {
		return strings.TrimSpace(t[len(open):]), ""
	}
	return "", strings.TrimSpace(text)
}
