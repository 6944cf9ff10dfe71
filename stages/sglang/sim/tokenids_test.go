package sim

import (
	"strings"
	"testing"

	"github.com/pipe-dev/pipe/stages/sglang/sim/simtest"
)

func intsOf(obj any, p string) ([]int, bool) {
	arr, ok := path(obj, p).([]any)
	if !ok {
		return nil, false
	}
	out := make([]int, len(arr))
	for i, v := range arr {
		out[i] = int(v.(float64))
	}
	return out, true
}

// The chat API returns token_ids and prompt_token_ids per choice only when
// asked, as SGLang 2026-07 does: the output ids as /generate's (decoding
// to the reasoning and the answer), the prompt as Qwen3's template
// renders it.
func TestChatTokenIDs(t *testing.T) {
	for _, tc := range []struct {
		name string
		tok  Tokenizer
	}{{"approximate ids", nil}, {"tokenizer", simtest.ByteTokenizer{}}} {
		t.Run(tc.name, func(t *testing.T) {
			f := startFleet(t, Config{Speed: 1e6, Tokenizer: tc.tok, ThinkTokensMean: 80, AnswerTokensMean: 30})
			c := client(t)
			url := f.URLs()[0] + "/v1/chat/completions"
			msgs := []map[string]any{{"role": "system", "content": "Be brief."}, {"role": "user", "content": "What is 2+2?"}}
			r := post(t, c, url, map[string]any{"messages": msgs, "max_tokens": 30000, "return_token_ids": true})
			out, ok := intsOf(r.obj, "choices.0.token_ids")
			if !ok || len(out) != num(r.obj, "usage.completion_tokens") || out[0] != idThinkStart || out[len(out)-1] != idImEnd {
				t.Fatalf("token_ids: %.400s", r.body)
			}
			prompt, ok := intsOf(r.obj, "choices.0.prompt_token_ids")
			if !ok || len(prompt) != num(r.obj, "usage.prompt_tokens") || prompt[0] != idImStart ||
				!equalInts(prompt[len(prompt)-3:], []int{idImStart, 77091, idNewline}) && tc.tok == nil {
				t.Fatalf("prompt_token_ids: %.400s", r.body)
			}
			msg := path(r.obj, "choices.0.message")
			if tc.tok != nil {
				want := "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n"
				if got := tc.tok.Decode(prompt); got != want {
					t.Errorf("prompt_token_ids decode to %q", got)
				}
				reasoning, content := splitReasoning(tc.tok.Decode(out[:len(out)-1]))
				if reasoning != str(msg, "reasoning_content") || content != str(msg, "content") || content == "" {
					t.Errorf("token_ids decode to reasoning %.80q content %.80q; message %v", reasoning, content, msg)
				}
			}
			// The same ids as /generate gives for the same output: a
			// prefix when cut short.
			r = post(t, c, url, map[string]any{"messages": msgs, "max_tokens": 20, "return_token_ids": true})
			if cut, _ := intsOf(r.obj, "choices.0.token_ids"); len(cut) != 20 || !equalInts(cut, out[:20]) ||
				str(r.obj, "choices.0.finish_reason") != "length" {
				t.Errorf("cut at 20: %v of %v", cut, out[:20])
			}

			// Not asked: neither key.
			r = post(t, c, url, map[string]any{"messages": msgs})
			if _, has := path(r.obj, "choices.0").(map[string]any)["token_ids"]; has {
				t.Errorf("token_ids without return_token_ids: %.300s", r.body)
			}
			if _, has := path(r.obj, "choices.0").(map[string]any)["prompt_token_ids"]; has {
				t.Errorf("prompt_token_ids without asking: %.300s", r.body)
			}
			// return_prompt_token_ids alone: the prompt only.
			r = post(t, c, url, map[string]any{"messages": msgs, "return_prompt_token_ids": true,
				"chat_template_kwargs": map[string]any{"enable_thinking": false}})
			p, ok := intsOf(r.obj, "choices.0.prompt_token_ids")
			noThink := ok && equalInts(p[len(p)-4:], noThinkIDs)
			if tc.tok != nil {
				noThink = strings.HasSuffix(tc.tok.Decode(p), "assistant\n"+noThinkSuffix)
			}
			if _, has := path(r.obj, "choices.0").(map[string]any)["token_ids"]; has || !ok ||
				!noThink || len(p) != num(r.obj, "usage.prompt_tokens") {
				t.Errorf("return_prompt_token_ids, thinking off: %.300s", r.body)
			}
			// Refused on a stream, as SGLang does.
			r = post(t, c, url, map[string]any{"messages": msgs, "stream": true, "return_token_ids": true})
			if r.status != 400 || !strings.Contains(str(r.obj, "message"), "return_token_ids") {
				t.Errorf("streamed return_token_ids: %d %s", r.status, r.body)
			}
		})
	}
}

// With a forced-thinking template the output ids start inside the
// reasoning, without <think>, and the prompt ends in "<think>\n".
func TestChatTokenIDsForcedThinking(t *testing.T) {
	tok := simtest.ByteTokenizer{}
	f := startFleet(t, Config{Speed: 1e6, Tokenizer: tok, ForcedThinking: true, ThinkTokensMean: 80, AnswerTokensMean: 30})
	c := client(t)
	r := post(t, c, f.URLs()[0]+"/v1/chat/completions", map[string]any{
		"messages": []map[string]any{{"role": "user", "content": "Why?"}}, "return_token_ids": true})
	out, _ := intsOf(r.obj, "choices.0.token_ids")
	prompt, _ := intsOf(r.obj, "choices.0.prompt_token_ids")
	if len(out) < 2 || containsInt(out, idThinkStart) || out[len(out)-1] != idImEnd {
		t.Fatalf("forced token_ids: %.300s", r.body)
	}
	if !strings.HasSuffix(tok.Decode(prompt), "<|im_start|>assistant\n<think>\n") {
		t.Errorf("forced prompt %q", tok.Decode(prompt))
	}
	msg := path(r.obj, "choices.0.message")
	reasoning, content := splitForced(tok.Decode(out[:len(out)-1]))
	if reasoning != str(msg, "reasoning_content") || content != str(msg, "content") || reasoning == "" {
		t.Errorf("forced ids decode to reasoning %.80q content %.80q; message %v", reasoning, content, msg)
	}
}
