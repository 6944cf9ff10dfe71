package stages

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

// Tool calls as Qwen3 writes them (its chat template renders an
// assistant turn's calls so, and its tools system prompt asks for them so).
const (
	qwenCallWeather = "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"unit\": \"celsius\"}}\n</tool_call>"
	qwenCallSearch  = "<tool_call>\n{\"name\": \"search_web\", \"arguments\": {\"q\": \"café <tool_response> near me\", \"filters\": {\"lang\": \"日本語\"}}}\n</tool_call>"
	qwenCallNoArgs  = "<tool_call>\n{\"name\": \"get_time\", \"arguments\": {}}\n</tool_call>"
)

func TestSplitTextToolCalls(t *testing.T) {
	tests := []struct {
		name    string
		text    string
		cut     bool
		content string
		calls   []string // names
		problem string   // substring of the problem; "" = none
		call    int      // the problem's call
	}{
		{name: "no calls", text: "The weather in Paris is mild.", content: "The weather in Paris is mild."},
		{name: "one call, no content", text: qwenCallWeather, calls: []string{"get_weather"}},
		{name: "content then calls", text: "I'll check both.\n" + qwenCallWeather + "\n" + qwenCallSearch, content: "I'll check both.\n", calls: []string{"get_weather", "search_web"}},
		{name: "no arguments", text: qwenCallNoArgs, calls: []string{"get_time"}},
		{name: "trailing newline", text: qwenCallWeather + "\n", calls: []string{"get_weather"}},
		{name: "blank lines inside the block", text: "<tool_call>\n\n{\"name\": \"get_time\", \"arguments\": {}}\n\n</tool_call>", calls: []string{"get_time"}},
		{name: "extra key", text: "<tool_call>\n{\"name\": \"get_time\", \"arguments\": {}, \"id\": \"c1\"}\n</tool_call>", calls: []string{"get_time"}},
		{name: "not JSON", call: 1, problem: "not valid JSON: invalid character '}'",
			text: "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\",}}\n</tool_call>"},
		{name: "unquoted key", call: 1, problem: "not valid JSON",
			text: "<tool_call>\n{name: \"get_weather\", arguments: {}}\n</tool_call>"},
		{name: "trailing data", call: 1, problem: "not valid JSON: invalid character '}' after top-level value",
			text: "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}}\n</tool_call>"},
		{name: "python literal", call: 1, problem: "not valid JSON",
			text: "<tool_call>\n{'name': 'get_weather', 'arguments': {'city': 'Paris'}}\n</tool_call>"},
		{name: "empty body", call: 1, problem: "body is empty", text: "<tool_call>\n\n</tool_call>"},
		{name: "a list", call: 1, problem: "a JSON list, not one call object",
			text: "<tool_call>\n[{\"name\": \"get_weather\", \"arguments\": {}}]\n</tool_call>"},
		{name: "prose body", call: 1, problem: "not a JSON object", text: "<tool_call>\nget_weather(city=\"Paris\")\n</tool_call>"},
		{name: "no name", call: 1, problem: `no "name"`, text: "<tool_call>\n{\"arguments\": {\"city\": \"Paris\"}}\n</tool_call>"},
		{name: "name not a string", call: 1, problem: `"name" is not a string`, text: "<tool_call>\n{\"name\": 7, \"arguments\": {}}\n</tool_call>"},
		{name: "empty name", call: 1, problem: `"name" is empty`, text: "<tool_call>\n{\"name\": \"\", \"arguments\": {}}\n</tool_call>"},
		{name: "no arguments key", call: 1, problem: `no "arguments"`, text: "<tool_call>\n{\"name\": \"get_time\"}\n</tool_call>"},
		{name: "parameters", call: 1, problem: `"parameters", not "arguments"`,
			text: "<tool_call>\n{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\"}}\n</tool_call>"},
		{name: "arguments a string", call: 1, problem: `"arguments" is a string`,
			text: "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": \"{\\\"city\\\": \\\"Paris\\\"}\"}\n</tool_call>"},
		{name: "arguments a list", call: 1, problem: `"arguments" is not an object`,
			text: "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": [\"Paris\"]}\n</tool_call>"},
		{name: "arguments null", call: 1, problem: `"arguments" is not an object`,
			text: "<tool_call>\n{\"name\": \"get_time\", \"arguments\": null}\n</tool_call>"},
		{name: "Qwen2.5 layout without newlines", call: 1, problem: "not in Qwen3's layout",
			text: "<tool_call>{\"name\": \"get_time\", \"arguments\": {}}</tool_call>"},
		{name: "unclosed", call: 1, problem: "never closed", text: "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n"},
		{name: "second unclosed", call: 2, problem: "<tool_call> at byte 100 is never closed", calls: []string{"get_weather"},
			text: qwenCallWeather + "\n<tool_call>\n{\"name\": \"get_time\", \"arguments\": {}}"},
		{name: "cut inside a call", cut: true, calls: []string{"get_weather"},
			text: qwenCallWeather + "\n<tool_call>\n{\"name\": \"get_time\", \"argu"},
		{name: "cut inside the open tag", cut: true, calls: []string{"get_weather"}, text: qwenCallWeather + "\n<tool_c"},
		{name: "cut, then text after a call", cut: true, call: 1, problem: "text after it", calls: []string{"get_weather"},
			text: qwenCallWeather + "\nNow I wait for"},
		{name: "nested open", call: 1, problem: "another <tool_call> at byte 12 opens before it is closed",
			text: "<tool_call>\n<tool_call>\n{\"name\": \"get_time\", \"arguments\": {}}\n</tool_call>"},
		{name: "stray close", problem: "</tool_call> at byte 13 closes no <tool_call>", text: "No call here.</tool_call>"},
		{name: "stray close before a call", problem: "</tool_call> at byte 0 closes no", text: "</tool_call>\n" + qwenCallNoArgs},
		{name: "close twice", problem: "</tool_call> at byte 100 closes no <tool_call>", calls: []string{"get_weather"}, text: qwenCallWeather + "\n</tool_call>"},
		{name: "text after the calls", call: 1, problem: `text after it, "Let me know`, calls: []string{"get_weather"},
			text: qwenCallWeather + "\nLet me know if you need anything else."},
		{name: "text between calls", call: 1, problem: `text after it, "and then"`, calls: []string{"get_weather"},
			text: qwenCallWeather + "\nand then\n" + qwenCallSearch},
		// A JSON string holding </tool_call> ends the block there, as SGLang's parser reads it.
		{name: "close tag inside a string", call: 1, problem: "not valid JSON",
			text: "<tool_call>\n{\"name\": \"run\", \"arguments\": {\"code\": \"print('\n</tool_call>')\"}}\n</tool_call>"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			content, calls, p := splitTextToolCalls(tt.text, tt.cut)
			var names []string
			for _, c := range calls {
				names = append(names, c.Name)
				if tt.text[c.Start:c.Start+len(toolCallOpen)] != toolCallOpen || !strings.HasSuffix(tt.text[:c.End], toolCallClose) {
					t.Errorf("call %q spans %d..%d: %q", c.Name, c.Start, c.End, tt.text[c.Start:c.End])
				}
				if !json.Valid(c.Arguments) || c.Arguments[0] != '{' {
					t.Errorf("call %q arguments %s", c.Name, c.Arguments)
				}
			}
			if strings.Join(names, ",") != strings.Join(tt.calls, ",") {
				t.Errorf("calls %v, want %v", names, tt.calls)
			}
			if tt.problem == "" {
				if p != nil {
					t.Fatalf("problem %q", p.Error())
				}
				if content != tt.content {
					t.Errorf("content %q, want %q", content, tt.content)
				}
				return
			}
			if p == nil {
				t.Fatalf("no problem, want %q", tt.problem)
			}
			if !strings.Contains(p.Error(), tt.problem) || p.Call != tt.call {
				t.Errorf("problem %q (call %d), want %q (call %d)", p.Error(), p.Call, tt.problem, tt.call)
			}
			checkDetail(t, p.Error())
		})
	}
}

