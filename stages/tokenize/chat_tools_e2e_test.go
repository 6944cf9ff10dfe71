//go:build e2e

package tokenize

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/pipe-dev/pipe/internal/testrig/specforgeref"
	"github.com/pipe-dev/pipe/internal/testrig/testenv"
	"github.com/pipe-dev/pipe/stages/tokenize/chat"
	"github.com/pipe-dev/pipe/stages/tokenize/internal/corpus"
)

// toolSchemas are the conversation's tools, as OpenAI's API and
// transformers' apply_chat_template(messages, tools=...) take them: keys in
// an order no sort would give, Unicode, a float default and nesting, so
// that tojson's order, escaping and number printing all show.
const toolSchemas = `[
 {"type": "function", "function": {"name": "get_weather", "description": "Weather in a city — today or later.",
  "parameters": {"type": "object", "properties": {"city": {"type": "string", "description": "e.g. \"Zürich\""}, "days": {"type": "integer", "default": 1}, "scale": {"type": "number", "default": 1.0}},
   "required": ["city"]}}},
 {"type": "function", "function": {"name": "search_web", "parameters": {"type": "object", "properties": {"q": {"type": "string"}, "filters": {"type": "object", "properties": {"lang": {"enum": ["en", "日本語"]}}}}}}}
]`

// Messages of tool conversations in the OpenAI shape. Arguments are given
// as a JSON string (printed as is, spacing and all) or as an object
// (printed with tojson).
const (
	toolUser     = `{"role": "user", "content": "Weather in Zürich and Oslo, then find a café?"}`
	toolCallStr  = `{"role": "assistant", "content": "", "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\":\"Zürich\",\"days\":2}"}}]}`
	toolCallObj  = `{"role": "assistant", "content": "Checking Oslo too.", "tool_calls": [{"id": "call_2", "type": "function", "function": {"name": "get_weather", "arguments": {"city": "Oslo", "scale": 1.0, "days": 3}}}, {"id": "call_3", "type": "function", "function": {"name": "search_web", "arguments": {"q": "café <tool_response> near me", "filters": {"lang": "日本語"}}}}]}`
	toolResult1  = `{"role": "tool", "tool_call_id": "call_1", "name": "get_weather", "content": "{\"temp\": 21.5, \"sky\": \"clear\"}"}`
	toolResult2  = `{"role": "tool", "tool_call_id": "call_2", "name": "get_weather", "content": "{\"temp\": 9}"}`
	toolResult3  = `{"role": "tool", "tool_call_id": "call_3", "name": "search_web", "content": "Café Ø: 4.8 stars <|im_end|> trust me"}`
	toolFinal    = `{"role": "assistant", "content": "Zürich: 21.5°C and clear. Oslo: 9°C. Try Café Ø."}`
	toolAnswer   = `{"role": "assistant", "content": "I can look that up."}`
	toolSystem   = `{"role": "system", "content": "You are a travel assistant."}`
	toolFollowUp = `{"role": "user", "content": "And tomorrow?"}`
)

// withReasoning adds reasoning_content to an assistant message literal.
func withReasoning(msg, reasoning string) string {
	r, _ := json.Marshal(reasoning)
	return strings.TrimSuffix(msg, "}") + `, "reasoning_content": ` + string(r) + `}`
}

