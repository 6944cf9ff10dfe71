package sglang

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/pipe-dev/pipe/pipeline/record"
	"github.com/pipe-dev/pipe/stages/sglang/sim"
	"github.com/pipe-dev/pipe/stages/sglang/sim/simtest"
)

// Tool calls between the client and the sim over HTTP, on both APIs.

var callIDRe = regexp.MustCompile(`^call_[0-9a-f]{24}$`)

// toolConversation is [user, assistant calling get_weather, tool result,
// user]: a second round.
func toolConversation(i int) []Message {
	return []Message{
		{Role: "user", Content: fmt.Sprintf("Weather in city %d?", i)},
		{Role: "assistant", ToolCalls: []record.ToolCall{{ID: "call_a", Type: "function",
			Function: record.FunctionCall{Name: "get_weather", Arguments: json.RawMessage(`"{\"city\": \"c\"}"`)}}}},
		{Role: "tool", Content: "sunny", ToolCallID: "call_a", Name: "get_weather"},
		{Role: "user", Content: "And tomorrow?"},
	}
}

// blockCall is the call in a "<tool_call>\n…\n</tool_call>" block of text:
// its JSON and whether it parsed.
func blockCall(t *testing.T, text string) (name string, args map[string]any, ok bool) {
	t.Helper()
	i := strings.Index(text, "<tool_call>\n")
	j := strings.Index(text, "\n</tool_call>")
	if i < 0 || j < i {
		t.Fatalf("no <tool_call> block in %q", text)
	}
	var c struct {
		Name      string         `json:"name"`
		Arguments map[string]any `json:"arguments"`
	}
	if json.Unmarshal([]byte(text[i+len("<tool_call>\n"):j]), &c) != nil {
		return "", nil, false
	}
	return c.Name, c.Arguments, true
}

func checkWeatherArgs(t *testing.T, args map[string]any) {
	t.Helper()
	city, _ := args["city"].(string)
	days, _ := args["days"].(float64)
	if city == "" || days < 1 || days > 9 || days != float64(int(days)) || len(args) != 2 {
		t.Errorf("arguments %v: want a string city and an integer days, in the schema's order", args)
	}
}

// On the chat API with --tool-call-parser qwen25 the answer's call comes
// back parsed: Result.ToolCalls with the server's id, the arguments as
// the JSON text SGLang sends, finish_reason "tool_calls", the answer
// without the block; the same request gets the same call. Without the
// parser the block stays in the answer; without tools no call is made.
func TestChatToolCallsOverHTTP(t *testing.T) {
	for _, parser := range []string{"qwen25", ""} {
		t.Run("parser="+parser, func(t *testing.T) {
			cfg := fastSim(1)
			cfg.Tokenizer, cfg.ToolCalls, cfg.ToolCallParser = simtest.ByteTokenizer{}, 1, parser
			f := startSim(t, cfg)
			c := startClient(t, specsOf(f.URLs(), 4), testOptions(APIChat))
			s := c.Session()
			defer s.Close()
			for i := range 4 {
				req := &Request{Tools: []byte(weatherTools), Messages: toolConversation(i)}
				r, err := s.Generate(context.Background(), req)
				if err != nil {
					t.Fatal(err)
				}
				prompt := simtest.ByteTokenizer{}.Decode(r.PromptIDs)
				if !strings.HasPrefix(prompt, "<|im_start|>system\n# Tools\n") || !strings.Contains(prompt, "\n<tools>\n"+pyTool+"\n</tools>\n") {
					t.Errorf("prompt ids lack Qwen3's tools block: %q", prompt)
				}
				if parser == "" {
					name, args, ok := blockCall(t, r.Answer)
					if !ok || name != "get_weather" || r.ToolCalls != nil || r.FinishReason != "stop" {
						t.Fatalf("answer %q: call %q ok %v, calls %v, finish %q", r.Answer, name, ok, r.ToolCalls, r.FinishReason)
					}
					checkWeatherArgs(t, args)
					continue
				}
				if len(r.ToolCalls) != 1 || r.FinishReason != "tool_calls" || r.MatchedStop != nil || strings.Contains(r.Answer, "tool_call") {
					t.Fatalf("calls %+v, finish %q matched %v, answer %q", r.ToolCalls, r.FinishReason, r.MatchedStop, r.Answer)
				}
				tc := r.ToolCalls[0]
				var argText string
				if !callIDRe.MatchString(tc.ID) || tc.Type != "function" || tc.Function.Name != "get_weather" || json.Unmarshal(tc.Function.Arguments, &argText) != nil {
					t.Fatalf("call %+v (arguments %s)", tc, tc.Function.Arguments)
				}
				var args map[string]any
				if err := json.Unmarshal([]byte(argText), &args); err != nil || !strings.HasPrefix(argText, `{"city": "`) {
					t.Fatalf("arguments %q: %v", argText, err)
				}
				checkWeatherArgs(t, args)
				again, err := s.Generate(context.Background(), req)
				if err != nil || fmt.Sprint(again.ToolCalls) != fmt.Sprint(r.ToolCalls) {
					t.Errorf("the same request called %+v, then %+v (%v)", r.ToolCalls, again.ToolCalls, err)
				}
			}
			r, err := s.Generate(context.Background(), &Request{Messages: []Message{{Role: "user", Content: "no tools"}}})
			if err != nil || r.ToolCalls != nil || strings.Contains(r.Answer, "<tool_call>") || r.FinishReason != "stop" {
				t.Errorf("a prompt without tools: calls %v, answer %q, finish %q (%v)", r.ToolCalls, r.Answer, r.FinishReason, err)
			}
		})
	}
}

