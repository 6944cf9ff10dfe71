package stages

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/pipe-dev/pipe/pipeline/commitlog"
	"github.com/pipe-dev/pipe/pipeline/record"
	"github.com/pipe-dev/pipe/pipeline/rundir/layout"
	"github.com/pipe-dev/pipe/stages/arrowrow"
	"github.com/pipe-dev/pipe/stages/trainrow"
)

// toolPromptLines are tool-use prompts in each shape read-prompts takes:
// OpenAI's (tools beside the messages; a call's arguments as a JSON
// string and as an object, key order and number spelling to keep; content
// null; a tool turn with tool_call_id and name), LLaMA-Factory's ShareGPT
// (tools as a string; function_call and observation turns), and a batch
// request (body.tools).
var toolPromptLines = []string{
	`{"id":"oa","tools":[{"type":"function","function":{"name":"get_weather","description":"Weather — now","parameters":{"type":"object","properties":{"city":{"type":"string"},"days":{"type":"integer","default":7.0}},"required":["city"]}}}],` +
		`"messages":[{"role":"system","content":"S"},{"role":"user","content":"Weather in Zürich?"},` +
		`{"role":"assistant","content":null,"reasoning_content":"I should call it.","tool_calls":[{"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\": \"Zürich\"}"}},{"id":"call_2","type":"function","function":{"name":"get_weather","arguments":{"z":1,"city":"Bern","f":1.0}}}]},` +
		`{"role":"tool","tool_call_id":"call_1","name":"get_weather","content":"12°C"},{"role":"tool","tool_call_id":"call_2","content":[{"type":"text","text":"9°C"}]},` +
		`{"role":"user","content":"And tomorrow?"}],"source":"x"}`,
	`{"id":"sg","tools":"[{\"name\": \"search\", \"parameters\": {}}]","conversations":[{"from":"human","value":"Find pipe"},` +
		`{"from":"function_call","value":"{\"name\": \"search\", \"arguments\": {\"q\": \"pipe\"}}"},{"from":"observation","value":"found"},{"from":"human","value":"thanks"}]}`,
	`{"custom_id":"b1","method":"POST","url":"/v1/chat/completions","body":{"model":"m","tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":"auto","messages":[{"role":"user","content":"hi"}]}}`,
}

// toolPromptRecords are what toolPromptLines read as.
func toolPromptRecords() []*record.Record {
	return []*record.Record{
		{ID: "oa",
			Tools: json.RawMessage(`[{"type":"function","function":{"name":"get_weather","description":"Weather — now","parameters":{"type":"object","properties":{"city":{"type":"string"},"days":{"type":"integer","default":7.0}},"required":["city"]}}}]`),
			Messages: []record.Message{{Role: "system", Content: "S"}, {Role: "user", Content: "Weather in Zürich?"},
				{Role: "assistant", ReasoningContent: "I should call it.", ToolCalls: []record.ToolCall{
					{ID: "call_1", Type: "function", Function: record.FunctionCall{Name: "get_weather", Arguments: json.RawMessage(`"{\"city\": \"Zürich\"}"`)}},
					{ID: "call_2", Type: "function", Function: record.FunctionCall{Name: "get_weather", Arguments: json.RawMessage(`{"z":1,"city":"Bern","f":1.0}`)}}}},
				{Role: "tool", ToolCallID: "call_1", Name: "get_weather", Content: "12°C"}, {Role: "tool", ToolCallID: "call_2", Content: "9°C"},
				{Role: "user", Content: "And tomorrow?"}},
			Meta: map[string]any{"source": json.RawMessage(`"x"`)}},
		{ID: "sg", Tools: json.RawMessage(`[{"name":"search","parameters":{}}]`),
			Messages: []record.Message{{Role: "user", Content: "Find pipe"},
				{Role: "assistant", ToolCalls: []record.ToolCall{{Type: "function", Function: record.FunctionCall{Name: "search", Arguments: json.RawMessage(`{"q":"pipe"}`)}}}},
				{Role: "tool", Content: "found"}, {Role: "user", Content: "thanks"}}},
		{ID: "b1", Tools: json.RawMessage(`[{"type":"function","function":{"name":"f"}}]`),
			Messages: []record.Message{{Role: "user", Content: "hi"}},
			Meta:     map[string]any{"method": json.RawMessage(`"POST"`), "url": json.RawMessage(`"/v1/chat/completions"`), "body": json.RawMessage(`{"model":"m","tool_choice":"auto"}`)}},
	}
}

