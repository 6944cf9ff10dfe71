package sglang

import (
	"testing"
	"time"
)

func TestParseNative(t *testing.T) {
	for _, tc := range []struct {
		name, body string
		thinking   bool
		want       Result
	}{
		{"stop with object finish_reason", `{"text":"<think>\nhmm\n</think>\n\nYes.","output_ids":[1,2,151645],"meta_info":{"id":"x","finish_reason":{"type":"stop","matched":151645},"prompt_tokens":12,"completion_tokens":3,"cached_tokens":4,"e2e_latency":1.5,"spec_verify_ct":2,"spec_accept_length":1.5,"unknown":{"a":1}}}`, true,
			Result{Text: "<think>\nhmm\n</think>\n\nYes.", Reasoning: "hmm", Answer: "Yes.", FinishReason: "stop", MatchedStop: 151645, PromptTokens: 12, CompletionTokens: 3, CachedTokens: 4,
				OutputIDs: []int{1, 2, 151645}, SpecVerifyCt: 2, SpecAcceptLength: 1.5, ServerLatency: 1500 * time.Millisecond}},
		{"truncated thinking, string stop, float counts, old field names", `{"text":"<think>\nstill thinking","meta_info":{"finish_reason":{"type":"length","length":4096},"prompt_tokens":12.0,"completion_tokens":"4096","total_retractions":1}}`, true,
			Result{Text: "<think>\nstill thinking", Reasoning: "still thinking", FinishReason: "length", PromptTokens: 12, CompletionTokens: 4096}},
		{"accept length derived from verify count", `{"text":"a","meta_info":{"finish_reason":"stop","completion_tokens":9,"spec_verify_ct":3}}`, false,
			Result{Text: "a", Answer: "a", FinishReason: "stop", CompletionTokens: 9, SpecVerifyCt: 3, SpecAcceptLength: 3}},
		{"abort with message", `{"text":"","meta_info":{"finish_reason":{"type":"abort","message":"The input (50000 tokens) is longer than the model's context length (40960 tokens)."}}}`, true,
			Result{FinishReason: "abort", AbortMessage: "The input (50000 tokens) is longer than the model's context length (40960 tokens)."}},
		{"missing meta_info", `{"text":"just text"}`, false, Result{Text: "just text", Answer: "just text"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got Result
			if err := parseResult(APIGenerate, []byte(tc.body), modeOf(tc.thinking), &got); err != nil {
				t.Fatal(err)
			}
			assertResult(t, got, tc.want)
		})
	}
	var r Result
	if err := parseResult(APIGenerate, []byte(`[{"text":"a"}]`), ThinkOff, &r); err == nil {
		t.Error("a batch answer parsed as one result")
	}
	if err := parseResult(APIGenerate, []byte(`{"text":"a", "meta`), ThinkOff, &r); err == nil {
		t.Error("a torn body parsed")
	}
}

func TestParseChat(t *testing.T) {
	for _, tc := range []struct {
		name, body string
		thinking   bool
		want       Result
	}{
		{"reasoning parser on", `{"id":"c","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"Four.","reasoning_content":"2+2","tool_calls":null},"finish_reason":"stop","matched_stop":151645}],"usage":{"prompt_tokens":10,"completion_tokens":7,"total_tokens":17,"prompt_tokens_details":{"cached_tokens":8},"reasoning_tokens":5}}`, true,
			Result{Reasoning: "2+2", Answer: "Four.", FinishReason: "stop", MatchedStop: 151645, PromptTokens: 10, CompletionTokens: 7, CachedTokens: 8, ReasoningTokens: 5}},
		{"truncated: content null", `{"choices":[{"message":{"content":null,"reasoning_content":"long thought"},"finish_reason":"length","matched_stop":null}],"usage":{"prompt_tokens":10,"completion_tokens":100}}`, true,
			Result{Reasoning: "long thought", FinishReason: "length", PromptTokens: 10, CompletionTokens: 100}},
		{"no reasoning parser: split here", `{"choices":[{"message":{"content":"<think>\nfirst\n</think>\n\nanswer"},"finish_reason":"stop","matched_stop":"</s>"}],"usage":{"completion_tokens_details":{"reasoning_tokens":3}}}`, true,
			Result{Reasoning: "first", Answer: "answer", FinishReason: "stop", MatchedStop: "</s>", ReasoningTokens: 3}},
		{"thinking off", `{"choices":[{"message":{"content":" plain "},"finish_reason":"stop"}]}`, false,
			Result{Answer: " plain ", FinishReason: "stop"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got Result
			if err := parseResult(APIChat, []byte(tc.body), modeOf(tc.thinking), &got); err != nil {
				t.Fatal(err)
			}
			assertResult(t, got, tc.want)
		})
	}
	var r Result
	if err := parseResult(APIChat, []byte(`{"choices":[]}`), ThinkOn, &r); err == nil {
		t.Error("no choices parsed")
	}
}

func assertResult(t *testing.T, got, want Result) {
	t.Helper()
	if got.Reasoning != want.Reasoning || got.Answer != want.Answer || got.Text != want.Text || got.FinishReason != want.FinishReason ||
		got.MatchedStop != want.MatchedStop || got.AbortMessage != want.AbortMessage || got.PromptTokens != want.PromptTokens ||
		got.CompletionTokens != want.CompletionTokens || got.CachedTokens != want.CachedTokens || got.ReasoningTokens != want.ReasoningTokens ||
		got.SpecVerifyCt != want.SpecVerifyCt || got.SpecAcceptLength != want.SpecAcceptLength || got.ServerLatency != want.ServerLatency ||
		len(got.OutputIDs) != len(want.OutputIDs) {
		t.Errorf("got  %+v\nwant %+v", got, want)
	}
}

