package sglang

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/pipe-dev/pipe/pipeline/record"
)

// A request without tools is byte for byte what it was before tool fields
// were carried (bodies written by the client at the commit before them).
func TestRequestWithoutToolsUnchanged(t *testing.T) {
	f := 0.6
	on := true
	chat := newSettings(APIChat, "Qwen/Qwen3-32B", Sampling{MaxOutputTokens: 4096, Temperature: &f, EnableThinking: &on})
	for _, c := range []struct {
		req  *Request
		want string
	}{
		{&Request{Messages: []Message{{Role: "system", Content: "be \"brief\" <&>"}, {Role: "user", Content: "hi\n\xff"}, {Role: "assistant", Content: ""}}},
			`{"model":"Qwen/Qwen3-32B","messages":[{"role":"system","content":"be \"brief\" <&>"},{"role":"user","content":"hi\n` + "\uFFFD" + `"},{"role":"assistant","content":""}],"rid":"rid-1","return_meta_info":true,"return_token_ids":true,"stream":false,"max_tokens":4096,"temperature":0.6,"chat_template_kwargs":{"enable_thinking":true},"separate_reasoning":true}`},
		{&Request{Messages: []Message{{Role: "user", Content: "x"}}, MaxOutputTokens: 7, Tools: []byte{}},
			`{"model":"Qwen/Qwen3-32B","messages":[{"role":"user","content":"x"}],"rid":"rid-1","return_meta_info":true,"return_token_ids":true,"stream":false,"max_tokens":7,"temperature":0.6,"chat_template_kwargs":{"enable_thinking":true},"separate_reasoning":true}`},
	} {
		if err := chat.checkRequest(c.req); err != nil {
			t.Fatal(err)
		}
		if got := string(chat.appendBody(nil, c.req, "rid-1")); got != c.want {
			t.Errorf("body changed:\n got %s\nwant %s", got, c.want)
		}
	}
}

const weatherTools = `[{"type": "function", "function": {"name": "get_weather", "description": "Weather in a city.", "parameters": {"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}}, "required": ["city"]}}}]`

// Tools and the messages' tool fields are sent as given: the tools array
// and each call's arguments the same JSON values (a string stays that
// string, an object keeps its key order and number spelling; only the
// whitespace between tokens goes, the body being written compact), the
// id, type, tool_call_id and name only where set.
func TestRequestToolFieldsSentAsGiven(t *testing.T) {
	chat := newSettings(APIChat, "m", Sampling{MaxOutputTokens: 16})
	argsString := `"{\"city\": \"Paris\", \"days\": 1.50}"`
	argsObject := `{"days": 1e2, "city": "Paris", "nested": {"z": [1, 2.0]}}`
	req := &Request{
		Tools: []byte(weatherTools),
		Messages: []Message{
			{Role: "user", Content: "Weather?"},
			{Role: "assistant", ToolCalls: []record.ToolCall{
				{ID: "call_1", Type: "function", Function: record.FunctionCall{Name: "get_weather", Arguments: json.RawMessage(argsString)}},
				{Function: record.FunctionCall{Name: "get_weather", Arguments: json.RawMessage(argsObject)}},
				{Function: record.FunctionCall{Name: "get_weather"}},
			}},
			{Role: "tool", Content: "sunny", ToolCallID: "call_1", Name: "get_weather"},
		},
	}
	if err := chat.checkRequest(req); err != nil {
		t.Fatal(err)
	}
	body := chat.appendBody(nil, req, "r")
	for _, want := range []string{
		`"tools":` + compact(weatherTools) + `,`,
		`{"role":"user","content":"Weather?"}`,
		`{"role":"assistant","content":"","tool_calls":[{"id":"call_1","type":"function","function":{"name":"get_weather","arguments":` + argsString + `}},` +
			`{"function":{"name":"get_weather","arguments":` + compact(argsObject) + `}},{"function":{"name":"get_weather","arguments":null}}]}`,
		`{"role":"tool","content":"sunny","tool_call_id":"call_1","name":"get_weather"}`,
	} {
		if !bytes.Contains(body, []byte(want)) {
			t.Errorf("body lacks %s\nbody: %s", want, body)
		}
	}
	var v map[string]any
	if err := json.Unmarshal(body, &v); err != nil {
		t.Fatalf("body is not JSON: %v", err)
	}
	// The native API sends no tools: the caller rendered them.
	native := newSettings(APIGenerate, "m", Sampling{MaxOutputTokens: 16})
	if b := native.appendBody(nil, &Request{Text: "p", Tools: []byte(weatherTools)}, "r"); bytes.Contains(b, []byte("tools")) {
		t.Errorf("native body carries tools: %s", b)
	}
}

// compact is s without whitespace between tokens (s has none in strings).
func compact(s string) string {
	var b bytes.Buffer
	if err := json.Compact(&b, []byte(s)); err != nil {
		panic(err)
	}
	return b.String()
}