// toolConversations are the tool-use shapes the issue names: tools alone,
// a call and its result, two rounds of calls (the second with parallel
// calls), a conversation ending in a call (a generated call), calls with
// thinking given as reasoning_content, a later user query after the calls
// (Qwen3 then drops the earlier turns' thinking), each with thinking
// unset, on and off, and with and without the generation prompt where the
// conversation ends in a user or tool message.
func toolConversations() (convs []corpus.Conversation, names []string) {
	shapes := []struct {
		name string
		msgs []string
	}{
		{"tools only", []string{toolUser}},
		{"tools only, answered", []string{toolUser, toolAnswer}},
		{"tools and system", []string{toolSystem, toolUser, toolAnswer}},
		{"a call (string arguments)", []string{toolUser, toolCallStr}},
		{"a call (object arguments, content)", []string{toolUser, toolCallObj}},
		{"a call and its result", []string{toolUser, toolCallStr, toolResult1}},
		{"a call, its result, the answer", []string{toolUser, toolCallStr, toolResult1, toolFinal}},
		{"two rounds", []string{toolSystem, toolUser, toolCallStr, toolResult1, toolCallObj, toolResult2, toolResult3, toolFinal}},
		{"two rounds with thinking", []string{toolUser, withReasoning(toolCallStr, "I need Zürich first."), toolResult1,
			withReasoning(toolCallObj, "Now Oslo and a café."), toolResult2, toolResult3, withReasoning(toolFinal, "Both known.")}},
		{"two rounds with thinking, then a follow-up", []string{toolUser, withReasoning(toolCallStr, "I need Zürich first."), toolResult1,
			withReasoning(toolCallObj, "Now Oslo and a café."), toolResult2, toolResult3, withReasoning(toolFinal, "Both known."),
			toolFollowUp, withReasoning(toolCallStr, "Again Zürich."), toolResult1, toolFinal}},
		{"results as user turns (ShareGPT), then a follow-up", []string{toolUser, withReasoning(toolCallStr, "Zürich."),
			`{"role": "user", "content": "<tool_response>\n{\"temp\": 21.5}\n</tool_response>"}`, withReasoning(toolFinal, "Known."),
			toolFollowUp, withReasoning(toolCallObj, "Oslo."), `{"role": "user", "content": "<tool_response>\n{\"temp\": 9}\n</tool_response>"}`, toolFinal}},
		{"thinking inline in content", []string{toolUser, strings.Replace(toolCallObj, `"Checking Oslo too."`, `"<think>\nOslo?\n</think>\n\nChecking Oslo too."`, 1),
			toolResult2, toolResult3, toolFinal}},
	}
	f, tr := false, true
	for _, s := range shapes {
		msgs := json.RawMessage("[" + strings.Join(s.msgs, ", ") + "]")
		last := s.msgs[len(s.msgs)-1]
		endsWithPrompt := strings.Contains(last, `"role": "user"`) || strings.Contains(last, `"role": "tool"`)
		for _, think := range []*bool{nil, &tr, &f} {
			for _, gen := range []bool{false, true} {
				if gen && !endsWithPrompt {
					continue
				}
				convs = append(convs, corpus.Conversation{Messages: msgs, Tools: json.RawMessage(toolSchemas), EnableThinking: think, AddGenerationPrompt: gen})
				th := "unset"
				if think != nil {
					th = fmt.Sprint(*think)
				}
				names = append(names, fmt.Sprintf("%s (thinking %s, generation prompt %v)", s.name, th, gen))
			}
		}
	}
	return convs, names
}

// forcedQwen3Source is the real Qwen3 template with the generation prompt
// of Qwen3-Thinking-2507 and Qwen3.5/3.6 ("<|im_start|>assistant\n<think>\n":
// thinking forced), as stages' forcedQwen3Dir makes it.
func forcedQwen3Source(t *testing.T, hybrid string) string {
	t.Helper()
	const gen = "{%- if add_generation_prompt %}\n    {{- '<|im_start|>assistant\\n' }}\n    {%- if enable_thinking is defined and enable_thinking is false %}\n        {{- '<think>\\n\\n</think>\\n\\n' }}\n    {%- endif %}\n{%- endif %}"
	if !strings.Contains(hybrid, gen) {
		t.Fatal("the Qwen3 template's generation prompt is not where the test expects it")
	}
	return strings.Replace(hybrid, gen, "{%- if add_generation_prompt %}\n    {{- '<|im_start|>assistant\\n<think>\\n' }}\n{%- endif %}", 1)
}

