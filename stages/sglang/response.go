package sglang

import (
	"strconv"
	"strings"
	"time"

	"github.com/pipe-dev/pipe/pipeline/record"
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
	// ToolCalls are the calls the answer makes as the chat API parsed
	// them (choices[0].message.tool_calls, sent by a server started
	// with --tool-call-parser for a request with tools): the server's
	// ids, types and names, and the arguments as the raw JSON it sent
	// (a JSON string, e.g. "{\"city\": \"Paris\"}"). Answer is then
	// the text outside the calls. Nil on the native API (the calls are
	// Qwen3's <tool_call> blocks in Text and Answer) and when the server
	// parsed none. A server whose parser dropped every call (not JSON,
	// or an undeclared tool) answers finish_reason "tool_calls" with
	// none: SGLang sets it whenever the text has a call's opening tag.
	ToolCalls []record.ToolCall

	PromptTokens     int
	CompletionTokens int
	CachedTokens     int
	ReasoningTokens  int
	// OutputIDs are the sampled token ids, including the matched EOS:
	// /generate's output_ids, or on the chat API choices[0].token_ids
	// (SGLang 2026-07 and later; nil from a server that sends none).
	OutputIDs []int
	// PromptIDs are the prompt's token ids as the server rendered and
	// tokenized it: choices[0].prompt_token_ids on the chat API (SGLang
	// 2026-07 and later), nil when the server sends none. The native
	// API's prompt is the caller's own.
	PromptIDs []int

	// Speculative decoding figures; zero when the server has none.
	// SpecAcceptLength is completion_tokens / spec_verify_ct (SGLang's
	// tokenizer_manager.py); SpecAcceptRate and the draft counts are the
	// newer spec_accept_rate, spec_num_correct_drafts and
	// spec_num_proposed_drafts (older servers: spec_accepted_drafts /
	// spec_proposed_drafts, or spec_accept_token_num / spec_draft_token_num).
	SpecVerifyCt       int
	SpecAcceptLength   float64
	SpecAcceptRate     float64
	SpecCorrectDrafts  int
	SpecProposedDrafts int

	// RunningReqs and WaitingReqs are the server's load when it answered
	// (meta_info num_running_reqs / num_waiting_reqs, SGLang 2026);
	// LoadReported says the server sent them.
	RunningReqs, WaitingReqs int
	LoadReported             bool
	// Retractions is how often the server preempted the request for lack
	// of KV cache (meta_info num_retractions; total_retractions in the
	// 2026-03 docs build).
	Retractions int

	// ServerLatency is the server's own e2e_latency, when reported.
	ServerLatency time.Duration
	// Latency is the wall time of the successful attempt, as the client saw it.
	Latency time.Duration
	// Server is the base URL of the server that answered.
	Server string
	// Attempts counts the requests sent for this result, the successful one
	// included.
	Attempts int

	// dropped names the figures the server gave but the parse read as
	// absent (meta.dropped).
	dropped []string
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

// ThinkMode says how a raw output begins, for splitting its reasoning from
// its answer when the server did not.
type ThinkMode int

const (
	// ThinkOff: no thinking; the output is the answer.
	ThinkOff ThinkMode = iota
	// ThinkOn: the model opens its reasoning itself with <think> (Qwen3's
	// hybrid template, enable_thinking).
	ThinkOn
	// ThinkForced: the prompt opened the reasoning (a template whose
	// generation prompt ends in "<think>\n"); the output starts inside it
	// and never has <think>.
	ThinkForced
)

// Split splits raw output text by m.
func (m ThinkMode) Split(text string) (reasoning, answer string) {
	switch m {
	case ThinkOn:
		return SplitThinking(text)
	case ThinkForced:
		return SplitForcedThinking(text)
	}
	return "", strings.TrimSpace(text)
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

// SplitForcedThinking splits the raw output of a forced-thinking prompt
// (the generation prompt ended in "<think>\n"), "…\n</think>\n\nanswer",
// into reasoning and answer, trimmed: the output starts inside the
// reasoning, so everything before the first "</think>" is reasoning and,
// with no "</think>" (a truncated output), all of it is. A "<think>" the
// model wrote stays in the reasoning for validation to find (a repeated
// marker), as SGLang's parser with force_reasoning keeps it.
func SplitForcedThinking(text string) (reasoning, answer string) {
	if i := strings.Index(text, "</think>"); i >= 0 {
		return strings.TrimSpace(text[:i]), strings.TrimSpace(text[i+len("</think>"):])
	}
	return strings.TrimSpace(text), ""
}
