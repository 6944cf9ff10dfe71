//go:build e2e

package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pipe-dev/pipe/internal/testrig/testenv"
	"github.com/pipe-dev/pipe/stages/tokenize"
)

// TestTokenizeEveryFamily runs `pipe tokenize --tokenizer DIR` on the real
// tokenizer files of each tested family (scripts/fetch-tokenizers.sh): a
// text row gives the ids Hugging Face tokenizers gives (written down from
// npm tokenizers@0.23.2), and, for the families that ship a chat template, a
// conversation row gives the rendered text and its ids.
func TestTokenizeEveryFamily(t *testing.T) {
	hf := map[string][]int{ // "Hello world! 你好 123  x"
		"qwen3":       {9707, 1879, 0, 220, 108386, 220, 16, 17, 18, 220, 856},
		"llama3":      {9906, 1917, 0, 118195, 53901, 220, 4513, 220, 865},
		"llama3_1":    {9906, 1917, 0, 118195, 53901, 220, 4513, 220, 865},
		"deepseek_v3": {19923, 2058, 3, 223, 30594, 223, 6895, 223, 1527},
		"gemma3":      {9259, 1902, 236888, 43758, 237389, 236743, 236770, 236778, 236800, 138, 236781},
		"gptoss":      {13225, 2375, 0, 220, 177519, 220, 7633, 220, 1215},
		"llama2":      {22557, 1526, 28808, 28705, 29383, 29530, 28705, 28740, 28750, 28770, 28705, 1318},
	}
	base := os.Getenv("PIPE_TOKENIZERS_DIR")
	if base == "" {
		base = filepath.Join(testenv.RepoRoot(t), ".cache", "tokenizers")
	}
	for name, want := range hf {
		t.Run(name, func(t *testing.T) {
			dir := filepath.Join(base, name)
			if _, err := os.Stat(filepath.Join(dir, "tokenizer.json")); err != nil {
				testenv.Missing(t, "no "+name+" tokenizer.json in "+dir, "scripts/fetch-tokenizers.sh")
			}
			in := `{"text": "Hello world! 你好 123  x"}` + "\n" +
				`{"messages": [{"role": "user", "content": "What is 2+2?"}, {"role": "assistant", "content": "4"}]}` + "\n"
			out, errs, code := runTokenize(t, in, "--tokenizer", dir)
			tok, err := tokenize.Load(dir)
			if err != nil {
				t.Fatal(err)
			}
			lines := strings.Split(strings.TrimSpace(out), "\n")
			if tok.ChatTemplate() == "" {
				// No template: the text row is written, the conversation refused by name.
				if code == 0 || !strings.Contains(errs, "no chat template") {
					t.Fatalf("exit %d, stderr %q: want the missing template named", code, errs)
				}
			} else if code != 0 {
				t.Fatalf("exit %d: %s", code, errs)
			}
			var text struct {
				InputIDs []int `json:"input_ids"`
			}
			if err := json.Unmarshal([]byte(lines[0]), &text); err != nil {
				t.Fatalf("%v: %s", err, out)
			}
			if !equalIDs(text.InputIDs, want) {
				t.Fatalf("text ids %v, Hugging Face %v", text.InputIDs, want)
			}
			if tok.ChatTemplate() == "" {
				return
			}
			var chatRow struct {
				InputIDs []int  `json:"input_ids"`
				LossMask []int  `json:"loss_mask"`
				Rendered string `json:"rendered"`
			}
			if len(lines) != 2 || json.Unmarshal([]byte(lines[1]), &chatRow) != nil {
				t.Fatalf("conversation row: %s", out)
			}
			if !strings.Contains(chatRow.Rendered, "What is 2+2?") || !strings.Contains(chatRow.Rendered, "4") {
				t.Fatalf("rendered %q", chatRow.Rendered)
			}
			if !equalIDs(chatRow.InputIDs, tok.Encode(chatRow.Rendered)) || len(chatRow.LossMask) != len(chatRow.InputIDs) {
				t.Fatalf("conversation ids are not the rendered text's: %s", out)
			}
		})
	}
}

func equalIDs(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