// TestToolConversationsLikeJinja2AndSpecForge renders tool conversations
// with Qwen3's template (hybrid, and a forced-thinking variant) in Go and
// in Python jinja2 and requires the same text byte for byte, then Hugging
// Face tokenizers' ids for it, then the default mask (MaskSpecForge)
// token for token equal to SpecForge's labelling of the text
// (specforge/data/parse.py GeneralParser.parse: every match of the
// template's assistant_header through its end_of_turn_token, so an
// assistant turn's tool calls are trained with it; qwen3-thinking,
// qwen3-instruct for thinking off, qwen3.5 for the forced template), and
// no loss on the tools block or on any tool result.
func TestToolConversationsLikeJinja2AndSpecForge(t *testing.T) {
	t.Parallel()
	tok := qwen3(t)
	convs, names := toolConversations()
	// The same conversations with string arguments parsed, as SGLang's chat
	// API and SpecForge's parser render them.
	for i, n := 0, len(convs); i < n; i++ {
		if strings.Contains(string(convs[i].Messages), `"arguments": "`) {
			c := convs[i]
			c.ParseToolArguments = true
			convs = append(convs, c)
			names = append(names, names[i]+", arguments parsed")
		}
	}
	for _, forced := range []bool{false, true} {
		source := tok.ChatTemplate()
		if forced {
			source = forcedQwen3Source(t, source)
		}
		tmpl, err := chat.New(source, tok.SpecialTokenVars())
		if err != nil {
			t.Fatal(err)
		}
		if f, _, err := tmpl.ThinkingForced("<think>", "</think>"); err != nil || f != forced {
			t.Fatalf("forced %v: ThinkingForced says %v, %v", forced, f, err)
		}
		want, wantErr := pyRenderSource(t, source, tok.SpecialTokenVars(), convs)
		var texts []string
		for i, c := range convs {
			got, err := renderConv(tmpl, c)
			switch {
			case wantErr[i] != "":
				t.Fatalf("forced %v, %s: jinja2 fails: %s", forced, names[i], wantErr[i])
			case err != nil:
				t.Fatalf("forced %v, %s: %v", forced, names[i], err)
			case got != want[i]:
				t.Fatalf("forced %v, %s renders differently from jinja2:\n%s", forced, names[i], diffText(got, want[i]))
			}
			texts = append(texts, got)
		}
		hf := hfEncode(t, testenv.Qwen3Dir(t), texts)
		for i, s := range texts {
			if ids := tok.Encode(s); !equalInts(ids, hf[i]) {
				t.Fatalf("forced %v, %s: %s", forced, names[i], firstDiff(tok, s, ids, hf[i]))
			}
		}
		checkToolMasks(t, tok, tmpl, forced, convs, names)
	}
	t.Logf("%d tool conversations, hybrid and forced: text identical to jinja2, ids to Hugging Face, masks to SpecForge's labelling", len(convs))
}

// checkToolMasks checks the masks of the conversations without a
// generation prompt against SpecForge's labelling, with token indexes from
// Hugging Face's encoding of prefixes as SpecForge computes them, and that
// no token of a tool result or of the tools block carries loss while every
// tool call of a trained turn does.
func checkToolMasks(t *testing.T, tok *Tokenizer, tmpl *chat.Template, forced bool, convs []corpus.Conversation, names []string) {
	t.Helper()
	type job struct {
		i          int
		rendered   string
		ids, mask  []int
		spans      []specforgeref.Span
		trainedAll bool
	}
	var jobs []job
	var prefixes []string
	at := map[string]int{}
	for i, c := range convs {
		if c.AddGenerationPrompt {
			continue
		}
		var msgs []chat.Message
		if err := json.Unmarshal(c.Messages, &msgs); err != nil {
			t.Fatal(err)
		}
		sf := specforgeref.Qwen3Thinking
		switch {
		case forced:
			sf = specforgeref.Qwen35
		case c.EnableThinking != nil && !*c.EnableThinking:
			sf = specforgeref.Qwen3Instruct
		}
		rendered, ids, mask, err := tok.EncodeConversation(tmpl, msgs, chat.Options{EnableThinking: c.EnableThinking, Tools: c.Tools, ParseToolArguments: c.ParseToolArguments}, MaskSpecForge, forced)
		if err != nil {
			t.Fatalf("forced %v, %s: %v", forced, names[i], err)
		}
		j := job{i: i, rendered: rendered, ids: ids, mask: mask, spans: specforgeref.Spans(rendered, sf, false), trainedAll: !forced}
		for _, sp := range j.spans {
			for _, off := range []int{sp.Start, sp.End} {
				if _, ok := at[rendered[:off]]; !ok {
					at[rendered[:off]] = len(prefixes)
					prefixes = append(prefixes, rendered[:off])
				}
			}
		}
		jobs = append(jobs, j)
	}
	lens := hfEncode(t, testenv.Qwen3Dir(t), prefixes)
	toolResponse := regexp.MustCompile(`(?s)<\|im_start\|>user\n<tool_response>.*?<\|im_end\|>\n`)
	toolCall := regexp.MustCompile(`(?s)<tool_call>.*?</tool_call>`)
	for _, j := range jobs {
		name := fmt.Sprintf("forced %v, %s", forced, names[j.i])
		want := specforgeref.Mask(len(j.ids), j.spans, func(off int) int { return len(lens[at[j.rendered[:off]]]) })
		for k := range want {
			if want[k] != j.mask[k] {
				t.Fatalf("%s: token %d (%q) has mask %d, SpecForge's labelling %d\n%s", name, k, tok.Decode(j.ids[k:k+1]), j.mask[k], want[k], quoteCut(j.rendered, 3000))
			}
		}
		_, offsets := tok.DecodeOffsets(j.ids)
		loss := func(lo, hi int) (some, all bool) {
			all = true
			for k, off := range offsets {
				if off[0] >= lo && off[0] < hi {
					some = some || j.mask[k] == 1
					all = all && j.mask[k] == 1
				}
			}
			return some, all
		}
		if !strings.HasPrefix(j.rendered, "<|im_start|>system\n") || !strings.Contains(j.rendered, "# Tools") {
			t.Fatalf("%s: no tools block", name)
		}
		// The system turn holds the tools block (with a sample
		// "<tool_call>" of its own).
		tools := strings.Index(j.rendered, "<|im_end|>\n") + len("<|im_end|>\n")
		noLoss := append([][]int{{0, tools}}, toolResponse.FindAllStringIndex(j.rendered, -1)...)
		for _, r := range noLoss {
			if some, _ := loss(r[0], r[1]); some {
				t.Fatalf("%s: loss inside %q", name, j.rendered[r[0]:r[1]])
			}
		}
		if j.trainedAll {
			for _, r := range toolCall.FindAllStringIndex(j.rendered[tools:], -1) {
				if _, all := loss(tools+r[0], tools+r[1]); !all {
					t.Fatalf("%s: the tool call %q is not trained whole", name, j.rendered[tools+r[0]:tools+r[1]])
				}
			}
		}
	}
	if len(jobs) < 20 {
		t.Fatalf("only %d masks checked", len(jobs))
	}
}