// Tools that are not a JSON array, or arguments that are not JSON, are
// refused before anything is sent: a BadRequest error, not retried.
func TestRequestToolFieldsRefused(t *testing.T) {
	chat := newSettings(APIChat, "m", Sampling{MaxOutputTokens: 16})
	for name, req := range map[string]*Request{
		"tools object":  {Tools: []byte(`{"type":"function"}`), Messages: []Message{{Role: "user", Content: "q"}}},
		"tools torn":    {Tools: []byte(`[{"type":`), Messages: []Message{{Role: "user", Content: "q"}}},
		"tools trailer": {Tools: []byte(`[] []`), Messages: []Message{{Role: "user", Content: "q"}}},
		"args torn": {Messages: []Message{{Role: "assistant", ToolCalls: []record.ToolCall{
			{Function: record.FunctionCall{Name: "f", Arguments: json.RawMessage(`{"a":`)}}}}}},
	} {
		if err := chat.checkRequest(req); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// message.tool_calls become Result.ToolCalls with the server's ids and the
// arguments' raw JSON; hostile lists are a bad response, never a panic or
// a list with holes.
func TestParseChatToolCalls(t *testing.T) {
	wrap := func(msg string) []byte {
		return []byte(`{"choices":[{"index":0,"message":{"role":"assistant","content":"","reasoning_content":"r",` + msg +
			`},"finish_reason":"tool_calls","matched_stop":null}],"usage":{"prompt_tokens":3,"completion_tokens":4}}`)
	}
	var r Result
	err := parseResult(APIChat, wrap(`"tool_calls":[{"id":"call_0123456789abcdef01234567","index":0,"type":"function","function":{"name":"get_weather","arguments":"{\"city\": \"Paris\"}"}},`+
		`{"index":1,"function":{"name":"g","arguments":{"b": 1, "a": 2}}}]`), ThinkOn, &r)
	if err != nil {
		t.Fatal(err)
	}
	want := []record.ToolCall{
		{ID: "call_0123456789abcdef01234567", Type: "function", Function: record.FunctionCall{Name: "get_weather", Arguments: json.RawMessage(`"{\"city\": \"Paris\"}"`)}},
		{Function: record.FunctionCall{Name: "g", Arguments: json.RawMessage(`{"b": 1, "a": 2}`)}},
	}
	if fmt.Sprint(r.ToolCalls) != fmt.Sprint(want) || r.FinishReason != "tool_calls" || r.Reasoning != "r" || r.Answer != "" {
		t.Errorf("got %+v finish %q reasoning %q answer %q", r.ToolCalls, r.FinishReason, r.Reasoning, r.Answer)
	}
	for _, none := range []string{`"tool_calls":null`, `"tool_calls":[]`, `"tool_calls":"x"`, `"tool_calls":{}`, `"x":1`} {
		r = Result{}
		if err := parseResult(APIChat, wrap(none), ThinkOn, &r); err != nil || r.ToolCalls != nil {
			t.Errorf("%s: calls %v, err %v", none, r.ToolCalls, err)
		}
	}
	huge := `"tool_calls":[` + strings.Repeat(`{"function":{"name":"f","arguments":"{}"}},`, maxToolCalls) + `{"function":{"name":"f"}}]`
	for _, bad := range []string{
		huge,
		`"tool_calls":[1]`,
		`"tool_calls":[{"function":{"name":"f"}},null]`,
		`"tool_calls":[{"function":"f"}]`,
		`"tool_calls":[{"function":{"name":7}}]`,
		`"tool_calls":[{"function":{}}]`,
		`"tool_calls":[{"id":7,"function":{"name":"f"}}]`,
		`"tool_calls":[{"type":["function"],"function":{"name":"f"}}]`,
	} {
		r = Result{}
		err := parseResult(APIChat, wrap(bad), ThinkOn, &r)
		if err == nil || r.ToolCalls != nil {
			t.Errorf("%.60s: calls %v, err %v", bad, r.ToolCalls, err)
		}
	}
	// Torn JSON inside the list is a torn body.
	for _, torn := range []string{`"tool_calls":[{"function":{"name":"f"}`, `"tool_calls":[{"function":{"name":"f","arguments":{]}}]`} {
		if err := parseResult(APIChat, wrap(torn), ThinkOn, &Result{}); err == nil {
			t.Errorf("%s: no error", torn)
		}
	}
}

// Any prefix or byte flip of an answer with calls parses or fails, never
// panics.
func TestParseChatToolCallsNoPanic(t *testing.T) {
	body := []byte(`{"choices":[{"message":{"content":"a","tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{\"x\": [1, {\"y\": null}]}"}},{"function":{"name":"g","arguments":{"k":"v"}}}]},"finish_reason":"tool_calls"}]}`)
	for i := 0; i <= len(body); i++ {
		_ = parseResult(APIChat, body[:i], ThinkOn, &Result{})
		b := bytes.Clone(body)
		if i < len(b) {
			for _, c := range []byte(`[]{}",:0n`) {
				b[i] = c
				_ = parseResult(APIChat, b, ThinkOn, &Result{})
			}
		}
	}
}
