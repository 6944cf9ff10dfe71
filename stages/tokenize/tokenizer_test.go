package tokenize

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// tinyTokenizerJSON builds a minimal byte-level BPE tokenizer.json: the 256
// byte tokens, merges "Ġ t" -> "Ġt", "Ġt h" -> "Ġth", "h e" -> "he", and
// the added tokens <|im_start|> (special) and <think>.
func tinyTokenizerJSON(mutate func(map[string]any)) []byte {
	vocab := map[string]int{}
	for b := 0; b < 256; b++ {
		vocab[string(byteToRune[b])] = b
	}
	vocab["Ġt"], vocab["Ġth"], vocab["he"] = 256, 257, 258
	f := map[string]any{
		"version":    "1.0",
		"normalizer": map[string]any{"type": "NFC"},
		"pre_tokenizer": map[string]any{"type": "Sequence", "pretokenizers": []any{
			map[string]any{"type": "Split", "pattern": map[string]any{"Regex": qwenPattern}, "behavior": "Isolated", "invert": false},
			map[string]any{"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": false, "use_regex": false},
		}},
		"decoder": map[string]any{"type": "ByteLevel"},
		"added_tokens": []any{
			map[string]any{"id": 259, "content": "<|im_start|>", "special": true},
			map[string]any{"id": 260, "content": "<think>", "special": false},
		},
		"model": map[string]any{"type": "BPE", "vocab": vocab, "merges": []any{[]string{"Ġ", "t"}, []string{"Ġt", "h"}, []string{"h", "e"}}},
	}
	if mutate != nil {
		mutate(f)
	}
	b, _ := json.Marshal(f)
	return b
}

const qwenPattern = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`

func writeModel(t *testing.T, tokenizerJSON []byte, config string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "tokenizer.json"), tokenizerJSON, 0o644); err != nil {
		t.Fatal(err)
	}
	if config != "" {
		if err := os.WriteFile(filepath.Join(dir, "tokenizer_config.json"), []byte(config), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestTinyTokenizer(t *testing.T) {
	tok, err := Load(writeModel(t, tinyTokenizerJSON(nil), `{"eos_token": {"content": "<|im_start|>"}, "chat_template": "{{ messages[0].content }}\n"}`))
	if err != nil {
		t.Fatal(err)
	}
	ids, offsets := tok.EncodeOffsets(" the<think><|im_start|>x")
	// " the" -> "Ġth" + "e" (rank 1 "Ġt h" beats rank 2 "h e" after "Ġ t").
	want := []int{257, 'e', 260, 259, 'x'}
	if !equalInts(ids, want) {
		t.Fatalf("ids %v, want %v", ids, want)
	}
	wantOff := [][2]int{{0, 3}, {3, 4}, {4, 11}, {11, 23}, {23, 24}}
	for i := range wantOff {
		if offsets[i] != wantOff[i] {
			t.Fatalf("offsets %v, want %v", offsets, wantOff)
		}
	}
	if got := tok.Decode(ids); got != " the<think><|im_start|>x" {
		t.Fatalf("Decode = %q", got)
	}
	if id, ok := tok.TokenID("Ġth"); !ok || id != 257 {
		t.Fatalf("TokenID(Ġth) = %d, %v", id, ok)
	}
	if s, ok := tok.Token(257); !ok || s != "Ġth" {
		t.Fatalf("Token(257) = %q, %v", s, ok)
	}
	if !tok.IsSpecial(259) || tok.IsSpecial(260) {
		t.Fatal("IsSpecial: <|im_start|> is special, <think> is not")
	}
	if tok.SpecialTokenVars()["eos_token"] != "<|im_start|>" {
		t.Fatalf("special vars %v", tok.SpecialTokenVars())
	}
	if tok.ChatTemplate() != "{{ messages[0].content }}\n" {
		t.Fatalf("chat template %q", tok.ChatTemplate())
	}
}

func TestMergesAsStrings(t *testing.T) {
	tok, err := Load(writeModel(t, tinyTokenizerJSON(func(f map[string]any) {
		f["model"].(map[string]any)["merges"] = []string{"Ġ t", "Ġt h", "h e"}
	}), ""))
	if err != nil {
		t.Fatal(err)
	}
	if ids := tok.Encode(" the"); !equalInts(ids, []int{257, 'e'}) {
		t.Fatalf("ids %v", ids)
	}
}

func TestChatNeedsTemplate(t *testing.T) {
	tok, err := Load(writeModel(t, tinyTokenizerJSON(nil), ""))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tok.Chat(""); err == nil || !strings.Contains(err.Error(), `set template = "chatml"`) {
		t.Fatalf("Chat(\"\") without a template: %v", err)
	}
	if _, err := tok.Chat("chatml"); err != nil {
		t.Fatal(err)
	}
	if _, err := tok.Chat("llama"); err == nil {
		t.Fatal("unknown template name accepted")
	}
}

// TestPretokenizer pins the split pattern's subtle cases.
func TestPretokenizer(t *testing.T) {
	initClasses()
	cases := map[string][]string{
		"don't  stop":   {"don", "'t", " ", " stop"},
		"I'LL 'ſſ":      {"I", "'LL", " '", "ſſ"},
		"'ſſ":           {"'ſ", "ſ"},
		"a  \n\n  b":    {"a", "  \n\n", " ", " b"},
		"x \n":          {"x", " \n"},
		"x  ":           {"x", "  "},
		"12345":         {"1", "2", "3", "4", "5"},
		" (x)\n\ny":     {" (", "x", ")\n\n", "y"},
		"\t\tfoo":       {"\t", "\tfoo"},
		"\u3000日本":      {"\u3000日本"},
		"a\u00a0\u00a0": {"a", "\u00a0\u00a0"},
		"e\u0301x":      {"e", "\u0301x"},
		"\r\n\r\n ":     {"\r\n\r\n", " "},
	}
	for in, want := range cases {
		var got []string
		for i := 0; i < len(in); {
			j := pieceEnd(in, i, 1)
			got = append(got, in[i:j])
			i = j
		}
		if strings.Join(got, "|") != strings.Join(want, "|") {
			t.Errorf("%q: pieces %q, want %q", in, got, want)
		}
	}
}

func TestWordCache(t *testing.T) {
	var c wordCache
	c.init()
	c.put("hello", []int32{1, 2})
	if ids, ok := c.get("hello"); !ok || len(ids) != 2 {
		t.Fatalf("get after put: %v %v", ids, ok)
	}
	if _, ok := c.get("hellp"); ok {
		t.Fatal("hit for a word never stored")
	}
	if len(c.slots) != cacheSlots {
		t.Fatalf("cache has %d slots, want the bound %d", len(c.slots), cacheSlots)
	}
}