// TestToolMessagesBuiltLikeGiven: a conversation built with chat's
// constructors renders as the same conversation read from JSON.
func TestToolMessagesBuiltLikeGiven(t *testing.T) {
	t.Parallel()
	tmpl, err := qwen3(t).Chat("")
	if err != nil {
		t.Fatal(err)
	}
	var given []chat.Message
	if err := json.Unmarshal([]byte("["+strings.Join([]string{toolUser, toolCallStr, toolResult1, toolFinal}, ",")+"]"), &given); err != nil {
		t.Fatal(err)
	}
	built := []chat.Message{
		chat.NewMessage("user", "Weather in Zürich and Oslo, then find a café?"),
		chat.NewToolCalls("", []chat.ToolCall{{ID: "call_1", Type: "function", Function: chat.ToolFunction{Name: "get_weather", Arguments: json.RawMessage(`"{\"city\":\"Zürich\",\"days\":2}"`)}}}),
		chat.NewToolResult(`{"temp": 21.5, "sky": "clear"}`, "call_1", "get_weather"),
		chat.NewMessage("assistant", "Zürich: 21.5°C and clear. Oslo: 9°C. Try Café Ø."),
	}
	opts := chat.Options{Tools: json.RawMessage(toolSchemas)}
	a, err1 := tmpl.Render(given, opts)
	b, err2 := tmpl.Render(built, opts)
	if err1 != nil || err2 != nil || a != b {
		t.Fatalf("given and built render differently (%v, %v):\n%s", err1, err2, diffText(b, a))
	}
	if !strings.Contains(a, `<tool_call>
{"name": "get_weather", "arguments": {"city":"Zürich","days":2}}
</tool_call>`) {
		t.Fatalf("string arguments not printed as given:\n%s", a)
	}
	opts.ParseToolArguments = true
	if p, err := tmpl.Render(given, opts); err != nil || !strings.Contains(p, `{"name": "get_weather", "arguments": {"city": "Zürich", "days": 2}}`) {
		t.Fatalf("arguments parsed: %v\n%s", err, p)
	}
	for _, bad := range []string{`"not json"`, `"[1, 2]"`, `"{\"a\": 1} x"`} {
		msgs := []chat.Message{built[0], chat.NewToolCalls("", []chat.ToolCall{{Function: chat.ToolFunction{Name: "f", Arguments: json.RawMessage(bad)}}})}
		if _, err := tmpl.Render(msgs, opts); err == nil || !strings.Contains(err.Error(), "want a JSON object") {
			t.Errorf("arguments %s parsed: %v", bad, err)
		}
	}
}

