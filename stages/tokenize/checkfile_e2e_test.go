//go:build e2e

package tokenize

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// writeEdited writes family's tokenizer.json after edit into a new directory.
func writeEdited(t testing.TB, family string, edit func(f map[string]any)) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(familyDir(t, family), "tokenizer.json"))
	if err != nil {
		t.Fatal(err)
	}
	var f map[string]any
	if err := json.Unmarshal(data, &f); err != nil {
		t.Fatal(err)
	}
	edit(f)
	out, err := json.Marshal(f)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "tokenizer.json"), out, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// CheckFile refuses exactly what Load refuses for the file's components,
// with the same message naming the file and the component, and accepts
// every tested family.
func TestCheckFileAgreesWithLoad(t *testing.T) {
	model := func(k string, v any) func(map[string]any) {
		return func(f map[string]any) { f["model"].(map[string]any)[k] = v }
	}
	cases := []struct {
		name, family string
		edit         func(map[string]any)
		want         string // in the error; "" for none
	}{
		{"qwen3 as is", "qwen3", func(map[string]any) {}, ""},
		{"llama2 as is", "llama2", func(map[string]any) {}, ""},
		{"gemma3 as is", "gemma3", func(map[string]any) {}, ""},
		{"wordpiece", "qwen3", model("type", "WordPiece"), `model.type is "WordPiece"; only "BPE" is supported`},
		{"unigram", "llama2", model("type", "Unigram"), `model.type is "Unigram"`},
		{"unigram with its list vocab", "llama2", func(f map[string]any) {
			f["model"] = map[string]any{"type": "Unigram", "unk_id": 0, "vocab": []any{[]any{"<unk>", 0.0}, []any{"▁a", -1.5}}}
		}, `model.type is "Unigram"; only "BPE" is supported`},
		{"list vocab", "llama2", model("vocab", []any{[]any{"<unk>", 0.0}}), "model.vocab is not an object"},
		{"dropout", "llama2", model("dropout", 0.1), "model.dropout is 0.1"},
		{"affix with byte level", "qwen3", model("continuing_subword_prefix", "##"), "continuing_subword_prefix"},
		{"normalizer", "qwen3", func(f map[string]any) {
			f["normalizer"] = map[string]any{"type": "Sequence", "normalizers": []any{map[string]any{"type": "BertNormalizer"}}}
		}, `normalizer.normalizers[0]: type "BertNormalizer" is not supported`},
		{"pre_tokenizer", "llama2", func(f map[string]any) {
			f["pre_tokenizer"] = map[string]any{"type": "BertPreTokenizer"}
		}, `pre_tokenizer: type "BertPreTokenizer" is not supported`},
		{"bad split regex", "llama2", func(f map[string]any) {
			f["pre_tokenizer"] = map[string]any{"type": "Split", "pattern": map[string]any{"Regex": `(`}, "behavior": "Isolated"}
		}, `pre_tokenizer: pattern "("`},
		{"decoder", "gemma3", func(f map[string]any) {
			f["decoder"] = map[string]any{"type": "WordPiece"}
		}, `decoder: type "WordPiece" is not supported`},
		{"added tokens", "qwen3", func(f map[string]any) {
			f["added_tokens"] = []any{map[string]any{"id": "x", "content": 3}}
		}, "added_tokens:"},
		{"byte-level without a byte", "qwen3", func(f map[string]any) {
			delete(f["model"].(map[string]any)["vocab"].(map[string]any), "Ġ")
		}, `model.vocab has no token for byte 0x20 ("Ġ")`},
		{"unk not in vocab", "llama2", model("unk_token", "<nope>"), `model.unk_token "<nope>" is not in model.vocab`},
		{"no unk, incomplete byte fallback", "llama2", func(f map[string]any) {
			m := f["model"].(map[string]any)
			delete(m, "unk_token")
			delete(m["vocab"].(map[string]any), "<0x41>")
		}, "model has no unk_token and no complete byte fallback"},
		{"empty vocab", "llama2", model("vocab", map[string]any{}), "model.vocab is empty"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := familyDir(t, c.family)
			if c.want != "" {
				dir = writeEdited(t, c.family, c.edit)
			}
			checkErr := CheckFile(dir)
			_, loadErr := Load(dir)
			if c.want == "" {
				if checkErr != nil || loadErr != nil {
					t.Fatalf("CheckFile: %v; Load: %v; want both to accept", checkErr, loadErr)
				}
				return
			}
			if checkErr == nil || loadErr == nil {
				t.Fatalf("CheckFile: %v; Load: %v; want both to refuse with %q", checkErr, loadErr, c.want)
			}
			if checkErr.Error() != loadErr.Error() {
				t.Errorf("CheckFile and Load disagree:\n check: %v\n load:  %v", checkErr, loadErr)
			}
			path := filepath.Join(dir, "tokenizer.json")
			if msg := checkErr.Error(); !strings.HasPrefix(msg, path+": ") || !strings.Contains(msg, c.want) {
				t.Errorf("CheckFile: %q; want %q: ...%s...", msg, path, c.want)
			}
		})
	}
}

// BenchmarkCheckFile measures `pipe check`'s look at qwen3's tokenizer.json
// against a full Load in the same run (Load/CheckFile is the speed-up).
func BenchmarkCheckFile(b *testing.B) {
	dir := familyDir(b, "qwen3")
	b.Run("CheckFile", func(b *testing.B) {
		for range b.N {
			if err := CheckFile(dir); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("Load", func(b *testing.B) {
		for range b.N {
			if _, err := Load(dir); err != nil {
				b.Fatal(err)
			}
		}
	})
}