func TestSplitThinking(t *testing.T) {
	for _, tc := range []struct{ in, reasoning, answer string }{
		{"<think>\nr\n</think>\n\na", "r", "a"},
		{"r only closed\n</think>\n\na", "r only closed", "a"}, // template put <think> in the prompt
		{"<think>\nunclosed", "unclosed", ""},
		{"no thinking at all", "", "no thinking at all"},
		{"<think>\n\n</think>\n\na </think> leaked", "", "a </think> leaked"},
	} {
		r, a := SplitThinking(tc.in)
		if r != tc.reasoning || a != tc.answer {
			t.Errorf("SplitThinking(%q) = %q, %q; want %q, %q", tc.in, r, a, tc.reasoning, tc.answer)
		}
	}
}

func modeOf(thinking bool) ThinkMode {
	if thinking {
		return ThinkOn
	}
	return ThinkOff
}

// A forced-thinking prompt ends in "<think>\n": the output starts inside
// the reasoning, so a truncated one is all reasoning, never an answer.
func TestSplitForcedThinking(t *testing.T) {
	for _, tc := range []struct{ in, reasoning, answer string }{
		{"r\n</think>\n\na", "r", "a"},
		{"truncated reasoning, no close", "truncated reasoning, no close", ""},
		{"\n", "", ""},
		{"<think>\nagain\n</think>\n\na", "<think>\nagain", "a"}, // kept for think_repeated
	} {
		r, a := SplitForcedThinking(tc.in)
		if r != tc.reasoning || a != tc.answer {
			t.Errorf("SplitForcedThinking(%q) = %q, %q; want %q, %q", tc.in, r, a, tc.reasoning, tc.answer)
		}
	}
	// On both APIs, when pipe splits.
	var r Result
	if err := parseResult(APIGenerate, []byte(`{"text":"cut off in the reasoning","output_ids":[1,2],"meta_info":{"finish_reason":{"type":"length","length":2}}}`), ThinkForced, &r); err != nil || r.Reasoning != "cut off in the reasoning" || r.Answer != "" {
		t.Fatalf("generate: %q, %q, %v", r.Reasoning, r.Answer, err)
	}
	r = Result{}
	if err := parseResult(APIChat, []byte(`{"choices":[{"message":{"content":"cut off"},"finish_reason":"length"}]}`), ThinkForced, &r); err != nil || r.Reasoning != "cut off" || r.Answer != "" {
		t.Fatalf("chat: %q, %q, %v", r.Reasoning, r.Answer, err)
	}
	// A server parser that did not know the prompt opened the reasoning.
	r = Result{}
	if err := parseResult(APIChat, []byte(`{"choices":[{"message":{"content":"r\n</think>\n\na","reasoning_content":null},"finish_reason":"stop"}]}`), ThinkForced, &r); err != nil || r.Reasoning != "r" || r.Answer != "a" {
		t.Fatalf("chat, unsplit: %q, %q, %v", r.Reasoning, r.Answer, err)
	}
	// The server split it: kept as the server said.
	r = Result{}
	if err := parseResult(APIChat, []byte(`{"choices":[{"message":{"content":"a","reasoning_content":"r"},"finish_reason":"stop"}]}`), ThinkForced, &r); err != nil || r.Reasoning != "r" || r.Answer != "a" {
		t.Fatalf("chat, split: %q, %q, %v", r.Reasoning, r.Answer, err)
	}
}

func TestErrorClassification(t *testing.T) {
	for _, tc := range []struct {
		status        int
		body          string
		msg           string
		retry, badReq bool
		reason        string
	}{
		{400, `{"object":"error","message":"The input (50000 tokens) is longer than the model's context length (40960 tokens).","type":"BadRequestError","param":null,"code":400}`,
			"The input (50000 tokens) is longer than the model's context length (40960 tokens).", false, true, "prompt_too_long"},
		{400, `{"error":{"message":"Duplicate request id"}}`, "Duplicate request id", false, true, "bad_request"},
		{503, `{"error":{"message":"The request queue is full."}}`, "The request queue is full.", true, false, ""},
		{500, `{"detail":"Internal Server Error"}`, "Internal Server Error", true, false, ""},
		{422, `{"detail":[{"loc":["body","messages"],"msg":"field required"}]}`, `[{"loc":["body","messages"],"msg":"field required"}]`, false, true, "bad_request"},
		{429, `{"error":"rate limited"}`, "rate limited", true, false, ""},
		{408, ``, "Request Timeout", true, false, ""},
		{502, `<html>bad gateway</html>`, "<html>bad gateway</html>", true, false, ""},
		{404, `{"detail":"Not Found"}`, "Not Found", false, false, ""},
	} {
		e := statusError("http://s", tc.status, []byte(tc.body))
		if e.Message != tc.msg || e.Retryable() != tc.retry || e.BadRequest() != tc.badReq || (tc.badReq && e.RejectReason() != tc.reason) {
			t.Errorf("%d %s: message %q retry %v badRequest %v reason %q", tc.status, tc.body, e.Message, e.Retryable(), e.BadRequest(), e.RejectReason())
		}
	}
}
