package stages

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/pipe-dev/pipe/internal/testrig/testenv"
	"github.com/pipe-dev/pipe/pipeline/engine"
	"github.com/pipe-dev/pipe/pipeline/record"
)

// A tool conversation reaches the model whole on /generate: the prompt is
// the model's own template rendered with the conversation's tools, its
// tool calls and their results; turns = "last" answers the last message
// (here a tool result) with the history as given; and the record keeps
// every message and field. The training row puts no loss on the tools
// block or on a tool result (the given call, an assistant turn, has it).
func TestGenerateToolConversation(t *testing.T) {
	dir := testenv.TinyQwen3Dir(t)
	tok := testTokenizer(t)
	const line = `{"id": "w", "tools": [{"type": "function", "function": {"name": "get_weather", "description": "Weather of a city", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}], ` +
		`"messages": [{"role": "user", "content": "What's the weather in Paris?"}, ` +
		`{"role": "assistant", "content": "", "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}]}, ` +
		`{"role": "tool", "tool_call_id": "call_1", "name": "get_weather", "content": "{\"temp_c\": 18, \"sky\": \"clear\"}"}]}`
	cfg := quickSim(1)
	cfg.Tokenizer = tok // output ids that spell the text, as a real server's
	f := startTestFleet(t, cfg)
	src := genPipeline(serversKey(f.URLs())+fastGenKeys+readyKey+fmt.Sprintf("api = \"generate\"\ntokenizer = %q\nenable_thinking = true\n", dir)) + fmt.Sprintf(`
[[stage]]
id        = "tok"
kind      = "tokenize-and-mask"
input     = "gen"
tokenizer = %q

[[stage]]
id    = "rows"
kind  = "write-jsonl"
input = "tok"
path  = "out/rows.jsonl"
`, dir)
	out, _, err := runGenPipeline(t, t.Context(), src, line+"\n", engine.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var in struct {
		Tools    json.RawMessage  `json:"tools"`
		Messages []record.Message `json:"messages"`
	}
	if err := json.Unmarshal([]byte(line), &in); err != nil {
		t.Fatal(err)
	}
	for _, file := range []string{"out/completions.jsonl", "out/rows.jsonl"} {
		recs := readRecords(t, filepath.Join(out, file))
		if len(recs) != 1 {
			t.Fatalf("%s: %d records", file, len(recs))
		}
		r := recs[0]
		if !reflect.DeepEqual(r.Messages, in.Messages) || normalJSON(t, r.Tools) != normalJSON(t, in.Tools) {
			t.Fatalf("%s: messages or tools changed:\n%+v\n%s\nwant\n%+v\n%s", file, r.Messages, r.Tools, in.Messages, in.Tools)
		}
		prompt := tok.Decode(r.Completion.PromptIDs)
		for _, want := range []string{"# Tools", `"name": "get_weather"`, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>",
			"<tool_response>\n{\"temp_c\": 18, \"sky\": \"clear\"}\n</tool_response>"} {
			if !strings.Contains(prompt, want) {
				t.Fatalf("%s: the prompt the model saw lacks %q:\n%s", file, want, prompt)
			}
		}
		if !strings.HasSuffix(prompt, "<|im_start|>assistant\n") {
			t.Fatalf("%s: the prompt does not end with the generation prompt:\n%s", file, prompt)
		}
		if file == "out/rows.jsonl" {
			for _, run := range maskedRuns(tok, r.Tokens) {
				// The given call is an assistant turn, trained as SpecForge
				// trains every assistant turn of the template.
				if strings.Contains(run, "tool_response") || strings.Contains(run, "# Tools") || strings.Contains(run, "temp_c") {
					t.Fatalf("loss on the tools block or a tool result: %q", run)
				}
			}
		}
	}
}

func normalJSON(t *testing.T, raw json.RawMessage) string {
	t.Helper()
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// On the chat API the tools and the earlier call and result are sent to
// the server, and with its tool-call parser the model's call comes back
// parsed: completion.tool_calls, with the server's id, and the row renders
// it in the model's own format, trained as the reply.
func TestGenerateToolConversationChat(t *testing.T) {
	dir := testenv.TinyQwen3Dir(t)
	tok := testTokenizer(t)
	const line = `{"id": "w", "tools": [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}], ` +
		`"messages": [{"role": "user", "content": "Weather in Paris and in Rome?"}, ` +
		`{"role": "assistant", "content": "", "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}]}, ` +
		`{"role": "tool", "tool_call_id": "call_1", "content": "18 C, clear"}]}`
	src := genPipeline(`servers = ["sim:1?speed=200&think_mean=60&answer_mean=20&tool_calls=1&tool_call_parser=qwen25"]`+"\n"+fastGenKeys+readyKey+
		fmt.Sprintf("api = \"chat\"\ntokenizer = %q\nenable_thinking = true\n", dir)) + fmt.Sprintf(`
[[stage]]
id        = "tok"
kind      = "tokenize-and-mask"
input     = "gen"
tokenizer = %q
mask      = "last_turn"

[[stage]]
id    = "rows"
kind  = "write-jsonl"
input = "tok"
path  = "out/rows.jsonl"
`, dir)
	out, _, err := runGenPipeline(t, t.Context(), src, line+"\n", engine.Options{})
	if err != nil {
		t.Fatal(err)
	}
	recs := readRecords(t, filepath.Join(out, "out/rows.jsonl"))
	if len(recs) != 1 {
		t.Fatalf("%d rows; rejected: %v", len(recs), readRecords(t, filepath.Join(out, "out/rejected.jsonl")))
	}
	c := recs[0].Completion
	if len(c.ToolCalls) != 1 || c.ToolCalls[0].Function.Name != "get_weather" || !strings.HasPrefix(c.ToolCalls[0].ID, "call_") || c.FinishReason != "tool_calls" {
		t.Fatalf("the model's call as the server parsed it: %+v (finish %s)", c.ToolCalls, c.FinishReason)
	}
	runs := maskedRuns(tok, recs[0].Tokens)
	if len(runs) != 1 || !strings.Contains(runs[0], "<tool_call>\n{\"name\": \"get_weather\"") {
		t.Fatalf("the reply's loss does not cover its call: %q", runs)
	}
}

// The model's calls are judged on both APIs: servers that call a declared
// tool in every answer, a malformed or undeclared call in some, go through
// generate → validate-thinking → tokenize-and-mask; every malformed call
// is rejected as bad_tool_call (on the chat API, the one the server's
// parser dropped), every good one trains as part of its reply.
func TestToolCallsValidatedOnBothAPIs(t *testing.T) {
	dir := testenv.TinyQwen3Dir(t)
	tok := testTokenizer(t)
	var prompts strings.Builder
	for i := range 30 {
		fmt.Fprintf(&prompts, `{"id": "p%02d", "tools": [{"type": "function", "function": {"name": "lookup", "parameters": {"type": "object", "properties": {"q": {"type": "string"}}}}}], "messages": [{"role": "user", "content": "Look up fact %d for me."}]}`+"\n", i, i)
	}
	for _, api := range []struct{ name, servers string }{
		{"generate", `servers = ["sim:1?speed=500&think_mean=60&answer_mean=20&tool_calls=1&faults=bad-tool-call:0.4"]`},
		{"chat", `servers = ["sim:1?speed=500&think_mean=60&answer_mean=20&tool_calls=1&tool_call_parser=qwen25&faults=bad-tool-call:0.4"]`},
	} {
		t.Run(api.name, func(t *testing.T) {
			src := genPipeline(api.servers+"\n"+fastGenKeys+readyKey+fmt.Sprintf("api = %q\ntokenizer = %q\nenable_thinking = true\n", api.name, dir)) + fmt.Sprintf(`
[[stage]]
id        = "check"
kind      = "validate-thinking"
input     = "gen"
tokenizer = %q

[[stage]]
id        = "tok"
kind      = "tokenize-and-mask"
input     = "check.accepted"
tokenizer = %q
mask      = "last_turn"

[[stage]]
id    = "rows"
kind  = "write-jsonl"
input = "tok"
path  = "out/rows.jsonl"

[[stage]]
id    = "bad"
kind  = "write-jsonl"
input = ["check.rejected", "tok.rejected"]
path  = "out/bad.jsonl"
`, dir, dir)
			out, _, err := runGenPipeline(t, t.Context(), src, prompts.String(), engine.Options{})
			if err != nil {
				t.Fatal(err)
			}
			rows, bad := readRecords(t, filepath.Join(out, "out/rows.jsonl")), readRecords(t, filepath.Join(out, "out/bad.jsonl"))
			if len(rows) == 0 || len(bad) == 0 || len(rows)+len(bad) != 30 {
				t.Fatalf("%d rows and %d rejected of 30; want both", len(rows), len(bad))
			}
			for _, r := range bad {
				if r.Reject.Reason != ReasonBadToolCall {
					t.Errorf("%s rejected as %s (%s), want %s", r.ID, r.Reject.Reason, r.Reject.Detail, ReasonBadToolCall)
				}
			}
			for _, r := range rows {
				runs := maskedRuns(tok, r.Tokens)
				if len(runs) != 1 || !strings.Contains(runs[0], "<tool_call>\n{\"name\": \"lookup\"") {
					t.Errorf("%s: the reply's loss does not cover its call: %q", r.ID, runs)
				}
			}
		})
	}
}
