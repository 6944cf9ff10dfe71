package trainers

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// The checker applies SpecForge's loader rules (prompt_builder.py
// _iter_records, _prompt_from_record, _normalize_integer_sequence;
// loss_mask.py has_consecutive_supervised_tokens; preprocessing.py
// build_eagle3_dataset's columns; parse.py GeneralParser.parse) to files
// made to hit each rule.
func TestLoadSpecForgeRules(t *testing.T) {
	write := func(text string) string {
		p := filepath.Join(t.TempDir(), "d.jsonl")
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	dflash := SpecForgeOptions{MaxLength: 4, MinLossTokens: 2, Adjacent: true}
	for _, c := range []struct{ text, err string }{
		{`{"input_ids":[1,2],"loss_mask":[0,1]}` + "\n" + `{"input_ids":[1.0,2],"loss_mask":[0,1]}`, "d.jsonl:2 field input_ids[0] must be an integer"},
		{`{"input_ids":[true,2],"loss_mask":[0,1]}`, "input_ids[0] must be an integer, got bool"},
		{`{"input_ids":[1,2],"loss_mask":[0,2]}`, "loss_mask[1] must be 0 or 1, got 2"},
		{`{"input_ids":[1,2,3],"loss_mask":[0,1]}`, "mismatched input_ids/loss_mask lengths: 3 != 2"},
		{`{"input_ids":[],"loss_mask":[]}`, "contains an empty token sequence"},
		{`{"input_ids":[[1],[2]],"loss_mask":[0,1]}`, "must be one-dimensional"},
		{`{"input_ids":[1,2]}`, "must contain both input_ids and loss_mask"},
		{`{"input_ids":[1,2],"loss_mask":[1,1]}` + "\n" + `{"id":"x"}`, "d.jsonl:2 must contain both"},
		{`{"tokens":{"input_ids":[1],"loss_mask":[1]}}`, "Expected 'conversations' column"},
		{`[1]`, "invalid JSON array"},
		{"{\"input_ids\":[1],\"loss_mask\":[1]}\n[2]", "at line 2 must be an object"},
	} {
		if _, err := LoadSpecForge(write(c.text), dflash); err == nil || !strings.Contains(err.Error(), c.err) {
			t.Errorf("%s: %v, want %q", c.text, err, c.err)
		}
	}
	// Cut to max_length, then dropped for < 2 loss tokens or none adjacent;
	// a single nested list is unwrapped, true is 1 in loss_mask; a JSON
	// array file reads as JSONL does.
	rows := `{"input_ids":[[1,2,3,4,5,6]],"loss_mask":[0,0,true,1,1,1]}
{"input_ids":[1,2,3,4,5],"loss_mask":[0,0,0,1,1]}
{"input_ids":[1,2,3,4],"loss_mask":[1,0,1,0]}

{"input_ids":[7,8],"loss_mask":[1,1]}`
	for _, text := range []string{rows, "[" + strings.ReplaceAll(strings.ReplaceAll(rows, "\n\n", "\n"), "\n", ",") + "]"} {
		got, err := LoadSpecForge(write(text), dflash)
		if err != nil {
			t.Fatal(err)
		}
		want := []SpecForgePrompt{{InputIDs: []int64{1, 2, 3, 4}, LossMask: []int64{0, 0, 1, 1}}, {InputIDs: []int64{7, 8}, LossMask: []int64{1, 1}}}
		if !got.PreTokenized || got.Dropped != 2 || !reflect.DeepEqual(got.Prompts, want) {
			t.Fatalf("%s: %+v", text, got)
		}
	}
	// EAGLE3: one loss token is enough, no adjacency.
	if got, _ := LoadSpecForge(write(rows), SpecForgeOptions{MaxLength: 4, MinLossTokens: 1}); got.Dropped != 0 || len(got.Prompts) != 4 {
		t.Fatalf("eagle3: %+v", got)
	}

	// The raw route: extra columns go into the chat template; messages are
	// normalized (from/value), a leading non-user turn after the system one
	// dropped, the conversation cut where roles stop alternating, keys
	// outside ThinkingParser's dropped.
	got, err := LoadSpecForge(write(`{"id":"a","messages":[],"conversations":[{"from":"system","value":"S"},{"role":"assistant","content":"early"},{"from":"human","value":"q"},{"from":"gpt","value":"a","reasoning_content":"r","weight":1},{"role":"assistant","content":"twice"}]}`), dflash)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got.TemplateKwargs, []string{"messages"}) {
		t.Fatalf("template kwargs %v", got.TemplateKwargs)
	}
	want := []SpecForgeMessage{{"role": "system", "content": "S"}, {"role": "user", "content": "q"}, {"role": "assistant", "content": "a", "reasoning_content": "r"}}
	if !reflect.DeepEqual(got.Conversations["a"], want) {
		t.Fatalf("conversation %v", got.Conversations["a"])
	}
}