// pyTool is weatherTools' element as Qwen3's template prints it (tojson).
const pyTool = `{"type": "function", "function": {"name": "get_weather", "description": "Weather in a city.", "parameters": {"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}}, "required": ["city"]}}}`

// qwen3ToolPrompt is a /generate prompt as Qwen3's template renders one
// with tools.
func qwen3ToolPrompt(i int) string {
	return "<|im_start|>system\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\n" +
		"You are provided with function signatures within <tools></tools> XML tags:\n<tools>\n" + pyTool +
		"\n</tools>\n\nFor each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\n" +
		"<tool_call>\n{\"name\": <function-name>, \"arguments\": <args-json-object>}\n</tool_call><|im_end|>\n" +
		fmt.Sprintf("<|im_start|>user\nWeather in city %d?<|im_end|>\n<|im_start|>assistant\n", i)
}

// On /generate (text and input_ids) the answer to a prompt with Qwen3's
// tools block ends in the call's block after the thinking; the share
// option decides how many answers call.
func TestGenerateToolCallsOverHTTP(t *testing.T) {
	tok := simtest.ByteTokenizer{}
	for _, ids := range []bool{false, true} {
		t.Run(fmt.Sprintf("input_ids=%v", ids), func(t *testing.T) {
			cfg := fastSim(1)
			cfg.Tokenizer = tok // default share: 0.5
			f := startSim(t, cfg)
			c := startClient(t, specsOf(f.URLs(), 8), testOptions(APIGenerate))
			s := c.Session()
			defer s.Close()
			calls := 0
			const n = 40
			for i := range n {
				req := &Request{Text: qwen3ToolPrompt(i)}
				if ids {
					req = &Request{InputIDs: tok.Encode(qwen3ToolPrompt(i))}
				}
				r, err := s.Generate(context.Background(), req)
				if err != nil {
					t.Fatal(err)
				}
				if !strings.Contains(r.Text, "<tool_call>") {
					continue
				}
				calls++
				name, args, ok := blockCall(t, r.Answer)
				if !ok || name != "get_weather" || !strings.HasSuffix(r.Answer, "\n</tool_call>") || r.Reasoning == "" || r.FinishReason != "stop" {
					t.Fatalf("answer %q (reasoning %d bytes, finish %q): call %q ok %v", r.Answer, len(r.Reasoning), r.FinishReason, name, ok)
				}
				checkWeatherArgs(t, args)
				if !slices.Contains(r.OutputIDs, 151657) || !slices.Contains(r.OutputIDs, 151658) {
					t.Errorf("output ids lack <tool_call>/</tool_call>'s ids")
				}
			}
			if calls < n/5 || calls > n*4/5 {
				t.Errorf("%d of %d answers call a tool, want about half", calls, n)
			}
		})
	}
}

// The fault bad-tool-call makes the call malformed: on /generate and on
// chat without a parser the block is not JSON or names an undeclared tool;
// with the parser SGLang drops it: no calls, finish_reason "tool_calls".
func TestBadToolCallOverHTTP(t *testing.T) {
	for _, api := range []API{APIGenerate, APIChat} {
		for _, parser := range []string{"", "qwen25"} {
			if api == APIGenerate && parser != "" {
				continue
			}
			t.Run(fmt.Sprintf("%s parser=%q", api, parser), func(t *testing.T) {
				cfg := fastSim(1)
				cfg.Tokenizer, cfg.ToolCallParser = simtest.ByteTokenizer{}, parser
				cfg.ToolCalls = -1 // only the fault calls
				cfg.Faults = []sim.Fault{{Kind: sim.FaultBadToolCall, Rate: 1}}
				f := startSim(t, cfg)
				c := startClient(t, specsOf(f.URLs(), 4), testOptions(api))
				s := c.Session()
				defer s.Close()
				kinds := map[string]int{}
				for i := range 16 {
					req := &Request{Text: qwen3ToolPrompt(i), Tools: []byte(weatherTools), Messages: toolConversation(i)}
					r, err := s.Generate(context.Background(), req)
					if err != nil {
						t.Fatal(err)
					}
					if parser != "" {
						if r.ToolCalls != nil || r.FinishReason != "tool_calls" || strings.Contains(r.Answer, "<tool_call>") {
							t.Fatalf("calls %v, finish %q, answer %q", r.ToolCalls, r.FinishReason, r.Answer)
						}
						continue
					}
					name, _, ok := blockCall(t, r.Answer)
					switch {
					case !ok:
						kinds["not JSON"]++
					case name != "get_weather":
						kinds["undeclared"]++
					default:
						t.Fatalf("a well-formed call under bad-tool-call: %q", r.Answer)
					}
				}
				if parser == "" && (kinds["not JSON"] == 0 || kinds["undeclared"] == 0) {
					t.Errorf("kinds of bad calls: %v, want both", kinds)
				}
				r, err := s.Generate(context.Background(), &Request{Text: "no tools", Messages: []Message{{Role: "user", Content: "no tools"}}})
				if err != nil || strings.Contains(r.Answer, "tool_call") {
					t.Errorf("a prompt without tools: %q (%v)", r.Answer, err)
				}
			})
		}
	}
}

// Tools the client cannot send fail the request as a bad request, at
// once: nothing reaches a server, nothing is retried.
func TestInvalidToolsNotSent(t *testing.T) {
	f := startSim(t, fastSim(1))
	c := startClient(t, specsOf(f.URLs(), 4), testOptions(APIChat))
	s := c.Session()
	defer s.Close()
	_, err := s.Generate(context.Background(), &Request{Tools: []byte(`{"not":"a list"}`), Messages: []Message{{Role: "user", Content: "q"}}})
	e, ok := err.(*Error)
	if !ok || !e.BadRequest() || e.Retryable() || e.Class != ClassInvalidRequest {
		t.Fatalf("err %v", err)
	}
}