// checkDetail: a rejection detail is bounded and prints nothing a
// terminal would act on.
func checkDetail(t *testing.T, d string) {
	t.Helper()
	if len(d) > 400 {
		t.Errorf("detail is %d bytes: %q", len(d), d)
	}
	if !utf8.ValidString(d) {
		t.Errorf("detail is not UTF-8: %q", d)
	}
	for _, r := range d {
		if !unicode.IsPrint(r) && r != ' ' {
			t.Errorf("detail holds %U: %q", r, d)
		}
	}
}

func TestToolCallBlockIndex(t *testing.T) {
	for _, tt := range []struct {
		text string
		want int
	}{
		{"I should call get_weather for Paris.", -1},
		{"The format is to wrap the call in <tool_call> tags, with JSON inside.", -1},
		{"I'll write <tool_call></tool_call> around it.", -1},
		{"Let me call it.\n" + qwenCallWeather, 16},
		{"mention <tool_call> first, then <tool_call>\n  {\"name\": \"x\"}", 32},
	} {
		if got := toolCallBlockIndex(tt.text); got != tt.want {
			t.Errorf("toolCallBlockIndex(%q) = %d, want %d", tt.text, got, tt.want)
		}
	}
}

func TestToolCallDeclaredNames(t *testing.T) {
	for _, tt := range []struct {
		tools string
		names string
		ok    bool
	}{
		{``, "", true},
		{`[{"type":"function","function":{"name":"get_weather","parameters":{}}},{"type":"function","function":{"name":"search_web"}}]`, "get_weather,search_web", true},
		{`[{"name":"get_time","description":"now","parameters":{"type":"object"}}]`, "get_time", true},
		{`[{"type":"function","function":{"description":"no name"}}]`, "", false},
		{`[{"type":"retrieval"}]`, "", false},
		{`{"not":"a list"}`, "", false},
	} {
		names, ok := declaredToolNames(json.RawMessage(tt.tools))
		if strings.Join(names, ",") != tt.names || ok != tt.ok {
			t.Errorf("declaredToolNames(%s) = %v, %v; want %s, %v", tt.tools, names, ok, tt.names, tt.ok)
		}
	}
}

