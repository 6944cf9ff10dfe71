package stages

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pipe-dev/pipe/pipeline"
	"github.com/pipe-dev/pipe/pipeline/pipefile"
	"github.com/pipe-dev/pipe/pipeline/record"
	"github.com/pipe-dev/pipe/pipeline/record/recordline"
)

// A completion validate-thinking kept though the length limit cut it
// (meta.cut_at_length) trains exactly what the model generated: its row
// ends at its last generated token, with loss, and no closing token the
// template would add (</think>, <|im_end|>, "\n") is in it. From the
// generation's ids the row is the prompt's and the output's ids; from the
// text (the chat API) it is the rendering cut where the model's text ends.
func TestTokenizeAndMaskCutAtLength(t *testing.T) {
	tok := testTokenizer(t)
	prompt := "<|im_start|>user\n" + q1 + "<|im_end|>\n<|im_start|>assistant\n"
	cutReasoning := r1[:len(r1)-30] // the limit cut the thinking
	cutAnswer := a1[:40]            // the limit cut the answer
	for _, tc := range []struct {
		name, reasoning, answer, generated string
		ids                                bool
	}{
		{name: "ids, cut in the thinking", reasoning: cutReasoning, generated: "<think>\n" + cutReasoning, ids: true},
		{name: "ids, cut in the answer", reasoning: r1, answer: cutAnswer, generated: "<think>\n" + r1 + "\n</think>\n\n" + cutAnswer, ids: true},
		{name: "text, cut in the thinking", reasoning: cutReasoning, generated: "<think>\n" + cutReasoning},
		{name: "text, cut in the answer", reasoning: r1, answer: cutAnswer, generated: "<think>\n" + r1 + "\n</think>\n\n" + cutAnswer},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newTestTokenizeAndMask(t, "mask = \"generated\"\nmax_length = 4096")
			out := tok.Encode(tc.generated)
			c := &record.Completion{Reasoning: tc.reasoning, Answer: tc.answer, FinishReason: "length",
				PromptTokens: len(tok.Encode(prompt)), CompletionTokens: len(out), Request: map[string]any{"enable_thinking": true}}
			if tc.ids {
				c.PromptIDs, c.OutputIDs = tok.Encode(prompt), out
			}
			rec := &record.Record{ID: "cut", Messages: []record.Message{{Role: "user", Content: q1}}, Completion: c,
				Meta: map[string]any{recordline.MetaCutAtLength: true}}
			row, rej := process(t, s, rec)
			if rej != nil {
				t.Fatalf("rejected: %+v", rej)
			}
			if got, want := decodeRow(tok, row), prompt+tc.generated; got != want {
				t.Fatalf("row:\n%q\nwant the prompt and exactly what was generated:\n%q", got, want)
			}
			runs := maskedRuns(tok, row)
			if len(runs) != 1 || !strings.HasSuffix(tc.generated, runs[0]) || row.LossMask[len(row.LossMask)-1] != 1 {
				t.Fatalf("loss on %q; want it to end at the last generated token", runs)
			}
		})
	}

	// Without the mark, an output that does not end its turn is refused
	// on the ids path, as before.
	s := newTestTokenizeAndMask(t, "")
	c := &record.Completion{Reasoning: cutReasoning, FinishReason: "length", Request: map[string]any{"enable_thinking": true},
		PromptIDs: tok.Encode(prompt), OutputIDs: tok.Encode("<think>\n" + cutReasoning)}
	if _, rej := process(t, s, &record.Record{ID: "x", Messages: []record.Message{{Role: "user", Content: q1}}, Completion: c}); rej == nil || rej.Reason != ReasonUnterminatedOutput {
		t.Fatalf("an unmarked cut output: %+v, want %s", rej, ReasonUnterminatedOutput)
	}
}

// A row longer than max_length is cut as the trainer cuts it when the file
// declares [trainer] (the trainer keeps its head), and refused without one
// (max_length is then the user's own limit); on_too_long says otherwise.
func TestTokenizeAndMaskOnTooLongDefault(t *testing.T) {
	testTokenizer(t)
	for _, tc := range []struct{ head, keys, want string }{
		{"[trainer]\nname = \"specforge\"\nmax_length = 4096\n", "", "truncate"},
		{"", "max_length = 4096\n", "reject"},
		{"[trainer]\nname = \"specforge\"\nmax_length = 4096\n", "on_too_long = \"reject\"\n", "reject"},
	} {
		src := tc.head + fmt.Sprintf("[[stage]]\nid = \"p\"\nkind = \"read-completions\"\npath = %q\n[[stage]]\nid = \"tok\"\nkind = \"tokenize-and-mask\"\ninput = \"p\"\ntokenizer = %q\n%s",
			filepath.Join(repoRoot(), "testdata", "completions", "completions.jsonl"), testTok.dir, tc.keys)
		f, probs := pipefile.Parse(filepath.Join(t.TempDir(), "p.toml"), []byte(src), pipefile.Options{})
		if len(probs) > 0 {
			t.Fatal(probs)
		}
		plan, _ := pipeline.Build(f, pipeline.DefaultRegistry)
		if got := plan.Lookup("tok").Config.(*tokenizeAndMaskConfig).OnTooLong; got != tc.want {
			t.Errorf("%q %q: on_too_long %q, want %q", tc.head, tc.keys, got, tc.want)
		}
	}
}
