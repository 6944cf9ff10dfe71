package sglang

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// A prompt's text is sent as encoding/json would send it: escapes, and
// U+FFFD for invalid UTF-8; the body is always valid JSON.
func TestStringsSentMatchEncodingJSON(t *testing.T) {
	chat := newSettings(APIChat, "m", Sampling{MaxOutputTokens: 1})
	native := newSettings(APIGenerate, "m", Sampling{MaxOutputTokens: 1})
	for _, s := range []string{"", "plain", "quote \" backslash \\ slash /", "nl\n cr\r tab\t", "\x00\x01\x1f\x7f",
		"<|im_start|>user\n你好 🌍<|im_end|>", "line\u2028sep\u2029", "bad utf8 \xff\xfe end", "html <&> stays"} {
		want, _ := json.Marshal(s)
		var wantBack string
		_ = json.Unmarshal(want, &wantBack)
		var c struct {
			Messages []struct{ Content string }
		}
		body := chat.appendBody(nil, &Request{Messages: []Message{{Role: "user", Content: s}}}, "r")
		if err := json.Unmarshal(body, &c); err != nil || len(c.Messages) != 1 {
			t.Fatalf("%q: invalid JSON %s: %v", s, body, err)
		}
		if c.Messages[0].Content != wantBack {
			t.Errorf("%q: decodes to %q, encoding/json's to %q", s, c.Messages[0].Content, wantBack)
		}
		var n struct{ Text string }
		body = native.appendBody(nil, &Request{Text: s}, "r")
		if err := json.Unmarshal(body, &n); err != nil || n.Text != wantBack {
			t.Errorf("%q: native body %s decodes to %q, encoding/json's to %q (%v)", s, body, n.Text, wantBack, err)
		}
	}
}

func TestRequestBodies(t *testing.T) {
	f := func(x float64) *float64 { return &x }
	i := func(x int) *int { return &x }
	on := true
	s := Sampling{MaxOutputTokens: 4096, Temperature: f(0.6), TopP: f(0.95), TopK: i(20), MinP: f(0), Seed: i(7),
		Stop: []string{"</s>", "\n\nUser:"}, StopTokenIDs: []int{151645}, RepetitionPenalty: f(1.05),
		PresencePenalty: f(0.5), FrequencyPenalty: f(-0.5), EnableThinking: &on}

	chat := newSettings(APIChat, "Qwen/Qwen3-32B", s)
	var got map[string]any
	body := chat.appendBody(nil, &Request{Messages: []Message{{Role: "system", Content: "be \"brief\""}, {Role: "user", Content: "hi\n"}}}, "rid-1")
	if err := json.Unmarshal(body, &got); err != nil {
		t.Fatalf("chat body is not JSON: %v\n%s", err, body)
	}
	want := map[string]any{
		"model": "Qwen/Qwen3-32B", "rid": "rid-1", "stream": false, "return_meta_info": true, "return_token_ids": true,
		"messages":   []any{map[string]any{"role": "system", "content": "be \"brief\""}, map[string]any{"role": "user", "content": "hi\n"}},
		"max_tokens": 4096.0, "temperature": 0.6, "top_p": 0.95, "top_k": 20.0, "min_p": 0.0, "seed": 7.0,
		"stop": []any{"</s>", "\n\nUser:"}, "stop_token_ids": []any{151645.0}, "repetition_penalty": 1.05,
		"presence_penalty": 0.5, "frequency_penalty": -0.5,
		"chat_template_kwargs": map[string]any{"enable_thinking": true}, "separate_reasoning": true,
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("chat body\n got %v\nwant %v", got, want)
	}
	if chat.record["max_tokens"] != 4096 || chat.record["model"] != "Qwen/Qwen3-32B" || chat.record["api"] != "chat" {
		t.Errorf("recorded settings %v", chat.record)
	}

	native := newSettings(APIGenerate, "ignored", s)
	got = nil
	body = native.appendBody(nil, &Request{InputIDs: []int{151644, 872, 198}}, "rid-2")
	if err := json.Unmarshal(body, &got); err != nil {
		t.Fatalf("native body is not JSON: %v\n%s", err, body)
	}
	sp, _ := got["sampling_params"].(map[string]any)
	if got["rid"] != "rid-2" || !reflect.DeepEqual(got["input_ids"], []any{151644.0, 872.0, 198.0}) || got["text"] != nil ||
		sp["max_new_tokens"] != 4096.0 || sp["sampling_seed"] != 7.0 || sp["chat_template_kwargs"] != nil || got["model"] != nil ||
		native.record["enable_thinking"] != true || native.record["model"] != "ignored" {
		t.Errorf("native body %s", body)
	}
	body = native.appendBody(nil, &Request{Text: "<|im_start|>user\nhi"}, "rid-3")
	got = nil
	if err := json.Unmarshal(body, &got); err != nil || got["text"] != "<|im_start|>user\nhi" {
		t.Errorf("native text body %s: %v", body, err)
	}

	// Unset sampling fields are not sent: the server's defaults apply.
	bare := newSettings(APIChat, "m", Sampling{MaxOutputTokens: 10})
	if b := string(bare.appendBody(nil, &Request{}, "r")); strings.Contains(b, "temperature") || strings.Contains(b, "chat_template_kwargs") || !strings.Contains(b, `"max_tokens":10`) {
		t.Errorf("bare body %s", b)
	}
}