// TestToolEdgesLikeJinja2 renders the shapes of tool data a dataset may
// hold with Qwen3's template and requires Go to fail exactly where jinja2
// fails and to render the same text elsewhere.
func TestToolEdgesLikeJinja2(t *testing.T) {
	t.Parallel()
	tok := qwen3(t)
	tmpl, err := tok.Chat("")
	if err != nil {
		t.Fatal(err)
	}
	call := func(tc string) string {
		return `[{"role": "user", "content": "q"}, {"role": "assistant", "content": "", "tool_calls": [` + tc + `]}]`
	}
	cases := []struct{ msgs, tools string }{
		{`[{"role": "user", "content": "q"}]`, `[]`},
		{`[{"role": "user", "content": "q"}]`, `[{"name": "f", "n": -9223372036854775808, "tiny": 1e-7, "big": 1e16, "f": 2.50, "t": true, "z": null, "e": {}, "l": [], "s": "tab\there \u2028 \u0001 \"q\" </tools>"}]`},
		{`[{"role": "system", "content": "sys"}, {"role": "user", "content": "q"}]`, `[{"type": "function", "function": {"name": "f"}}]`},
		{call(`{"function": {"name": "f", "arguments": null}}`), ``},
		{call(`{"function": {"name": "f", "arguments": 3}}`), ``},
		{call(`{"function": {"name": "f", "arguments": [1, "a", {"b": 2.50}]}}`), ``},
		{call(`{"function": {"name": "f", "arguments": "not json at all"}}`), ``},
		{call(`{"function": {"name": "f", "arguments": ""}}`), ``},
		{call(`{"function": {"name": "f", "arguments": {}}}`), ``},
		{call(`{"function": {"name": "f"}}`), ``},
		{call(`{"function": {}}`), ``},
		{call(`{"function": "f"}`), ``},
		{call(`{"id": "c", "name": "top-level", "arguments": {"x": 1}}`), ``},
		{`[{"role": "user", "content": "q"}, {"role": "assistant", "content": "a", "tool_calls": []}]`, ``},
		{`[{"role": "user", "content": "q"}, {"role": "assistant", "content": "a", "tool_calls": null}]`, ``},
		{`[{"role": "tool", "content": "first"}, {"role": "user", "content": "q"}]`, ``},
		{`[{"role": "user", "content": "q"}, {"role": "tool", "content": "r", "tool_call_id": "c", "name": "f"}]`, `[{"name": "f"}]`},
		{`[{"role": "user", "content": "q"}, {"role": "tool", "content": ""}, {"role": "tool", "content": "<tool_response>x</tool_response>"}]`, ``},
		{`[{"role": "user", "content": "<tool_response>\nr\n</tool_response>"}, {"role": "assistant", "content": "a", "reasoning_content": "t"}]`, ``},
	}
	convs := make([]corpus.Conversation, len(cases))
	for i, c := range cases {
		convs[i] = corpus.Conversation{Messages: json.RawMessage(c.msgs), AddGenerationPrompt: i%2 == 0}
		if c.tools != "" {
			convs[i].Tools = json.RawMessage(c.tools)
		}
	}
	// One known refusal: an integer beyond 64 bits, which Python prints
	// exactly and the template engine cannot hold.
	convs = append(convs, corpus.Conversation{Messages: json.RawMessage(`[{"role": "user", "content": "q"}]`), Tools: json.RawMessage(`[{"name": "f", "max": 18446744073709551615}]`)})
	want, wantErr := pyRender(t, tok, convs)
	if _, err := renderConv(tmpl, convs[len(convs)-1]); wantErr[len(convs)-1] != "" || err == nil || !strings.Contains(err.Error(), "18446744073709551615 does not fit in 64 bits") {
		t.Errorf("an integer beyond 64 bits: jinja2 %q, Go %v", wantErr[len(convs)-1], err)
	}
	convs = convs[:len(convs)-1]
	for i, c := range convs {
		got, err := renderConv(tmpl, c)
		switch {
		case wantErr[i] != "" && err == nil:
			t.Errorf("case %d %s: jinja2 fails (%s), Go renders %q", i, cases[i].msgs, wantErr[i], got)
		case wantErr[i] == "" && err != nil:
			t.Errorf("case %d %s: jinja2 renders %q, Go fails: %v", i, cases[i].msgs, want[i], err)
		case err == nil && got != want[i]:
			t.Errorf("case %d %s:\n%s", i, cases[i].msgs, diffText(got, want[i]))
		}
	}
}

