//go:build e2e

package stages

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/pipe-dev/pipe/internal/testrig/specforgeref"
	"github.com/pipe-dev/pipe/internal/testrig/testenv"
	"github.com/pipe-dev/pipe/internal/testrig/trainers"
	"github.com/pipe-dev/pipe/pipeline/record"
	"github.com/pipe-dev/pipe/stages/tokenize"
)

// The tools of the end-to-end tool conversations.
const e2eTools = `[{"type": "function", "function": {"name": "get_weather", "description": "Weather of a city", "parameters": {"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}}, "required": ["city"]}}}, ` +
	`{"type": "function", "function": {"name": "lookup", "parameters": {"type": "object", "properties": {"q": {"type": "string"}}}}}]`

// toolE2EPrompts are n prompts with tools, of four shapes in turn: a user
// question; a call and its result (arguments as OpenAI's string); two
// rounds of calls and results (arguments as objects, the second call's
// turn with its reasoning); and a finished round, its answer with its
// reasoning, and a follow-up question.
func toolE2EPrompts(n int) string {
	var b strings.Builder
	for i := range n {
		var msgs string
		switch i % 4 {
		case 0:
			msgs = fmt.Sprintf(`[{"role": "user", "content": "What's the weather in city %d?"}]`, i)
		case 1:
			msgs = fmt.Sprintf(`[{"role": "user", "content": "Weather in Paris for %d days?"}, `+
				`{"role": "assistant", "content": "", "tool_calls": [{"id": "call_%d_a", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\", \"days\": %d}"}}]}, `+
				`{"role": "tool", "tool_call_id": "call_%d_a", "name": "get_weather", "content": "{\"temp_c\": 18, \"sky\": \"clear\"}"}]`, i, i, i%7+1, i)
		case 2:
			msgs = fmt.Sprintf(`[{"role": "user", "content": "Plan trip %d to Rome."}, `+
				`{"role": "assistant", "content": "Checking the weather.", "tool_calls": [{"id": "w%d", "type": "function", "function": {"name": "get_weather", "arguments": {"city": "Rome", "days": 3}}}]}, `+
				`{"role": "tool", "tool_call_id": "w%d", "content": "sunny, 24 C"}, `+
				`{"role": "assistant", "content": "", "reasoning_content": "Museums next.", "tool_calls": [{"id": "l%d", "type": "function", "function": {"name": "lookup", "arguments": {"q": "Rome museums"}}}]}, `+
				`{"role": "tool", "tool_call_id": "l%d", "content": "Vatican Museums; Borghese Gallery"}]`, i, i, i, i, i)
		case 3:
			msgs = fmt.Sprintf(`[{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Weather in Oslo, case %d?"}, `+
				`{"role": "assistant", "content": "", "tool_calls": [{"id": "o%d", "type": "function", "function": {"name": "get_weather", "arguments": {"city": "Oslo"}}}]}, `+
				`{"role": "tool", "tool_call_id": "o%d", "content": "-3 C, snow"}, `+
				`{"role": "assistant", "content": "It is -3 C with snow.", "reasoning_content": "The tool says -3 C."}, `+
				`{"role": "user", "content": "And tomorrow?"}]`, i, i, i)
		}
		fmt.Fprintf(&b, `{"id": "t%02d", "tools": %s, "messages": %s}`+"\n", i, e2eTools, msgs)
	}
	return b.String()
}

// toolE2EPipeline: generate → validate-thinking → tokenize-and-mask, the
// rows and SpecForge's conversations file written, every reject kept.
func toolE2EPipeline(servers, api, qwen, turns string) string {
	return fmt.Sprintf(`
[[stage]]
id   = "prompts"
kind = "read-prompts"
path = "prompts.jsonl"

[[stage]]
id                = "gen"
kind              = "generate"
input             = "prompts"
servers           = [%q]
api               = %q
tokenizer         = %q
turns             = %q
concurrency       = 8
max_output_tokens = 2048
ready_timeout     = "20s"

[[stage]]
id        = "check"
kind      = "validate-thinking"
input     = "gen"
tokenizer = %q
disable   = ["repetition"]

[[stage]]
id        = "tok"
kind      = "tokenize-and-mask"
input     = "check.accepted"
tokenizer = %q

[[stage]]
id    = "rows"
kind  = "write-jsonl"
input = "tok"
path  = "out/rows.jsonl"

[[stage]]
id     = "conv"
kind   = "write-jsonl"
input  = "tok"
path   = "out/conversations.jsonl"
layout = "conversations"

[[stage]]
id    = "bad"
kind  = "write-jsonl"
input = ["gen.rejected", "check.rejected", "tok.rejected"]
path  = "out/bad.jsonl"
`, servers, api, qwen, turns, qwen, qwen)
}