func TestToolCallArguments(t *testing.T) {
	for _, tt := range []struct {
		raw  string
		want string // substring; "" = fine
	}{
		{`{"city":"Paris"}`, ""},
		{`"{\"city\": \"Paris\"}"`, ""},
		{`"{}"`, ""},
		{`{}`, ""},
		{``, "no arguments"},
		{`null`, "no arguments"},
		{`""`, "does not hold a JSON object"},
		{`"\"{\\\"city\\\": \\\"Paris\\\"}\""`, "does not hold a JSON object"}, // encoded twice
		{`"{\"city\": "`, "does not hold a JSON object"},
		{`["Paris"]`, "not a JSON object"},
		{`7`, "not a JSON object"},
	} {
		got := checkCallArguments(json.RawMessage(tt.raw))
		if (tt.want == "") != (got == "") || !strings.Contains(got, tt.want) {
			t.Errorf("checkCallArguments(%s) = %q, want %q", tt.raw, got, tt.want)
		}
	}
}

func TestToolCallQuoteClipped(t *testing.T) {
	if got := quoteClipped("get_weather", 64); got != `"get_weather"` {
		t.Errorf("got %s", got)
	}
	// Cut at a rune's start, control characters and a terminal escape escaped.
	got := quoteClipped("日本語\x1b[31m\u202e"+strings.Repeat("x", 100), 10)
	if got != `"日本語\x1b"…` {
		t.Errorf("got %s", got)
	}
	got = quoteClipped("日本語", 4)
	if got != `"日"…` {
		t.Errorf("got %s", got)
	}
	if got := quoteNames([]string{"a", "b", "c"}, 2); got != `"a", "b" and 1 more` {
		t.Errorf("got %s", got)
	}
}