// withToolCompletion is rec answered: a completion that calls a tool too.
func withToolCompletion(rec *record.Record) *record.Record {
	r := rec.Clone()
	r.Completion = &record.Completion{Reasoning: "think", Answer: "", FinishReason: "tool_calls",
		ToolCalls: []record.ToolCall{{ID: "call_9", Type: "function", Function: record.FunctionCall{Name: "get_weather", Arguments: json.RawMessage(`"{\"city\":\"Zürich\",\"days\":1}"`)}}},
		Server:    "s", Attempts: 1}
	return r
}

// sameRecord compares field by field, saying which differs.
func sameRecord(t *testing.T, what string, got, want *record.Record) {
	t.Helper()
	if got.ID != want.ID {
		t.Fatalf("%s: id %q, want %q", what, got.ID, want.ID)
	}
	if string(got.Tools) != string(want.Tools) {
		t.Errorf("%s %s: tools\n got %s\nwant %s", what, want.ID, got.Tools, want.Tools)
	}
	if len(got.Messages) != len(want.Messages) {
		t.Fatalf("%s %s: %d messages, want %d: %+v", what, want.ID, len(got.Messages), len(want.Messages), got.Messages)
	}
	for i := range want.Messages {
		g, w := got.Messages[i], want.Messages[i]
		for _, f := range [][3]string{{"role", g.Role, w.Role}, {"content", g.Content, w.Content}, {"reasoning_content", g.ReasoningContent, w.ReasoningContent},
			{"tool_call_id", g.ToolCallID, w.ToolCallID}, {"name", g.Name, w.Name}} {
			if f[1] != f[2] {
				t.Errorf("%s %s: message %d %s %q, want %q", what, want.ID, i+1, f[0], f[1], f[2])
			}
		}
		mustSameCalls(t, what+" "+want.ID+" message "+string(rune('0'+i+1)), g.ToolCalls, w.ToolCalls)
	}
	if (got.Completion == nil) != (want.Completion == nil) {
		t.Fatalf("%s %s: completion %+v, want %+v", what, want.ID, got.Completion, want.Completion)
	}
	if want.Completion != nil {
		mustSameCalls(t, what+" "+want.ID+" completion", got.Completion.ToolCalls, want.Completion.ToolCalls)
	}
}

func mustSameCalls(t *testing.T, what string, got, want []record.ToolCall) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d tool calls, want %d", what, len(got), len(want))
	}
	for k := range want {
		g, w := got[k], want[k]
		if g.ID != w.ID || g.Type != w.Type || g.Function.Name != w.Function.Name || string(g.Function.Arguments) != string(w.Function.Arguments) {
			t.Errorf("%s: call %d\n got %s %s %s %s\nwant %s %s %s %s", what, k, g.ID, g.Type, g.Function.Name, g.Function.Arguments, w.ID, w.Type, w.Function.Name, w.Function.Arguments)
		}
	}
}

// read-prompts reads every tool field of each shape, arguments as given.
func TestReadPromptsToolFields(t *testing.T) {
	want := toolPromptRecords()
	for i, line := range toolPromptLines {
		rec, _, prob := promptLine([]byte(line), "id", true, true)
		if prob != nil {
			t.Fatalf("line %d: %v", i+1, prob)
		}
		sameRecord(t, "read-prompts", rec, want[i])
		if !reflect.DeepEqual(rec.Meta, want[i].Meta) {
			t.Errorf("%s: meta %v, want %v", rec.ID, rec.Meta, want[i].Meta)
		}
	}
	// A content id counts the tools: the same turns with other tools are
	// another prompt; without tool fields the id is what it always was.
	a, _, _ := promptLine([]byte(`{"tools":[{"name":"a"}],"prompt":"q"}`), "id", true, true)
	b, _, _ := promptLine([]byte(`{"tools":[{"name":"b"}],"prompt":"q"}`), "id", true, true)
	c, _, _ := promptLine([]byte(`{"prompt":"q"}`), "id", true, true)
	if a.ID == b.ID || a.ID == c.ID || c.ID != contentID([]record.Message{{Role: "user", Content: "q"}}, nil) {
		t.Errorf("content ids %s %s %s", a.ID, b.ID, c.ID)
	}
}