// TestToolCallTurnMasks: a conversation ending in a generated tool call
// trains the call. mask = "generated" covers exactly the model's output
// (the reply, its calls and the <|im_end|> it sampled), "last_turn" that
// and the template's "\n" after it; the tool result before a last answer
// carries no loss in any mode.
func TestToolCallTurnMasks(t *testing.T) {
	t.Parallel()
	tok := qwen3(t)
	tmpl, err := tok.Chat("")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ msgs, output string }{
		{"[" + toolUser + "," + toolCallStr + "]", "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\":\"Zürich\",\"days\":2}}\n</tool_call><|im_end|>"},
		{"[" + toolUser + "," + toolCallObj + "]", "Checking Oslo too.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\", \"scale\": 1.0, \"days\": 3}}\n</tool_call>\n<tool_call>\n{\"name\": \"search_web\", \"arguments\": {\"q\": \"café <tool_response> near me\", \"filters\": {\"lang\": \"日本語\"}}}\n</tool_call><|im_end|>"},
		{"[" + toolUser + "," + toolCallStr + "," + toolResult1 + "," + toolFinal + "]", "Zürich: 21.5°C and clear. Oslo: 9°C. Try Café Ø.<|im_end|>"},
	} {
		var msgs []chat.Message
		if err := json.Unmarshal([]byte(tc.msgs), &msgs); err != nil {
			t.Fatal(err)
		}
		on := true
		for _, think := range []*bool{nil, &on} {
			opts := chat.Options{Tools: json.RawMessage(toolSchemas), EnableThinking: think}
			for _, mode := range []MaskMode{MaskGenerated, MaskLastTurn} {
				rendered, ids, mask, err := tok.EncodeConversation(tmpl, msgs, opts, mode, false)
				if err != nil {
					t.Fatal(err)
				}
				var trained []int
				for k, m := range mask {
					if m == 1 {
						trained = append(trained, ids[k])
					}
				}
				want := "<think>\n\n</think>\n\n" + tc.output
				if mode == MaskLastTurn {
					want += "\n"
				}
				if got := tok.Decode(trained); got != want {
					t.Errorf("%s, mask %s: trained %q, want %q\n%s", tc.msgs, mode, got, want, rendered)
				}
			}
		}
	}
}

