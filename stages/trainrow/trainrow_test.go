package trainrow

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/pipe-dev/pipe/internal/testrig/trainers"
	"github.com/pipe-dev/pipe/pipeline/record"
)

// AppendEncode writes json.Marshal's bytes, whatever dst held before: a
// writer reuses one buffer for every line.
func TestAppendEncodeIsMarshal(t *testing.T) {
	rec := &record.Record{
		ID:       "r-<1>&\u2028",
		Messages: []record.Message{{Role: "user", Content: "a <b> & \"c\" \xff é 日本"}},
		Completion: &record.Completion{
			Reasoning: "think\n\t</think>", Answer: "x & y", FinishReason: "stop", MatchedStop: 151645,
			PromptTokens: 3, CompletionTokens: 2, PromptIDs: []int{1, 2, 3}, OutputIDs: []int{4, -5},
			LatencySeconds: 0.125, Request: map[string]any{"z": 1.5, "a": []any{"<", nil, true}},
		},
		Tokens: &record.Tokens{InputIDs: []int32{1, 2, 3, 4, 5}, LossMask: record.LossMask{0, 0, 0, 1, 1}, NumTokens: 5, NumLossTokens: 2},
		Meta:   map[string]any{"b": "<&>", "a": 2},
	}
	rec2 := *rec
	rec2.Completion = nil
	conv := *rec
	conv.Messages = append(conv.Messages, record.Message{Role: "assistant", Content: "old"})
	for _, layout := range Layouts {
		for _, r := range []*record.Record{rec, &rec2, &conv} {
			var line []byte
			switch layout {
			case Records:
				line, _ = json.Marshal(r)
			case SpecForge:
				line, _ = json.Marshal(map[string]any{"id": r.ID, "input_ids": r.Tokens.InputIDs, "loss_mask": r.Tokens.LossMask})
			}
			dst := bytes.Repeat([]byte("garbage "), 100) // left by a longer line
			got, prob, err := AppendEncode(dst, layout, Rules{}, r)
			if err != nil {
				t.Fatalf("%s: %v", layout, err)
			}
			if prob != nil {
				if r.Completion != nil {
					t.Fatalf("%s: %v", layout, prob)
				}
				continue
			}
			enc, _, _ := Encode(layout, Rules{}, r)
			if !bytes.Equal(got, enc) {
				t.Errorf("%s: AppendEncode over a used buffer\n %s\nEncode\n %s", layout, got, enc)
			}
			if line != nil && !bytes.Equal(got, line) {
				t.Errorf("%s: AppendEncode\n %s\njson.Marshal\n %s", layout, got, line)
			}
		}
	}
}

// The conversations layout keeps a record's tools at the row level and
// each turn's tool fields, and SpecForge's loader (the checker of its
// rules) takes them: the tools it passes to apply_chat_template are the
// record's, and each turn's tool calls are the record's after its
// _sanitize_message (arguments parsed into objects), without a warning.
func TestConversationsLayoutTools(t *testing.T) {
	tools := `[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string"}}}}}]`
	rec := &record.Record{ID: "t1", Tools: json.RawMessage(tools),
		Messages: []record.Message{{Role: "user", Content: "Weather?"},
			{Role: "assistant", ToolCalls: []record.ToolCall{{ID: "call_1", Type: "function", Function: record.FunctionCall{Name: "get_weather", Arguments: json.RawMessage(`"{\"city\": \"Bern\"}"`)}}}},
			{Role: "tool", ToolCallID: "call_1", Name: "get_weather", Content: "9°C"}},
		Completion: &record.Completion{Reasoning: "r", Answer: "It is 9°C.",
			ToolCalls: []record.ToolCall{{Function: record.FunctionCall{Name: "get_weather", Arguments: json.RawMessage(`{"city":"Bern","days":2}`)}}}}}
	plain := &record.Record{ID: "t2", Messages: []record.Message{{Role: "user", Content: "hi"}}, Completion: &record.Completion{Answer: "hello"}}
	var file []byte
	for _, r := range []*record.Record{rec, plain} {
		line, prob, err := Encode(Conversations, Rules{}, r)
		if err != nil || prob != nil {
			t.Fatal(err, prob)
		}
		file = append(append(file, line...), '\n')
	}
	path := filepath.Join(t.TempDir(), "c.jsonl")
	if err := os.WriteFile(path, file, 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := trainers.LoadSpecForge(path, trainers.SpecForgeOptions{MaxLength: 4096, MinLossTokens: 2, Adjacent: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(got.TemplateKwargs) != 0 || len(got.Warnings) != 0 {
		t.Fatalf("template kwargs %v, warnings %v", got.TemplateKwargs, got.Warnings)
	}
	var wantTools any
	json.Unmarshal([]byte(tools), &wantTools)
	if !reflect.DeepEqual(got.Tools["t1"], wantTools) || got.Tools["t2"] != nil {
		t.Fatalf("tools passed to the template: %v / %v", got.Tools["t1"], got.Tools["t2"])
	}
	call := func(id, args string) []any {
		var a any
		json.Unmarshal([]byte(args), &a)
		return []any{map[string]any{"id": id, "type": "function", "function": map[string]any{"name": "get_weather", "arguments": a}}}
	}
	reasoning := "r"
	want := []trainers.SpecForgeMessage{
		{"role": "user", "content": "Weather?"},
		{"role": "assistant", "content": "", "tool_calls": call("call_1", `{"city":"Bern"}`)},
		{"role": "tool", "content": "9°C", "tool_call_id": "call_1", "name": "get_weather"},
		{"role": "assistant", "content": "It is 9°C.", "reasoning_content": reasoning, "tool_calls": call("", `{"city":"Bern","days":2}`)},
	}
	if conv := got.Conversations["t1"]; !reflect.DeepEqual(conv, want) {
		g, _ := json.Marshal(conv)
		w, _ := json.Marshal(want)
		t.Fatalf("SpecForge's conversation\n got %s\nwant %s", g, w)
	}
	if !bytes.Contains(file, []byte(`"tools":"[{\"type\":\"function\"`)) || bytes.Contains(file[bytes.IndexByte(file, '\n'):], []byte(`"tools"`)) {
		t.Fatalf("tools not as JSON text on the row that has them only:\n%s", file)
	}
}
