package sglang

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strings"
	"testing"
)

// handBodies are answers in the shapes and drifts the protocol notes list.
var handBodies = []struct {
	api  API
	body string
}{
	{APIGenerate, `{"text":"<think>\nhmm \"quoted\" \\ back\n</think>\n\nYes \u00e9\u4e16\ud83c\udf0d.","output_ids":[1,2,151645],"meta_info":{"id":"x","finish_reason":{"type":"stop","matched":151645},"prompt_tokens":12,"completion_tokens":3,"cached_tokens":4,"e2e_latency":1.5,"spec_verify_ct":2,"spec_accept_length":1.5,"unknown":{"a":[1,{"b":null}],"c":true}}}`},
	{APIGenerate, `{"text":"<think>\nstill thinking","meta_info":{"finish_reason":{"type":"length","length":4096},"prompt_tokens":12.0,"completion_tokens":"4096","total_retractions":1}}`},
	{APIGenerate, `{"text":"a","meta_info":{"finish_reason":"stop","completion_tokens":9,"spec_verify_ct":3}}`},
	{APIGenerate, ` {"text" : "lone \ud800 surrogate, \/ slash \b\f\t\r" , "meta_info" : { "finish_reason" : null , "matched_stop": "</s>"} } `},
	{APIGenerate, `{"text":"","meta_info":{"finish_reason":{"type":"abort","message":"The input (50000 tokens) is longer than the model's context length (40960 tokens)."}}}`},
	{APIGenerate, `{"text":"just text"}`},
	{APIGenerate, `{"text":"x","output_ids":[],"meta_info":{}}`},
	{APIChat, `{"id":"c","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"Four.","reasoning_content":"2+2","tool_calls":null},"finish_reason":"stop","matched_stop":151645}],"usage":{"prompt_tokens":10,"completion_tokens":7,"total_tokens":17,"prompt_tokens_details":{"cached_tokens":8},"reasoning_tokens":5}}`},
	{APIChat, `{"choices":[{"message":{"content":null,"reasoning_content":"long thought"},"finish_reason":"length","matched_stop":null}],"usage":{"prompt_tokens":10,"completion_tokens":100}}`},
	{APIChat, `{"choices":[{"message":{"content":"<think>\nfirst\n</think>\n\nanswer"},"finish_reason":"stop","matched_stop":"</s>"}],"usage":{"completion_tokens_details":{"reasoning_tokens":3}}}`},
	{APIChat, `{"choices":[{"message":{"content":" plain "},"finish_reason":"stop"},{"message":{"content":"second choice"}}],"usage":null}`},
	{APIChat, `{"choices":[{"message":{"content":"x"},"finish_reason":{"type":"abort","message":"m"}}],"meta_info":{"spec_verify_ct":4,"spec_accept_length":"2.5"}}`},
	{APIChat, `{"choices":[{"index":0,"message":{"content":"4","reasoning_content":"2+2"},"finish_reason":"stop","matched_stop":151645,"prompt_token_ids":[151644,872,198],"token_ids":[151667,17,151668,19,151645]}]}`},
	{APIChat, `{"choices":[{"message":{"content":"4"},"finish_reason":"stop","response_token_ids":[19,151645]}]}`},
}

