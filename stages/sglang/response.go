package sglang

import (
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

// parseResult decodes a 200 body of api into r. mode says how the output
// begins, for splitting raw text when the server did not.
func parseResult(api API, body []byte, mode ThinkMode, r *Result) error {
	sc := &scanner{b: body}
	if api == APIGenerate {
		if sc.peek() == '[' {
			return fmt.Errorf("bad /generate response: a list (batch) where one result was expected")
		}
		ok := sc.object(func(k []byte) {
			switch string(k) {
			case "text":
				r.Text, _ = sc.str()
			case "output_ids":
				r.OutputIDs = sc.ints()
			case "meta_info":
				sc.object(func(k []byte) {
					switch string(k) {
					case "finish_reason":
						r.FinishReason, r.MatchedStop, r.AbortMessage = sc.finish()
					case "prompt_tokens":
						r.PromptTokens = sc.int()
					case "completion_tokens":
						r.CompletionTokens = sc.int()
					case "cached_tokens":
						r.CachedTokens = sc.int()
					case "reasoning_tokens":
						r.ReasoningTokens = sc.int()
					default:
						sc.metaMember(k, r)
					}
				})
			default:
				sc.skip()
			}
		})
		if err := sc.end(); err != nil || !ok {
			return fmt.Errorf("bad /generate response: %s", describeBody(body, err))
		}
		if r.SpecAcceptLength == 0 && r.SpecVerifyCt > 0 {
			r.SpecAcceptLength = float64(r.CompletionTokens) / float64(r.SpecVerifyCt)
		}
		r.Reasoning, r.Answer = mode.Split(r.Text)
		return nil
	}

	var content, reasoning string
	var hasContent, hasReasoning bool
	choices := 0
	ok := sc.object(func(k []byte) {
		switch string(k) {
		case "choices":
			sc.array(func(i int) {
				choices++
				if i > 0 {
					sc.skip()
					return
				}
				sc.object(func(k []byte) {
					switch string(k) {
					case "message":
						sc.object(func(k []byte) {
							switch string(k) {
							case "content":
								content, hasContent = sc.str()
							case "reasoning_content":
								reasoning, hasReasoning = sc.str()
							default:
								sc.skip()
							}
						})
					case "finish_reason":
						reason, matched, msg := sc.finish()
						r.FinishReason, r.AbortMessage = reason, msg
						if r.MatchedStop == nil {
							r.MatchedStop = matched
						}
					case "matched_stop":
						if m := sc.stop(); m != nil {
							r.MatchedStop = m
						}
					case "meta_info":
						// Per choice, sent with return_meta_info: true
						// (serving_chat.py, SGLang 2026).
						sc.object(func(k []byte) { sc.metaMember(k, r) })
					default:
						sc.skip()
					}
				})
			})
		case "usage":
			sc.object(func(k []byte) {
				switch string(k) {
				case "prompt_tokens":
					r.PromptTokens = sc.int()
				case "completion_tokens":
					r.CompletionTokens = sc.int()
				case "reasoning_tokens":
					if n := sc.int(); n > 0 {
						r.ReasoningTokens = n
					}
				case "prompt_tokens_details":
					sc.object(func(k []byte) {
						if string(k) == "cached_tokens" {
							r.CachedTokens = sc.int()
						} else {
							sc.skip()
						}
					})
				case "completion_tokens_details":
					sc.object(func(k []byte) {
						if string(k) != "reasoning_tokens" {
							sc.skip()
							return
						}
						if n := sc.int(); r.ReasoningTokens == 0 {
							r.ReasoningTokens = n
						}
					})
				default:
					sc.skip()
				}
			})
		case "meta_info":
			// Some SGLang versions attach meta_info-like figures to chat answers.
			sc.object(func(k []byte) { sc.metaMember(k, r) })
		default:
			sc.skip()
		}
	})
	if err := sc.end(); err != nil || !ok {
		return fmt.Errorf("bad chat response: %s", describeBody(body, err))
	}
	if r.SpecAcceptLength == 0 && r.SpecVerifyCt > 0 {
		r.SpecAcceptLength = float64(r.CompletionTokens) / float64(r.SpecVerifyCt)
	}
	if choices == 0 {
		return fmt.Errorf("bad chat response: no choices")
	}
	switch {
	case mode == ThinkForced && strings.TrimSpace(reasoning) == "" && strings.Contains(content, "</think>"):
		// A reasoning parser that does not know the prompt opened the
		// reasoning (older SGLang without force_reasoning) finds no
		// <think> and leaves it all in content: split it here.
		r.Reasoning, r.Answer = SplitForcedThinking(content)
	case hasReasoning:
		r.Reasoning, r.Answer = reasoning, content
	case hasContent && mode != ThinkOff:
		// No reasoning parser on the server: split the raw text here.
		r.Reasoning, r.Answer = mode.Split(content)
	case hasContent:
		r.Answer = content
	}
	return nil
}

// metaMember reads member k of a meta_info object (native, or a chat
// choice's) into r: load, latency and speculative figures; others skipped.
// Names as in SGLang's tokenizer_manager.py (2026), with older aliases.
func (sc *scanner) metaMember(k []byte, r *Result) {
	switch string(k) {
	case "e2e_latency":
		f, _ := sc.num()
		r.ServerLatency = time.Duration(f * float64(time.Second))
	case "spec_verify_ct":
		r.SpecVerifyCt = sc.int()
	case "spec_accept_length":
		r.SpecAcceptLength, _ = sc.num()
	case "spec_accept_rate":
		r.SpecAcceptRate, _ = sc.num()
	case "spec_num_correct_drafts", "spec_accepted_drafts", "spec_accept_token_num":
		if n := sc.int(); r.SpecCorrectDrafts == 0 {
			r.SpecCorrectDrafts = n
		}
	case "spec_num_proposed_drafts", "spec_proposed_drafts", "spec_draft_token_num":
		if n := sc.int(); r.SpecProposedDrafts == 0 {
			r.SpecProposedDrafts = n
		}
	case "num_running_reqs":
		r.RunningReqs, r.LoadReported = sc.int(), true
	case "num_waiting_reqs":
		r.WaitingReqs, r.LoadReported = sc.int(), true
	case "num_retractions", "total_retractions":
		r.Retractions = max(r.Retractions, sc.int())
	default:
		sc.skip()
	}
}

// describeBody says what is wrong with a body for an error message.
func describeBody(body []byte, err error) string {
	b := strings.TrimSpace(string(body))
	if len(b) > 200 {
		b = b[:200] + "…"
	}
	if err != nil {
		return fmt.Sprintf("%v in %q", err, b)
	}
	return fmt.Sprintf("not a JSON object: %q", b)
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