// xmlToolTemplate renders tools and tool calls the way the XML-style
// templates of Qwen3-Coder and Qwen3.5/3.6 do: loops over dicts (|items,
// .items(), a bare for over a dict, .keys()), is mapping / sequence /
// string tests, | string of every JSON type (Python's str(): True, None,
// 1.0, a dict's repr), tojson | safe, ~ and a macro. Written for the test,
// not copied: every construct is compared with jinja2, not the template.
const xmlToolTemplate = `{%- macro extra(d, skip) %}
{%- for key in d %}
{%- if key not in skip %}
{%- set k = key | replace("-", "_") | replace("$", "") %}
{%- if d[key] is mapping or (d[key] is sequence and d[key] is not string) %}
{{- '\n<' ~ k ~ '>' ~ (d[key] | tojson | safe) ~ '</' ~ k ~ '>' }}
{%- else %}
{{- '\n<' ~ k ~ '>' ~ (d[key] | string) ~ '</' ~ k ~ '>' }}
{%- endif %}
{%- endif %}
{%- endfor %}
{%- endmacro %}
{%- if tools %}
{{- '<|im_start|>system\n<tools>' }}
{%- for tool in tools %}
{%- set fn = tool.function if tool.function is defined else tool %}
{{- '\n<function>\n<name>' ~ fn.name ~ '</name>' }}
{%- if fn.description is defined %}{{- '\n<description>' ~ (fn.description | trim) ~ '</description>' }}{% endif %}
{%- if fn.parameters is defined and fn.parameters.properties is defined %}
{%- for name, field in fn.parameters.properties | items %}
{{- '\n<parameter>\n<name>' ~ name ~ '</name>' }}
{%- if field.type is defined %}{{- '\n<type>' ~ (field.type | string) ~ '</type>' }}{% endif %}
{{- extra(field, ['type', 'description']) }}
{{- '\n</parameter>' }}
{%- endfor %}
{{- extra(fn.parameters, ['type', 'properties']) }}
{%- endif %}
{{- '\n</function>' }}
{%- endfor %}
{{- '\n</tools>|' ~ (tools[0].keys() | list | join(',')) ~ '<|im_end|>\n' }}
{%- endif %}
{%- for m in messages %}
{%- if m.role == 'assistant' %}
{{- '<|im_start|>assistant\n' + (m.content if m.content is string else '') }}
{%- for call in m.tool_calls if m.tool_calls %}
{%- set call = call.function if call.function is defined else call %}
{{- '\n<tool_call>\n<function=' + call.name + '>\n' }}
{%- if call.arguments is mapping %}
{%- for k, v in call.arguments.items() %}
{{- '<parameter=' + k + '>\n' }}
{{- (v | tojson | safe) if v is mapping or (v is sequence and v is not string) else (v | string) }}
{{- '\n</parameter>\n' }}
{%- endfor %}
{%- else %}
{{- call.arguments | string }}
{%- endif %}
{{- '</function>\n</tool_call>' }}
{%- endfor %}
{%- if m.tool_calls %}{{- '\n' ~ (m.tool_calls | string) }}{% endif %}
{{- '<|im_end|>\n' }}
{%- elif m.role == 'tool' %}
{{- '<|im_start|>user\n<tool_response>\n' ~ m.content ~ '\n</tool_response><|im_end|>\n' }}
{%- else %}
{{- '<|im_start|>' + m.role + '\n' + m.content + '<|im_end|>\n' }}
{%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}{{- '<|im_start|>assistant\n<think>\n' }}{% endif %}`

// TestXMLToolTemplateLikeJinja2 renders tool conversations with
// xmlToolTemplate in Go and jinja2, with arguments and schemas holding
// every JSON type, and requires the same text.
func TestXMLToolTemplateLikeJinja2(t *testing.T) {
	t.Parallel()
	tmpl, err := chat.New(xmlToolTemplate, nil)
	if err != nil {
		t.Fatal(err)
	}
	convs, names := toolConversations()
	odd := `{"role": "assistant", "content": "", "tool_calls": [{"type": "function", "function": {"name": "f", "arguments": {"s": "x", "i": 3, "neg": -0.0, "f": 1.0, "e": 1e-7, "t": true, "n": null, "l": [1, "a", null], "d": {"k": [true]}, "u": "日本 'q' \"dq\"", "q1": "it's", "q2": "say \"x\"", "c": "tab\t nl\n \u0001 \u007f \u00a0 \u00e9 \u2028 \u200b \ud83d\ude00 back\\slash", "big": 123456789.5, "small": 0.0001, "exp": 1e22}}}]}`
	oddTools := `[{"name": "f", "description": "  padded\n", "parameters": {"type": "object", "properties": {"s": {"type": "string", "enum": ["a", "b"], "min-Length": 1, "$ref": "#/x", "nullable": true, "default": null, "scale": 2.5}}, "required": ["s"], "additionalProperties": false}}]`
	convs = append(convs, corpus.Conversation{Messages: json.RawMessage("[" + toolUser + "," + odd + "]"), Tools: json.RawMessage(oddTools)})
	names = append(names, "every JSON type in arguments and schema")
	want, wantErr := pyRenderSource(t, xmlToolTemplate, map[string]any{}, convs)
	for i, c := range convs {
		got, err := renderConv(tmpl, c)
		switch {
		case wantErr[i] != "":
			t.Errorf("%s: jinja2 fails: %s", names[i], wantErr[i])
		case err != nil:
			t.Errorf("%s: %v", names[i], err)
		case got != want[i]:
			t.Errorf("%s renders differently from jinja2:\n%s", names[i], diffText(got, want[i]))
		}
	}
}