// A message field pipe does not carry, and a malformed tool field, is a
// bad line naming the turn and the field.
func TestReadPromptsToolFieldErrors(t *testing.T) {
	for _, c := range []struct{ line, want string }{
		{`{"messages":[{"role":"user","content":"q"},{"role":"assistant","content":"","tool_calls":[{"id":"1","function":{"name":"f","arguments":"{}"}}]},{"role":"tool","tool_call_id":"1","content":"r","foo":1}]}`,
			`turn 3: field "foo" is not one pipe carries (a message has ` + messageKeys + `)`},
		{`{"messages":[{"role":"user","content":"q","weight":0}]}`, `turn 1: field "weight" is not one pipe carries`},
		{`{"messages":[{"role":"assistant","content":"","function_call":{"name":"f"}}]}`, `turn 1: field "function_call" is not one pipe carries`},
		{`{"messages":[{"role":"assistant","tool_calls":[{"id":"1","index":0,"function":{"name":"f","arguments":"{}"}}]}]}`, `turn 1: tool_calls[0]: field "index" is not one pipe carries`},
		{`{"messages":[{"role":"assistant","tool_calls":[{"function":{"name":"f","arguments":"{}","strict":true}}]}]}`, `turn 1: tool_calls[0].function: field "strict" is not one pipe carries`},
		{`{"messages":[{"role":"assistant","tool_calls":[{"function":{"name":"f","arguments":[1]}}]}]}`, `turn 1: tool_calls[0].function: arguments must be a JSON string or an object`},
		{`{"messages":[{"role":"assistant","tool_calls":[{"function":{"arguments":"{}"}}]}]}`, `turn 1: tool_calls[0].function: name must be a non-empty string`},
		{`{"messages":[{"role":"user","content":"q","tool_calls":[{"function":{"name":"f","arguments":"{}"}}]}]}`, `turn 1: tool_calls on a user turn`},
		{`{"messages":[{"role":"user","content":"q","tool_call_id":"1"}]}`, `turn 1: tool_call_id on a user turn`},
		{`{"messages":[{"role":"tool","content":"q","name":5}]}`, `turn 1: name must be a string`},
		{`{"messages":[{"role":"tool"}]}`, `turn 1: no content`},
		{`{"tools":{"name":"f"},"prompt":"q"}`, `"tools" must be a list of tool schemas`},
		{`{"tools":"not json","prompt":"q"}`, `"tools" is a string that does not hold a JSON array`},
		{`{"tools":[1],"prompt":"q"}`, `"tools"[0] must be an object`},
		{`{"conversations":[{"from":"function_call","value":"f(x)"}]}`, `turn 1: a function_call turn's value must hold the call as JSON`},
	} {
		_, _, prob := promptLine([]byte(c.line), "id", true, true)
		if prob == nil || prob.Reason != reasonBadLine || !strings.Contains(prob.Detail, c.want) {
			t.Errorf("%s:\n got %+v\nwant a bad_line %q", c.line, prob, c.want)
		}
	}

	// In a file: the run stops with file:line (on_bad_line = "fail"), or the
	// line is set aside and counted ("skip"); pipe check --data counts it.
	bad := `{"id":"t","messages":[{"role":"user","content":"q"},{"role":"tool","tool_call_id":"1","content":"r","foo":1}]}`
	path := writeLines(t, toolPromptLines[0], bad, toolPromptLines[1])
	want := path + `:2: turn 2: field "foo" is not one pipe carries`
	r := &readPrompts{cfg: readPromptsConfig{Path: path, IDField: "id", OnBadLine: "fail"}}
	if err := r.Read(context.Background(), &fakeEmitter{}); err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Fatalf("fail: %v, want %s...", err, want)
	}
	rep, err := r.CheckInput(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Records != 2 || len(rep.Problems) != 1 || rep.Problems[0].Reason != reasonBadLine || rep.Problems[0].Count != 1 || !rep.Problems[0].Fatal ||
		!strings.HasPrefix(rep.Problems[0].Examples[0], want) {
		t.Fatalf("check --data: %+v %+v", rep, rep.Problems[0])
	}
	em := &fakeEmitter{}
	r = &readPrompts{cfg: readPromptsConfig{Path: path, IDField: "id", OnBadLine: "skip"}}
	if err := r.Read(context.Background(), em); err != nil {
		t.Fatal(err)
	}
	if len(em.out) != 2 || len(em.rejected) != 1 || !strings.Contains(em.rejected[0].Reject.Detail, `p.jsonl:2: turn 2: field "foo"`) {
		t.Fatalf("skip: out %d, rejected %+v", len(em.out), em.rejected)
	}
}

