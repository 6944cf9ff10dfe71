package chat

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestToolMessages(t *testing.T) {
	calls := []ToolCall{
		{ID: "call_1", Type: "function", Function: ToolFunction{Name: "get_weather", Arguments: json.RawMessage(`"{\"city\":\"Zürich\"}"`)}},
		{Function: ToolFunction{Name: "search", Arguments: json.RawMessage(`{"q": "x", "n": 1.0}`)}},
	}
	m := NewToolCalls("", calls)
	want := `{"role":"assistant","content":"","tool_calls":[{"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Zürich\"}"}},{"function":{"name":"search","arguments":{"q":"x","n":1.0}}}]}`
	if b, _ := json.Marshal(m); string(b) != want {
		t.Fatalf("got  %s\nwant %s", b, want)
	}
	got, err := m.ToolCalls()
	if err != nil || len(got) != 2 || got[0].Function.Name != "get_weather" || string(got[0].Function.Arguments) != `"{\"city\":\"Zürich\"}"` || got[1].ID != "" {
		t.Fatalf("ToolCalls: %+v, %v", got, err)
	}
	if b, _ := json.Marshal(NewToolResult("r", "call_1", "get_weather")); string(b) != `{"role":"tool","content":"r","tool_call_id":"call_1","name":"get_weather"}` {
		t.Fatalf("tool result %s", b)
	}
	if b, _ := json.Marshal(NewToolResult("r", "", "")); string(b) != `{"role":"tool","content":"r"}` {
		t.Fatalf("tool result %s", b)
	}
	if c, err := NewMessage("user", "q").ToolCalls(); c != nil || err != nil {
		t.Fatalf("no calls: %v, %v", c, err)
	}
	for _, bad := range []string{`"x"`, `[1]`, `[null]`, `[{"function": "f"}]`, `[{"function": {"name": 3}}]`} {
		var m Message
		if err := json.Unmarshal([]byte(`{"role":"assistant","tool_calls":`+bad+`}`), &m); err != nil {
			t.Fatal(err)
		}
		if _, err := m.ToolCalls(); err == nil || !strings.Contains(err.Error(), "tool_calls") {
			t.Errorf("tool_calls %s: %v", bad, err)
		}
	}
}

// TestAssistantTurnsToolCalls: on a template that writes tool calls after
// the content, a tool-call turn's ContentEnd is where its end of turn
// begins (the model wrote the calls), with content or without, last or
// followed by a tool result.
func TestAssistantTurnsToolCalls(t *testing.T) {
	const src = "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}" +
		"{% for c in m.tool_calls %}{% if not loop.first or m.content %}{{ '\n' }}{% endif %}<tool_call>{{ c.function.name }} {{ c.function.arguments | tojson }}</tool_call>{% endfor %}" +
		"<|im_end|>\n{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
	tmpl, err := New(src, nil)
	if err != nil {
		t.Fatal(err)
	}
	call := []ToolCall{{Function: ToolFunction{Name: "f", Arguments: json.RawMessage(`{"a": 1}`)}}}
	for _, content := range []string{"", "let me see"} {
		msgs := []Message{NewMessage("user", "q"), NewToolCalls(content, call), NewToolResult("r", "", ""), NewMessage("assistant", "done")}
		for _, n := range []int{2, 4} {
			full, turns, err := tmpl.AssistantTurns(msgs[:n], Options{}, false)
			if err != nil {
				t.Fatalf("content %q, %d messages: %v", content, n, err)
			}
			tr := turns[0]
			if full[tr.Body:tr.ContentEnd] != strings.TrimPrefix(content+"\n", "\n")+`<tool_call>f {"a": 1}</tool_call>` || full[tr.ContentEnd:tr.End] != "<|im_end|>\n" {
				t.Errorf("content %q, %d messages: body %q, end of turn %q", content, n, full[tr.Body:tr.ContentEnd], full[tr.ContentEnd:tr.End])
			}
		}
	}
}