// compactArguments is msgs with each call's arguments without the white
// space between JSON tokens (which JSON writers drop; key order, number
// spelling and a string's text are kept).
func compactArguments(msgs []record.Message) []record.Message {
	out := slices.Clone(msgs)
	for i := range out {
		out[i].ToolCalls = slices.Clone(out[i].ToolCalls)
		for k := range out[i].ToolCalls {
			var b bytes.Buffer
			if json.Compact(&b, out[i].ToolCalls[k].Function.Arguments) == nil {
				out[i].ToolCalls[k].Function.Arguments = b.Bytes()
			}
		}
	}
	return out
}

// asTemplateMessage is m as apply_chat_template gets it (the OpenAI keys
// record.Message writes), its JSON kept as written: key order matters to
// the template's tojson.
func asTemplateMessage(t *testing.T, m record.Message) json.RawMessage {
	t.Helper()
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// rowReference is a row's conversation as jinja2 gets it: the record's
// messages and its completion as the last assistant turn (with its
// reasoning and, on the chat API, the server's parsed calls).
func rowReference(t *testing.T, r *record.Record) []json.RawMessage {
	var msgs []json.RawMessage
	for _, m := range r.Messages {
		msgs = append(msgs, asTemplateMessage(t, m))
	}
	c := r.Completion
	msgs = append(msgs, asTemplateMessage(t, record.Message{Role: "assistant", Content: c.Answer, ReasoningContent: c.Reasoning, ToolCalls: c.ToolCalls}))
	return msgs
}

// checkRowsAgainstReferences checks every row: the prompt the model was
// sent on /generate (its ids) and the row (text, ids and SpecForge's
// qwen3-thinking labelling) against jinja2's render with the tools and Hugging
// Face tokenizers' ids, and no loss on the tools block or a tool result.
func checkRowsAgainstReferences(t *testing.T, tok *tokenize.Tokenizer, qwen, api string, rows []*record.Record) {
	t.Helper()
	var convs []map[string]any
	for _, r := range rows {
		tools := r.Tools // as written: the order of its keys is what tojson prints
		var prompt []json.RawMessage
		for _, m := range r.Messages {
			prompt = append(prompt, asTemplateMessage(t, m))
		}
		kw := map[string]any{"enable_thinking": true}
		convs = append(convs,
			map[string]any{"messages": prompt, "tools": tools, "add_generation_prompt": true, "kwargs": kw, "parse_arguments": true},
			map[string]any{"messages": rowReference(t, r), "tools": tools, "add_generation_prompt": false, "kwargs": kw, "parse_arguments": true})
	}
	rendered := refRender(t, tok, convs)
	var texts []string
	at := map[string]int{}
	add := func(s string) {
		if _, ok := at[s]; !ok {
			at[s] = len(texts)
			texts = append(texts, s)
		}
	}
	spans := make([][]specforgeref.Span, len(rows))
	for i := range rows {
		add(rendered[2*i])
		full := rendered[2*i+1]
		add(full)
		spans[i] = specforgeref.Spans(full, specforgeref.Qwen3Thinking, false)
		for _, sp := range spans[i] {
			add(full[:sp.Start])
			add(full[:sp.End])
		}
	}
	hf := refEncode(t, qwen, texts)
	for i, r := range rows {
		prompt, full := rendered[2*i], rendered[2*i+1]
		if !strings.Contains(prompt, "# Tools") || !strings.Contains(prompt, `"name": "lookup"`) {
			t.Fatalf("%s: jinja2's prompt lacks the tools block:\n%s", r.ID, prompt)
		}
		if api == "generate" && !slices.Equal(r.Completion.PromptIDs, hf[at[prompt]]) {
			t.Fatalf("%s: the prompt sent is\n%q\njinja2 renders\n%q", r.ID, tok.Decode(r.Completion.PromptIDs), prompt)
		}
		ids := toInts(r.Tokens.InputIDs)
		if got := tok.Decode(ids); got != full {
			t.Fatalf("%s: row decodes to\n%q\njinja2 renders\n%q", r.ID, got, full)
		}
		if !slices.Equal(ids, hf[at[full]]) {
			t.Fatalf("%s: row ids differ from Hugging Face tokenizers' encoding of the render", r.ID)
		}
		mask := make([]int, len(ids))
		for k, m := range r.Tokens.LossMask {
			mask[k] = int(m)
		}
		want := specforgeref.Mask(len(ids), spans[i], func(off int) int { return len(hf[at[full[:off]]]) })
		if k := slices.IndexFunc(mask, func(int) bool { return false }); !slices.Equal(mask, want) {
			for k = 0; mask[k] == want[k]; k++ {
			}
			t.Fatalf("%s: token %d (%q) has mask %d, SpecForge's qwen3-thinking labelling %d", r.ID, k, tok.Decode(ids[k:k+1]), mask[k], want[k])
		}
		for _, run := range maskedRuns(tok, r.Tokens) {
			if strings.Contains(run, "<tool_response>") || strings.Contains(run, "# Tools") {
				t.Fatalf("%s: loss on the tools block or a tool result: %q", r.ID, run)
			}
		}
	}
}

// Tool conversations go through real processes, a `pipe sim` server that
// calls the declared tools in some answers (malformed in some) and
// `pipe run`, on both APIs: a question with tools, a call and its result,
// two rounds of calls, and a finished round with a follow-up. Every row
// keeps its input's messages and tools field by field; the prompt sent
// and the row equal jinja2's render with the tools and HF's ids, labelled
// as SpecForge labels them, with no loss on a tool result; every
// malformed call is rejected as bad_tool_call; and SpecForge's loader
// reads the conversations file with each row's tools.
func TestToolConversationsEndToEndProcess(t *testing.T) {
	if testing.Short() {
		t.Skip("real processes")
	}
	qwen := testenv.Qwen3Dir(t)
	tok := testQwen3(t)
	bin := testenv.PipeBinary(t)
	const n = 48
	prompts := toolE2EPrompts(n)
	in := map[string]*record.Record{}
	for _, line := range strings.Split(strings.TrimSpace(prompts), "\n") {
		var r record.Record
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatal(err)
		}
		in[r.ID] = &r
	}
	for _, api := range []string{"generate", "chat"} {
		t.Run(api, func(t *testing.T) {
			args := []string{"--speed", "500", "--think-mean", "60", "--answer-mean", "20", "--tokenizer", qwen,
				"--tool-calls", "0.7", "--fault", "bad-tool-call:0.2"}
			if api == "chat" {
				args = append(args, "--tool-call-parser", "qwen25")
			}
			srv := testenv.StartSim(t, bin, 1, args...)
			dir := t.TempDir()
			for name, text := range map[string]string{"prompts.jsonl": prompts, "p.toml": toolE2EPipeline(srv.URLs[0], api, qwen, "last")} {
				if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			said, err := pipeCmd(t, nil, "run", filepath.Join(dir, "p.toml"))
			if err != nil {
				t.Fatalf("pipe run: %v\n%s", err, said)
			}
			rows := readRecords(t, filepath.Join(dir, "out/rows.jsonl"))
			// The report counts the conversations with tools, and shows the
			// calls and results in its sample rows; pipe inspect shows them.
			if want := fmt.Sprintf("/out/rows.jsonl): %d rows; finish reasons:", len(rows)); !strings.Contains(said, want) ||
				!strings.Contains(said, fmt.Sprintf("; %d conversations with tools", len(rows))) {
				t.Errorf("the report does not count the conversations with tools:\n%s", said)
			}
			html, err := os.ReadFile(filepath.Join(dir, "runs", "p", "report.html"))
			if err != nil || !strings.Contains(string(html), "tool calls and results") || !strings.Contains(string(html), "← result") {
				t.Errorf("the HTML report's sample rows do not show tool calls and results (%v)", err)
			}
			shown, err := pipeCmd(t, nil, "inspect", "--rows", "8", filepath.Join(dir, "out/rows.jsonl"))
			if err != nil || !strings.Contains(shown, "  tools     get_weather, lookup\n") || !strings.Contains(shown, "  call      get_weather ") || !strings.Contains(shown, "  result    ") {
				t.Errorf("pipe inspect does not show the tools, calls and results (%v):\n%s", err, shown)
			}
			bad := readRecords(t, filepath.Join(dir, "out/bad.jsonl"))
			if len(rows)+len(bad) != n || len(bad) == 0 {
				t.Fatalf("%d rows and %d rejected of %d; want both", len(rows), len(bad), n)
			}
			for _, r := range bad {
				if r.Reject.Reason != ReasonBadToolCall {
					t.Errorf("%s rejected as %s (%s), want %s", r.ID, r.Reject.Reason, r.Reject.Detail, ReasonBadToolCall)
				}
			}
			shapes, calling := map[int]int{}, 0
			for _, r := range rows {
				want := in[r.ID]
				if !reflect.DeepEqual(compactArguments(r.Messages), compactArguments(want.Messages)) || normalJSON(t, r.Tools) != normalJSON(t, want.Tools) {
					t.Fatalf("%s: messages or tools changed:\n%+v\nwant\n%+v", r.ID, r.Messages, want.Messages)
				}
				var k int
				fmt.Sscanf(r.ID, "t%d", &k)
				shapes[k%4]++
				if len(r.Completion.ToolCalls) > 0 || strings.Contains(r.Completion.Answer, "<tool_call>") {
					calling++
				}
			}
			if len(shapes) != 4 || calling == 0 || calling == len(rows) {
				t.Fatalf("rows by shape %v, %d of %d calling a tool: the test does not reach every case", shapes, calling, len(rows))
			}
			checkRowsAgainstReferences(t, tok, qwen, api, rows)

			// SpecForge's raw route: the conversations file, each row's
			// tools passed to the template, the messages as given.
			load, err := trainers.LoadSpecForge(filepath.Join(dir, "out/conversations.jsonl"), trainers.SpecForgeOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if len(load.Conversations) != len(rows) || len(load.Warnings) > 0 {
				t.Fatalf("SpecForge's loader: %d conversations of %d rows, warnings %q", len(load.Conversations), len(rows), load.Warnings)
			}
			for _, r := range rows {
				var tools any
				json.Unmarshal(in[r.ID].Tools, &tools)
				if !reflect.DeepEqual(load.Tools[r.ID], tools) {
					t.Fatalf("%s: SpecForge's loader passes tools %v, want %v", r.ID, load.Tools[r.ID], tools)
				}
				conv := load.Conversations[r.ID]
				if len(conv) != len(r.Messages)+1 {
					t.Fatalf("%s: SpecForge reads %d messages, want %d", r.ID, len(conv), len(r.Messages)+1)
				}
				for i, m := range r.Messages {
					if conv[i]["role"] != m.Role || (m.ToolCallID != "" && conv[i]["tool_call_id"] != m.ToolCallID) || (len(m.ToolCalls) > 0) != (conv[i]["tool_calls"] != nil) {
						t.Fatalf("%s: message %d as SpecForge reads it: %v, pipe's %+v", r.ID, i+1, conv[i], m)
					}
				}
			}
			t.Logf("%s API: %d rows (%d calling a tool) equal jinja2 and HF, labelled as SpecForge; %d rejected as bad_tool_call", api, len(rows), calling, len(bad))
		})
	}
}

// runGenProcess runs `pipe run` of read-prompts → generate (genKeys) →
// write-jsonl over recs and returns the completions and the rejects.
func runGenProcess(t *testing.T, genKeys string, recs []*record.Record) (out, rejected []*record.Record, said string) {
	t.Helper()
	dir := t.TempDir()
	var b bytes.Buffer
	for _, r := range recs {
		line, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		b.Write(line)
		b.WriteByte('\n')
	}
	if err := os.WriteFile(filepath.Join(dir, "prompts.jsonl"), b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "p.toml"), []byte(genPipeline(genKeys)), 0o644); err != nil {
		t.Fatal(err)
	}
	said, err := pipeCmd(t, nil, "run", filepath.Join(dir, "p.toml"))
	if err != nil {
		t.Fatalf("pipe run: %v\n%s", err, said)
	}
	out = readRecords(t, filepath.Join(dir, "out/completions.jsonl"))
	if _, err := os.Stat(filepath.Join(dir, "out/rejected.jsonl")); err == nil {
		rejected = readRecords(t, filepath.Join(dir, "out/rejected.jsonl"))
	}
	return out, rejected, said
}

// replyAsGiven is a completion as a given assistant turn: its content,
// reasoning and calls (ids given as a dataset would give them).
func replyAsGiven(t *testing.T, c *record.Completion, id string) record.Message {
	t.Helper()
	content, calls, ok := replyCalls(c)
	if !ok {
		t.Fatalf("malformed calls in %q", c.Answer)
	}
	for k := range calls {
		calls[k].ID = fmt.Sprintf("%s_%d", id, k)
	}
	return record.Message{Role: "assistant", Content: content, ReasoningContent: c.Reasoning, ToolCalls: calls}
}

// turns = "all" on tool conversations, with real processes on both APIs.
// Given conversations are the simulated model's own trajectories (two
// rounds: its call, a result, its next turn), so a regeneration makes the
// same calls: their results are kept, the given ids with them, and the
// conversation goes on to its end. Changed ones end where the new turn
// differs, each with its reason: the call's arguments changed
// (call_differs), a call where the given turn answered (new_call), an
// answer where the given turn called (no_call).
func TestTurnsAllToolConversationsProcess(t *testing.T) {
	if testing.Short() {
		t.Skip("real processes")
	}
	qwen := testenv.Qwen3Dir(t)
	bin := testenv.PipeBinary(t)
	const n = 24
	for _, api := range []string{"generate", "chat"} {
		t.Run(api, func(t *testing.T) {
			args := []string{"--speed", "500", "--think-mean", "40", "--answer-mean", "15", "--tokenizer", qwen, "--tool-calls", "0.5"}
			if api == "chat" {
				args = append(args, "--tool-call-parser", "qwen25")
			}
			srv := testenv.StartSim(t, bin, 1, args...)
			keys := serversKey(srv.URLs) + fastGenKeys + readyKey + fmt.Sprintf("api = %q\ntokenizer = %q\nenable_thinking = true\n", api, qwen)
			tools := json.RawMessage(e2eTools)
			var first []*record.Record
			for i := range n {
				first = append(first, &record.Record{ID: fmt.Sprintf("c%02d", i), Tools: tools,
					Messages: []record.Message{{Role: "user", Content: fmt.Sprintf("Trip %d: what should I pack for Lisbon?", i)}}})
			}
			// The model's first turns, then its second after a result.
			c1, rej, _ := runGenProcess(t, keys, first)
			if len(rej) > 0 || len(c1) != n {
				t.Fatalf("first turns: %d, %d rejected", len(c1), len(rej))
			}
			var second []*record.Record
			given := map[string][]record.Message{}
			var answered []*record.Record
			for _, r := range c1 {
				a := replyAsGiven(t, r.Completion, r.ID+"_1")
				if len(a.ToolCalls) == 0 {
					answered = append(answered, r)
					continue
				}
				msgs := append(slices.Clone(r.Messages), a, record.Message{Role: "tool", ToolCallID: a.ToolCalls[0].ID, Content: "Result for " + r.ID})
				given[r.ID] = msgs
				second = append(second, &record.Record{ID: r.ID, Tools: tools, Messages: msgs})
			}
			if len(second) < 4 || len(answered) < 2 {
				t.Fatalf("%d first turns call a tool, %d answer: the test needs both", len(second), len(answered))
			}
			c2, rej, _ := runGenProcess(t, keys+"turns = \"last\"\n", second)
			if len(rej) > 0 || len(c2) != len(second) {
				t.Fatalf("second turns: %d, %d rejected", len(c2), len(rej))
			}
			var regen []*record.Record
			want := map[string]string{} // id → the reason it ends, "" for none
			for k, r := range c2 {
				msgs := append(given[r.ID], replyAsGiven(t, r.Completion, r.ID+"_2"))
				if calls := msgs[len(msgs)-1].ToolCalls; len(calls) > 0 {
					msgs = append(msgs, record.Message{Role: "tool", ToolCallID: calls[0].ID, Content: "Second result for " + r.ID})
				} else {
					msgs = append(msgs, record.Message{Role: "user", Content: "Thanks. One more tip?"})
				}
				given[r.ID] = msgs
				regen = append(regen, &record.Record{ID: r.ID, Tools: tools, Messages: msgs})
				want[r.ID] = ""
				if k == 0 {
					// The same conversation with the first call's
					// arguments changed.
					changed := slices.Clone(msgs)
					changed[1].ToolCalls = slices.Clone(changed[1].ToolCalls)
					changed[1].ToolCalls[0].Function.Arguments = json.RawMessage(`{"city": "Nowhere", "days": 99}`)
					regen = append(regen, &record.Record{ID: r.ID + "-differs", Tools: tools, Messages: changed})
					want[r.ID+"-differs"] = EndedCallDiffers
					// The first turn given as an answer without a call.
					answer := []record.Message{msgs[0], {Role: "assistant", Content: "Pack light."}, {Role: "user", Content: "And shoes?"}}
					regen = append(regen, &record.Record{ID: r.ID + "-new", Tools: tools, Messages: answer})
					want[r.ID+"-new"] = EndedNewCall
				}
			}
			// A first turn that answered, given as one that called.
			a := answered[0]
			regen = append(regen, &record.Record{ID: a.ID + "-nocall", Tools: tools, Messages: []record.Message{a.Messages[0],
				{Role: "assistant", ToolCalls: []record.ToolCall{{ID: "x1", Type: "function", Function: record.FunctionCall{Name: "lookup", Arguments: json.RawMessage(`{"q": "Lisbon"}`)}}}},
				{Role: "tool", ToolCallID: "x1", Content: "Mild."}}})
			want[a.ID+"-nocall"] = EndedNoCall

			out, rej, said := runGenProcess(t, keys+"turns = \"all\"\n", regen)
			if len(rej) > 0 || len(out) != len(regen) {
				t.Fatalf("turns = all: %d out, %d rejected of %d", len(out), len(rej), len(regen))
			}
			kept := 0
			for _, r := range out {
				why, _ := r.Meta[record.MetaConversationEnded].(string)
				if why != want[r.ID] {
					t.Errorf("%s: ended %q, want %q", r.ID, why, want[r.ID])
					continue
				}
				if why != "" {
					// Ended at the first turn: the history is the question.
					if len(r.Messages) != 1 || r.Messages[0].Role != "user" {
						t.Errorf("%s: ended (%s) with history %+v", r.ID, why, r.Messages)
					}
					continue
				}
				// Regenerated whole: the model's turns as given (the calls
				// with their given ids), the results kept.
				g := given[r.ID]
				if !reflect.DeepEqual(compactArguments(r.Messages), compactArguments(g)) {
					t.Errorf("%s: regenerated history\n%+v\nwant the given\n%+v", r.ID, r.Messages, g)
					continue
				}
				kept++
			}
			if kept == 0 {
				t.Fatal("no conversation was regenerated whole")
			}
			for _, why := range []string{EndedCallDiffers, EndedNewCall, EndedNoCall} {
				if !strings.Contains(said, "conversations ended ") || !strings.Contains(said, " "+why+" 1") {
					t.Errorf("the summary does not count %s:\n%s", why, said)
				}
			}
			t.Logf("%s API: %d conversations regenerated whole with their results; 3 ended as planned", api, kept)
		})
	}
}