// Every writer and reader round-trips the tool fields: write-jsonl's
// records read by read-completions and by EachJSONLRecord, write-arrow's
// Parquet and Arrow shards read by read-completions, the journal read by
// read-journal, the conversations layout read back by read-completions
// (SpecForge's loader's view of it is trainrow's test), and an OpenAI chat
// completion's tool_calls.
func TestToolFieldsRoundTrip(t *testing.T) {
	var recs []*record.Record
	for _, r := range toolPromptRecords() {
		recs = append(recs, withToolCompletion(r))
	}
	ctx := context.Background()
	readAll := func(r *readCompletions) []*record.Record {
		t.Helper()
		em := &fakeEmitter{}
		if err := r.Read(ctx, em); err != nil {
			t.Fatal(err)
		}
		if len(em.rejected) > 0 {
			t.Fatalf("rejected %+v", em.rejected[0].Reject)
		}
		return em.out
	}
	check := func(what string, got []*record.Record) {
		t.Helper()
		if len(got) != len(recs) {
			t.Fatalf("%s: %d records, want %d", what, len(got), len(recs))
		}
		for i := range recs {
			sameRecord(t, what, got[i], recs[i])
		}
	}

	// write-jsonl, records layout.
	dir := t.TempDir()
	var lines []string
	for _, r := range recs {
		line, prob, err := trainrow.Encode(trainrow.Records, trainrow.Rules{}, r)
		if err != nil || prob != nil {
			t.Fatal(err, prob)
		}
		lines = append(lines, string(line))
	}
	jsonl := filepath.Join(dir, "records.jsonl")
	os.WriteFile(jsonl, []byte(strings.Join(lines, "\n")+"\n"), 0o644)
	check("write-jsonl → read-completions", readAll(&readCompletions{cfg: readCompletionsConfig{Path: jsonl, RequireCompletion: true}}))
	var each []*record.Record
	if err := EachJSONLRecord(ctx, jsonl, func(r *record.Record) error { each = append(each, r); return nil }); err != nil {
		t.Fatal(err)
	}
	check("write-jsonl → EachJSONLRecord", each)

	// write-arrow, both formats.
	for _, format := range []string{arrowrow.FormatParquet, arrowrow.FormatArrow} {
		out := filepath.Join(dir, "shards-"+format)
		w := openArrow(t, arrowCfg(out, format), nil, nil)
		arrowProcessAll(t, w, &arrowEmitter{}, recs)
		if err := w.Commit(ctx, &skipEmitter{}); err != nil {
			t.Fatal(err)
		}
		w.Close()
		check("write-arrow "+format+" → read-completions", readAll(&readCompletions{cfg: readCompletionsConfig{Path: out, RequireCompletion: true}}))
	}

	// The journal, as the engine writes it (record.AppendJSON of
	// {"port", "record"}), replayed by read-journal.
	runDir := filepath.Join(dir, "run")
	j, err := commitlog.OpenJournal(commitlog.JournalOptions{Dir: layout.Journal(runDir, "gen"), Legacy: layout.LegacyJournal(runDir, "gen"),
		Listing: layout.JournalListing(runDir, "gen"), IDOf: commitlog.JournalEntryID, Keep: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		line, err := record.AppendJSON(nil, commitlog.JournalEntry{Port: "out", Record: r})
		if err != nil {
			t.Fatal(err)
		}
		if err := j.Append(r.ID, line); err != nil {
			t.Fatal(err)
		}
	}
	if err := j.Commit(); err != nil {
		t.Fatal(err)
	}
	rj := &readJournal{cfg: readJournalConfig{RunDir: runDir, Stage: "gen"}}
	em := &fakeEmitter{}
	if err := rj.Read(ctx, em); err != nil {
		t.Fatal(err)
	}
	check("journal → read-journal", em.out)

	// write-jsonl, conversations layout (tools and tool_calls as JSON
	// text), read back as read-completions' conversations layout.
	lines = lines[:0]
	for _, r := range recs {
		line, prob, err := trainrow.Encode(trainrow.Conversations, trainrow.Rules{}, r)
		if err != nil || prob != nil {
			t.Fatal(err, prob)
		}
		lines = append(lines, string(line))
	}
	conv := filepath.Join(dir, "conversations.jsonl")
	os.WriteFile(conv, []byte(strings.Join(lines, "\n")+"\n"), 0o644)
	check("conversations layout → read-completions", readAll(&readCompletions{cfg: readCompletionsConfig{Path: conv, RequireCompletion: true}}))

	// An OpenAI chat completion's message.tool_calls.
	rc := &readCompletions{cfg: readCompletionsConfig{RequireCompletion: true}}
	got, err := rc.parse([]byte(`{"id":"c","messages":[{"role":"user","content":"hi"}],"tools":[{"name":"f"}],"choices":[{"message":{"role":"assistant","content":null,` +
		`"tool_calls":[{"id":"call_0","type":"function","function":{"name":"f","arguments":"{\"a\":1}"}}]},"finish_reason":"tool_calls"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	sameRecord(t, "chat completion", got, &record.Record{ID: "c", Tools: json.RawMessage(`[{"name":"f"}]`), Messages: []record.Message{{Role: "user", Content: "hi"}},
		Completion: &record.Completion{ToolCalls: []record.ToolCall{{ID: "call_0", Type: "function", Function: record.FunctionCall{Name: "f", Arguments: json.RawMessage(`"{\"a\":1}"`)}}}}})
}
