//go:build e2e

package stages

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/pipe-dev/pipe/internal/testrig/testenv"
	"github.com/pipe-dev/pipe/pipeline/record"
	"github.com/pipe-dev/pipe/stages/tokenize"
)

// chatMLLlama2 is the real Llama 2 tokenizer.json in its newer
// (legacy=false) SentencePiece form — a Metaspace pre-tokenizer and decoder
// with prepend_scheme "first", as transformers' LlamaConverter writes it,
// instead of the Prepend normalizer that puts a ▁ after every special
// token — with ChatML's two markers added and a ChatML template, so that
// tokenize-and-mask, which builds ChatML rows, runs on it and the ids
// decode back to the rendered text.
func chatMLLlama2(t *testing.T) string {
	t.Helper()
	base := os.Getenv("PIPE_TOKENIZERS_DIR")
	if base == "" {
		base = filepath.Join(testenv.RepoRoot(t), ".cache", "tokenizers")
	}
	data, err := os.ReadFile(filepath.Join(base, "llama2", "tokenizer.json"))
	if err != nil {
		testenv.Missing(t, "no llama2 tokenizer.json: "+err.Error(), "scripts/fetch-tokenizers.sh")
	}
	var f map[string]any
	if err := json.Unmarshal(data, &f); err != nil {
		t.Fatal(err)
	}
	ms := map[string]any{"type": "Metaspace", "replacement": "▁", "prepend_scheme": "first", "split": false}
	f["normalizer"], f["pre_tokenizer"] = nil, ms
	f["decoder"] = map[string]any{"type": "Sequence", "decoders": []any{ms, map[string]any{"type": "ByteFallback"}, map[string]any{"type": "Fuse"}}}
	for i, m := range []string{"<|im_start|>", "<|im_end|>"} {
		f["added_tokens"] = append(f["added_tokens"].([]any), map[string]any{"id": 32000 + i, "content": m,
			"single_word": false, "lstrip": false, "rstrip": false, "normalized": false, "special": true})
	}
	out, _ := json.Marshal(f)
	dir := t.TempDir()
	tmpl := "{%- for m in messages %}{{ '<|im_start|>' + m.role + '\\n' + m.content + '<|im_end|>\\n' }}{%- endfor %}" +
		"{%- if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{%- endif %}"
	for name, b := range map[string][]byte{"tokenizer.json": out, "chat_template.jinja": []byte(tmpl)} {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// On the ids path each id's range in the decoded text is its length in
// context: a Metaspace decoder drops the ▁ of the first token, so a token
// decoded alone is a byte shorter than in the text where it starts with ▁. The
// prompt ids must then still spell the rendered prompt and the loss must
// start exactly at the first output id, for texts that start with spaces.
func TestTokenizeAndMaskIDsSentencePieceOffsets(t *testing.T) {
	dir := chatMLLlama2(t)
	tok, err := tokenize.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	s := newTokenizeAndMask(decodeTestConfig(t, "tokenize-and-mask", fmt.Sprintf("tokenizer = %q\nsource = \"ids\"", dir)).(*tokenizeAndMaskConfig))
	if err := s.use(tok); err != nil {
		t.Fatal(err)
	}
	end, _ := tok.TokenID("<|im_end|>")
	for _, c := range []struct{ user, answer string }{
		{" Hello there", " The answer is 42."},
		{"  two spaces first", "  Indented answer\n with a second line"},
		{"plain", "plain answer"},
	} {
		prompt := "<|im_start|>user\n" + c.user + "<|im_end|>\n<|im_start|>assistant\n"
		pids := tok.Encode(prompt)
		oids := append(tok.Encode(c.answer), end)
		rec := &record.Record{ID: "spm", Messages: []record.Message{{Role: "user", Content: c.user}},
			Completion: &record.Completion{Answer: c.answer, FinishReason: "stop", PromptIDs: pids, OutputIDs: oids}}
		row, rej := process(t, s, rec)
		if rej != nil {
			t.Fatalf("%q: rejected %s: %s", c.answer, rej.Reason, rej.Detail)
		}
		if row.Source != "ids" || row.NumTokens != len(pids)+len(oids)+len(s.newline) {
			t.Fatalf("%q: row from %s with %d tokens, want the %d ids", c.answer, row.Source, row.NumTokens, len(pids)+len(oids)+len(s.newline))
		}
		for i, m := range row.LossMask {
			if want := uint8(0); i >= len(pids) {
				want = 1
				if m != want {
					t.Errorf("%q: loss_mask[%d] = %d, want %d (the loss starts at the first output id, %d)", c.answer, i, m, want, len(pids))
				}
			} else if m != want {
				t.Errorf("%q: loss_mask[%d] = %d, want %d (the loss starts at the first output id, %d)", c.answer, i, m, want, len(pids))
			}
		}
	}
}
