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
