package trainrow

import (
	"bytes"
	"encoding/json"
	"testing"

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