// The raw route's tools (preprocessing.py build_eagle3_dataset: a string
// parsed as JSON, a list taken, anything else or what fails to parse is
// [], and [] is tools=None) and tool calls (parse.py _sanitize_message: a
// string parsed, each call's id/type/function name and arguments kept,
// string arguments parsed, what fails to parse warned of and dropped).
func TestLoadSpecForgeTools(t *testing.T) {
	p := filepath.Join(t.TempDir(), "d.jsonl")
	text := `{"id":"s","tools":"[{\"name\":\"f\"}]","conversations":[{"role":"user","content":"q"},{"role":"assistant","content":"","tool_calls":"[{\"id\":\"1\",\"function\":{\"name\":\"f\",\"arguments\":\"{\\\"a\\\":1}\"},\"extra\":1}]"},{"role":"tool","tool_call_id":"1","content":"r"}]}
{"id":"l","tools":[{"name":"g"}],"conversations":[{"role":"user","content":"q"},{"role":"assistant","content":"","tool_calls":[{"function":{"name":"g","arguments":"not json"}}]}]}
{"id":"bad","tools":"nope","conversations":[{"role":"user","content":"q"},{"role":"assistant","content":"a","tool_calls":"nope"}]}
{"id":"none","tools":[],"conversations":[{"role":"user","content":"q"}]}`
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := LoadSpecForge(p, SpecForgeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(got.TemplateKwargs) != 0 {
		t.Fatalf("tools went into the template's kwargs: %v", got.TemplateKwargs)
	}
	wantTools := map[string]any{"s": []any{map[string]any{"name": "f"}}, "l": []any{map[string]any{"name": "g"}}}
	if !reflect.DeepEqual(got.Tools, wantTools) {
		t.Fatalf("tools %v", got.Tools)
	}
	wantS := []SpecForgeMessage{{"role": "user", "content": "q"},
		{"role": "assistant", "content": "", "tool_calls": []any{map[string]any{"id": "1", "type": "function", "function": map[string]any{"name": "f", "arguments": map[string]any{"a": float64(1)}}}}},
		{"role": "tool", "content": "r", "tool_call_id": "1"}}
	if !reflect.DeepEqual(got.Conversations["s"], wantS) {
		t.Fatalf("s: %v", got.Conversations["s"])
	}
	if tc := got.Conversations["l"][1]["tool_calls"]; !reflect.DeepEqual(tc, []any{map[string]any{"id": "", "type": "function", "function": map[string]any{"name": "g", "arguments": map[string]any{}}}}) {
		t.Fatalf("l: %v", tc)
	}
	if _, ok := got.Conversations["bad"][1]["tool_calls"]; ok {
		t.Fatalf("bad: unparseable tool_calls kept: %v", got.Conversations["bad"])
	}
	want := []string{"Failed to parse arguments for tool 'g': not json...", "Failed to parse tools JSON string: nope...", "Failed to parse tool_calls JSON string, removing tool_calls"}
	if !reflect.DeepEqual(got.Warnings, want) {
		t.Fatalf("warnings %q", got.Warnings)
	}
}