// simBodies fetches real answers from the simulator, both APIs, with
// speculative figures.
func simBodies(t *testing.T) []struct {
	api  API
	body string
} {
	cfg := fastSim(1)
	cfg.SpecAcceptMean = 3
	f := startSim(t, cfg)
	var out []struct {
		api  API
		body string
	}
	for i := range 20 {
		for _, api := range []API{APIGenerate, APIChat} {
			on := i%2 == 0
			st := newSettings(api, "m", Sampling{MaxOutputTokens: 200 + 10*i, EnableThinking: &on})
			req := &Request{Messages: []Message{{Role: "user", Content: fmt.Sprintf("q%d", i)}}, Text: fmt.Sprintf("q%d", i)}
			body := st.appendBody(nil, req, fmt.Sprintf("r%d%s", i, api))
			resp, err := http.Post(f.URLs()[0]+st.path(), "application/json", bytes.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			out = append(out, struct {
				api  API
				body string
			}{api, string(b)})
		}
	}
	return out
}

func TestParseAgreesWithEncodingJSON(t *testing.T) {
	bodies := append(handBodies, simBodies(t)...)
	for i, b := range bodies {
		for _, thinking := range []bool{true, false} {
			var want, got Result
			werr := stdParseResult(b.api, []byte(b.body), thinking, &want)
			gerr := parseResult(b.api, []byte(b.body), modeOf(thinking), &got)
			if werr != nil {
				t.Fatalf("body %d: the oracle failed: %v", i, werr)
			}
			if gerr != nil {
				t.Fatalf("body %d: %v", i, gerr)
			}
			for _, ids := range []*[]int{&want.OutputIDs, &got.OutputIDs, &want.PromptIDs, &got.PromptIDs} {
				if len(*ids) == 0 {
					*ids = nil
				}
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("body %d (%s, thinking %v):\n got  %+v\n want %+v\n%s", i, b.api, thinking, got, want, b.body)
			}
		}
	}
}

func TestParseRejectsTornBodies(t *testing.T) {
	for i, b := range append(handBodies, simBodies(t)...) {
		body := strings.TrimSpace(b.body)
		for cut := 0; cut < len(body); cut += 1 + len(body)/97 {
			var r Result
			if err := parseResult(b.api, []byte(body[:cut]), ThinkOn, &r); err == nil {
				t.Fatalf("body %d cut at %d parsed: %q", i, cut, body[:cut])
			}
		}
	}
	for _, junk := range []string{`{"text":"a"} trailing`, `{"text":"a",}`, `{"text" "a"}`, `{"text":tru}`, `{"a":[1,2}`, `null`, `"str"`} {
		var r Result
		if err := parseResult(APIGenerate, []byte(junk), ThinkOn, &r); err == nil {
			t.Errorf("%q parsed", junk)
		}
	}
}

func BenchmarkParseChat(b *testing.B) {
	body := []byte(handBodies[7].body)
	b.Run("json-experiment", func(b *testing.B) {
		for range b.N {
			var r Result
			_ = parseResult(APIChat, body, ThinkOn, &r)
		}
	})
	b.Run("encoding/json", func(b *testing.B) {
		for range b.N {
			var r Result
			_ = stdParseResult(APIChat, body, true, &r)
		}
	})
}

// Strings in an answer decode as encoding/json decodes them: escapes,
// surrogate pairs, and U+FFFD for bad escapes, lone surrogates and invalid
// UTF-8.
func TestStringsMatchEncodingJSON(t *testing.T) {
	for _, raw := range []string{`plain`, `a\nb\\c\"d\/e\tf`, `caf\u00e9 \ud83c\udf0d 世界`, "bad \xff utf8 \\n then \xc3", `lone \ud800 x`, `\u12`, `end\\`,
		`two lone \udc00\ud800 x`, strings.Repeat(`long run with one escape at the end \n`, 50)} {
		var want string
		if err := json.Unmarshal([]byte(`"`+raw+`"`), &want); err != nil {
			continue // not JSON: nothing to agree with
		}
		var r Result
		if err := parseResult(APIGenerate, []byte(`{"text":"`+raw+`"}`), ThinkOff, &r); err != nil {
			t.Errorf("%q: %v", raw, err)
		} else if r.Text != want {
			t.Errorf("text %q = %q, encoding/json %q", raw, r.Text, want)
		}
	}
}

// A figure that is not a finite number in range is read as absent, never
// as NaN (which the journal's JSON cannot hold), Inf, a wrapped integer or a
// negative count; the parse names each (Result.dropped).
func TestBadFiguresAreDropped(t *testing.T) {
	body := `{"text":"hi","output_ids":[1],"meta_info":{"finish_reason":{"type":"stop"},
		"prompt_tokens":18446744073709551616,"completion_tokens":4294967297,"cached_tokens":-3,
		"reasoning_tokens":"12","spec_verify_ct":1e999,"spec_accept_length":"NaN","e2e_latency":"-Infinity"}}`
	var r Result
	if err := parseResult(APIGenerate, []byte(body), ThinkOff, &r); err != nil {
		t.Fatal(err)
	}
	if r.PromptTokens != 0 || r.CompletionTokens != 0 || r.CachedTokens != 0 || r.SpecVerifyCt != 0 ||
		r.SpecAcceptLength != 0 || r.ServerLatency != 0 || r.ReasoningTokens != 12 || r.Answer != "hi" {
		t.Errorf("figures: %+v", r)
	}
	if _, err := json.Marshal(r); err != nil {
		t.Errorf("the result does not encode: %v", err)
	}
	got := strings.Join(r.dropped, ",")
	if want := "prompt_tokens,completion_tokens,cached_tokens,spec_verify_ct,spec_accept_length,e2e_latency"; got != want {
		t.Errorf("dropped = %s, want %s", got, want)
	}
	chat := `{"choices":[{"message":{"content":"a"},"finish_reason":"stop","meta_info":{"spec_accept_length":"Inf"}}],
		"usage":{"prompt_tokens":5,"completion_tokens":7,"prompt_tokens_details":{"cached_tokens":1e400}},
		"meta_info":{"spec_accept_length":"nan"}}`
	var cr Result
	if err := parseResult(APIChat, []byte(chat), ThinkOff, &cr); err != nil || cr.SpecAcceptLength != 0 || cr.CachedTokens != 0 || cr.CompletionTokens != 7 {
		t.Errorf("chat: %v %+v", err, cr)
	}
	if got := strings.Join(cr.dropped, ","); got != "spec_accept_length,cached_tokens,spec_accept_length" {
		t.Errorf("chat dropped = %q", got)
	}
	var gr Result
	if err := parseResult(APIChat, []byte(`{"choices":[{"message":{"content":"a"}}],"usage":{"prompt_tokens":5,"completion_tokens":null}}`), ThinkOff, &gr); err != nil || len(gr.dropped) != 0 {
		t.Errorf("good figures dropped: %v %q", err, gr.dropped)
	}
}

// The parse names each dropped figure wherever it reads one: every name,
// at each place; a good answer, or a bad figure where the parse reads
// none, names nothing.
func TestParseNamesEachDroppedFigure(t *testing.T) {
	chatAt := map[string][]string{
		"prompt_tokens": {`"usage":{"prompt_tokens":%s}`}, "completion_tokens": {`"usage":{"completion_tokens":%s}`},
		"reasoning_tokens": {`"usage":{"reasoning_tokens":%s}`, `"usage":{"completion_tokens_details":{"reasoning_tokens":%s}}`},
		"cached_tokens":    {`"usage":{"prompt_tokens_details":{"cached_tokens":%s}}`},
	}
	for _, name := range []string{"prompt_tokens", "completion_tokens", "cached_tokens", "reasoning_tokens",
		"spec_verify_ct", "spec_accept_length", "e2e_latency"} {
		bodies := map[API][]string{APIGenerate: {`{"text":"a","meta_info":{"` + name + `":%s}}`}}
		if at, ok := chatAt[name]; ok {
			for _, a := range at {
				bodies[APIChat] = append(bodies[APIChat], `{"choices":[{"message":{"content":"a"}}],`+a+`}`)
			}
		} else {
			bodies[APIChat] = []string{`{"choices":[{"message":{"content":"a"},"meta_info":{"` + name + `":%s}}]}`,
				`{"choices":[{"message":{"content":"a"}}],"meta_info":{"` + name + `":%s}}`}
		}
		for api, forms := range bodies {
			for _, form := range forms {
				for value, dropped := range map[string]bool{`"NaN"`: true, `1e999`: true, `"5"`: false, `5`: false, `null`: false} {
					body := fmt.Sprintf(form, value)
					var r Result
					if err := parseResult(api, []byte(body), ThinkOff, &r); err != nil {
						t.Fatalf("%s: %v", body, err)
					}
					want := ""
					if dropped {
						want = name
					}
					if got := strings.Join(r.dropped, ","); got != want {
						t.Errorf("%s: dropped %q, want %q", body, got, want)
					}
				}
			}
		}
	}
	var r Result
	body := `{"choices":[{"message":{"content":"a"}},{"message":{"content":"b"},"meta_info":{"e2e_latency":"NaN"}}]}`
	if err := parseResult(APIChat, []byte(body), ThinkOff, &r); err != nil || len(r.dropped) != 0 {
		t.Errorf("a figure in a choice the parse skips: %v, dropped %q", err, r.dropped)
	}
}

// generateAnswer is a /generate answer of 1,560 output ids, the
// rehearsal's mean.
func generateAnswer() []byte {
	var ids []string
	for i := range 1560 {
		ids = append(ids, fmt.Sprint((i*7919)%151000))
	}
	return []byte(`{"text":"` + strings.Repeat("word ", 1500) + `","output_ids":[` + strings.Join(ids, ",") + `],"meta_info":{"id":"x","finish_reason":{"type":"length","length":2048},"prompt_tokens":12,"completion_tokens":1560}}`)
}

func BenchmarkParseGenerateIDs(b *testing.B) {
	body := generateAnswer()
	b.ReportAllocs()
	for b.Loop() {
		var r Result
		if err := parseResult(APIGenerate, body, ThinkOn, &r); err != nil || len(r.OutputIDs) != 1560 {
			b.Fatal(err, len(r.OutputIDs))
		}
	}
}
