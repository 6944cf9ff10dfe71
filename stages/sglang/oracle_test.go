package sglang

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// The response parser's oracle: the same reading of the protocol done with
// encoding/json into structs, as the first version of the client did. The
// go-json-experiment-based parseResult (answer.go) must agree with it on every body.

// stdNativeResponse is POST /generate's answer; unknown fields are ignored and
// every optional field may be missing.
type stdNativeResponse struct {
	Text      string `json:"text"`
	OutputIDs []int  `json:"output_ids"`
	MetaInfo  struct {
		FinishReason     json.RawMessage `json:"finish_reason"`
		PromptTokens     num             `json:"prompt_tokens"`
		CompletionTokens num             `json:"completion_tokens"`
		CachedTokens     num             `json:"cached_tokens"`
		ReasoningTokens  num             `json:"reasoning_tokens"`
		stdMeta
	} `json:"meta_info"`
}

// stdMeta are the meta_info members both APIs share (SGLang 2026
// tokenizer_manager.py), the older aliases of the draft counts included.
type stdMeta struct {
	E2ELatency            num  `json:"e2e_latency"`
	SpecVerifyCt          num  `json:"spec_verify_ct"`
	SpecAcceptLength      num  `json:"spec_accept_length"`
	SpecAcceptRate        num  `json:"spec_accept_rate"`
	SpecNumCorrectDrafts  num  `json:"spec_num_correct_drafts"`
	SpecNumProposedDrafts num  `json:"spec_num_proposed_drafts"`
	SpecAcceptedDrafts    num  `json:"spec_accepted_drafts"`
	SpecProposedDrafts    num  `json:"spec_proposed_drafts"`
	SpecAcceptTokenNum    num  `json:"spec_accept_token_num"`
	SpecDraftTokenNum     num  `json:"spec_draft_token_num"`
	NumRunningReqs        *num `json:"num_running_reqs"`
	NumWaitingReqs        *num `json:"num_waiting_reqs"`
	NumRetractions        num  `json:"num_retractions"`
	TotalRetractions      num  `json:"total_retractions"`
}

// apply sets r's meta_info figures from m.
func (m *stdMeta) apply(r *Result) {
	first := func(ns ...num) int {
		for _, n := range ns {
			if n != 0 {
				return n.int()
			}
		}
		return 0
	}
	if m.E2ELatency != 0 {
		r.ServerLatency = time.Duration(float64(m.E2ELatency) * float64(time.Second))
	}
	if m.SpecVerifyCt != 0 {
		r.SpecVerifyCt = m.SpecVerifyCt.int()
	}
	if m.SpecAcceptLength != 0 {
		r.SpecAcceptLength = float64(m.SpecAcceptLength)
	}
	if m.SpecAcceptRate != 0 {
		r.SpecAcceptRate = float64(m.SpecAcceptRate)
	}
	if n := first(m.SpecNumCorrectDrafts, m.SpecAcceptedDrafts, m.SpecAcceptTokenNum); n != 0 {
		r.SpecCorrectDrafts = n
	}
	if n := first(m.SpecNumProposedDrafts, m.SpecProposedDrafts, m.SpecDraftTokenNum); n != 0 {
		r.SpecProposedDrafts = n
	}
	if m.NumRunningReqs != nil {
		r.RunningReqs, r.LoadReported = m.NumRunningReqs.int(), true
	}
	if m.NumWaitingReqs != nil {
		r.WaitingReqs, r.LoadReported = m.NumWaitingReqs.int(), true
	}
	r.Retractions = max(m.NumRetractions.int(), m.TotalRetractions.int())
}

// stdChatResponse is POST /v1/chat/completions' answer.
type stdChatResponse struct {
	Choices []struct {
		Message struct {
			Content          *string `json:"content"`
			ReasoningContent *string `json:"reasoning_content"`
		} `json:"message"`
		FinishReason     json.RawMessage `json:"finish_reason"`
		MatchedStop      json.RawMessage `json:"matched_stop"`
		MetaInfo         *stdMeta        `json:"meta_info"`
		TokenIDs         []int           `json:"token_ids"`
		ResponseTokenIDs []int           `json:"response_token_ids"`
		PromptTokenIDs   []int           `json:"prompt_token_ids"`
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
	MetaInfo *stdMeta `json:"meta_info"`
}

// parseResult decodes a 200 body of api into r. thinking says whether the
// output is expected to start with thinking (enable_thinking), for splitting
// raw text when the server did not.
func stdParseResult(api API, body []byte, thinking bool, r *Result) error {
	if api == APIGenerate {
		if bytes.HasPrefix(bytes.TrimSpace(body), []byte("[")) {
			return fmt.Errorf("bad /generate response: a list (batch) where one result was expected")
		}
		var resp stdNativeResponse
		if err := json.Unmarshal(body, &resp); err != nil {
			return fmt.Errorf("bad /generate response: %v", err)
		}
		m := &resp.MetaInfo
		r.Text = resp.Text
		r.OutputIDs = resp.OutputIDs
		r.FinishReason, r.MatchedStop, r.AbortMessage = stdParseFinish(m.FinishReason, nil)
		r.PromptTokens = m.PromptTokens.int()
		r.CompletionTokens = m.CompletionTokens.int()
		r.CachedTokens = m.CachedTokens.int()
		r.ReasoningTokens = m.ReasoningTokens.int()
		m.stdMeta.apply(r)
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
	var resp stdChatResponse
	if err := json.Unmarshal(body, &resp); err != nil {
		return fmt.Errorf("bad chat response: %v", err)
	}
	if len(resp.Choices) == 0 {
		return fmt.Errorf("bad chat response: no choices")
	}
	ch := &resp.Choices[0]
	r.FinishReason, r.MatchedStop, r.AbortMessage = stdParseFinish(ch.FinishReason, ch.MatchedStop)
	r.OutputIDs, r.PromptIDs = ch.TokenIDs, ch.PromptTokenIDs
	if len(r.OutputIDs) == 0 {
		r.OutputIDs = ch.ResponseTokenIDs
	}
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
	if m := ch.MetaInfo; m != nil {
		m.apply(r)
	}
	if m := resp.MetaInfo; m != nil {
		m.apply(r)
	}
	if r.SpecAcceptLength == 0 && r.SpecVerifyCt > 0 {
		r.SpecAcceptLength = float64(r.CompletionTokens) / float64(r.SpecVerifyCt)
	}
	return nil
}

// parseFinish reads a finish_reason given as a string or as SGLang's object
// ({"type":"stop","matched":151645}, {"type":"abort","message":…}) and a
// separate matched_stop, if any.
func stdParseFinish(fr, matched json.RawMessage) (reason string, stop any, abortMsg string) {
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
	return reason, stdParseStop(matched), abortMsg
}

// parseStop returns a matched stop as an int (a token id) or a string.
func stdParseStop(b json.RawMessage) any {
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
