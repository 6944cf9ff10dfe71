//go:build e2e

package tokenize

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Components no tested family uses are checked the same way: each case
// edits a real tokenizer.json (Llama 2 for the character-level model,
// Qwen3 for the byte-level one) or builds a small one, and compares ids and
// decoded text with Hugging Face on part of the corpus plus texts aimed at
// the component.

type componentCase struct {
	name  string
	base  string // family whose tokenizer.json is edited; "" for a built one
	edit  map[string]any
	build func() map[string]any
	texts []string
}

func componentCases() []componentCase {
	meta := map[string]any{"type": "Replace", "pattern": map[string]any{"String": " "}, "content": "▁"}
	bf := []any{map[string]any{"type": "ByteFallback"}, map[string]any{"type": "Fuse"}}
	aimed := []string{
		"Hello   World!!  (x)  ", "  ÉCOLE Straße İstanbul ΣΑΣ  ", "ﬁ ½ ① ㍿ Å e\u0301 \u212a", "a1b22c333 ٣٤٥ ⅻ",
		"foo-bar--baz,qux.", "¿¡Qué?! «quotes» — dash… 1.5", "tab\tnew\nline\r\nend", "  ", "x",
		"3.14159 and 2,718 ok", "don't stop 'til", "the theatre thing", "ping pong ring",
	}
	return []componentCase{
		{name: "normalizers", base: "llama2", edit: map[string]any{
			"normalizer": map[string]any{"type": "Sequence", "normalizers": []any{
				map[string]any{"type": "NFKC"}, map[string]any{"type": "Lowercase"},
				map[string]any{"type": "Strip", "strip_left": true, "strip_right": true},
				map[string]any{"type": "Replace", "pattern": map[string]any{"Regex": `\s+`}, "content": " "},
				map[string]any{"type": "Prepend", "prepend": "▁"}, meta,
			}},
		}, texts: aimed},
		{name: "metaspace first split, digits, punctuation", base: "llama2", edit: map[string]any{
			"normalizer": map[string]any{"type": "NFD"},
			"pre_tokenizer": map[string]any{"type": "Sequence", "pretokenizers": []any{
				map[string]any{"type": "Digits", "individual_digits": true},
				map[string]any{"type": "Punctuation", "behavior": "Isolated"},
				map[string]any{"type": "Metaspace", "replacement": "▁", "prepend_scheme": "first", "split": true},
			}},
			"decoder": map[string]any{"type": "Sequence", "decoders": append([]any{map[string]any{"type": "Metaspace", "replacement": "▁", "prepend_scheme": "first", "split": true}}, bf...)},
		}, texts: aimed},
		{name: "metaspace always, whitespace split, contiguous digits, strip decoder", base: "llama2", edit: map[string]any{
			"normalizer": map[string]any{"type": "NFKD"},
			"pre_tokenizer": map[string]any{"type": "Sequence", "pretokenizers": []any{
				map[string]any{"type": "WhitespaceSplit"},
				map[string]any{"type": "Digits", "individual_digits": false},
				map[string]any{"type": "Punctuation", "behavior": "Contiguous"},
				map[string]any{"type": "Metaspace", "replacement": "▁", "prepend_scheme": "always", "split": false},
			}},
			"decoder": map[string]any{"type": "Sequence", "decoders": append(append([]any{map[string]any{"type": "Replace", "pattern": map[string]any{"String": "▁"}, "content": " "}}, bf...),
				map[string]any{"type": "Strip", "content": " ", "start": 1, "stop": 1})},
		}, texts: aimed},
		{name: "added tokens lstrip rstrip single_word normalized", base: "llama2", edit: map[string]any{
			"normalizer": map[string]any{"type": "Sequence", "normalizers": []any{map[string]any{"type": "Lowercase"}, map[string]any{"type": "Prepend", "prepend": "▁"}, meta}},
			"added_tokens": []any{
				map[string]any{"id": 0, "content": "<unk>", "special": true},
				map[string]any{"id": 1, "content": "<s>", "special": true, "lstrip": true},
				map[string]any{"id": 2, "content": "</s>", "special": true, "rstrip": true},
				map[string]any{"id": 32000, "content": "[MASK]", "lstrip": true, "rstrip": true, "special": true},
				map[string]any{"id": 32001, "content": "cat", "single_word": true},
				map[string]any{"id": 32002, "content": "DOG", "normalized": true},
				map[string]any{"id": 32003, "content": "<tag>", "normalized": true, "single_word": true},
			},
		}, texts: append(aimed, "a [MASK] b", "a   [MASK]   b", "[MASK][MASK]", "  <s>  x</s>  y", "cat catalog concat cat.", "_cat cat_ 猫cat",
			"DOG dog Dog hotdog", "x<tag>y <tag> <TAG>", "<s><s></s></s>", "\t[MASK]\n")},
		{name: "split behaviors, byte-level prefix space and regex", base: "qwen3", edit: map[string]any{
			"normalizer": map[string]any{"type": "NFD"},
			"pre_tokenizer": map[string]any{"type": "Sequence", "pretokenizers": []any{
				map[string]any{"type": "Split", "pattern": map[string]any{"Regex": `\p{P}`}, "behavior": "MergedWithNext", "invert": false},
				map[string]any{"type": "Split", "pattern": map[string]any{"String": "e"}, "behavior": "Removed", "invert": false},
				map[string]any{"type": "Split", "pattern": map[string]any{"Regex": `\d+`}, "behavior": "Contiguous", "invert": true},
				map[string]any{"type": "Split", "pattern": map[string]any{"Regex": `(?<=\s)x|y(?=z)`}, "behavior": "MergedWithPrevious", "invert": false},
				map[string]any{"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": true, "use_regex": true},
			}},
		}, texts: append(aimed, "a x yz xyz\tx")},
		{name: "continuing_subword_prefix", build: func() map[string]any { return subwordModel("##", "", false) },
			texts: []string{"the thing rings", "théâtre 123 ok", "a", "xyz!!", "inging the the"}},
		{name: "end_of_word_suffix, fused unk", build: func() map[string]any { return subwordModel("", "</w>", true) },
			texts: []string{"the thing rings", "théâtre 123 ok", "a", "xyz!!", "inging the the"}},
	}
}

// subwordModel is a small character-level BPE with a continuing-subword
// prefix or an end-of-word suffix, WhitespaceSplit, and [UNK].
func subwordModel(prefix, suffix string, fuse bool) map[string]any {
	vocab := map[string]int{"[UNK]": 0}
	add := func(s string) {
		if _, ok := vocab[s]; !ok {
			vocab[s] = len(vocab)
		}
	}
	for c := 'a'; c <= 'z'; c++ {
		add(string(c))
		add(prefix + string(c))
		add(string(c) + suffix)
		add(prefix + string(c) + suffix)
	}
	var merges [][2]string
	merge := func(a, b string) {
		add(a + strings.TrimPrefix(b, prefix))
		merges = append(merges, [2]string{a, b})
	}
	merge("t", prefix+"h")
	merge("th", prefix+"e"+suffix)
	merge("th", prefix+"e")
	merge(prefix+"n", prefix+"g"+suffix)
	merge(prefix+"i", prefix+"ng"+suffix)
	merge("r", prefix+"ing"+suffix)
	merge(prefix+"i", prefix+"n")
	merge("th", prefix+"in")
	// A pair listed twice: Hugging Face keeps the later rank (its merge map
	// is collected from the list), so "##h ##e" now merges before "t ##h".
	merge(prefix+"h", prefix+"e")
	merge("t", prefix+"h")
	model := map[string]any{"type": "BPE", "dropout": nil, "unk_token": "[UNK]", "fuse_unk": fuse, "byte_fallback": false,
		"vocab": vocab, "merges": merges}
	if prefix != "" {
		model["continuing_subword_prefix"] = prefix
	}
	if suffix != "" {
		model["end_of_word_suffix"] = suffix
	}
	return map[string]any{
		"version": "1.0", "truncation": nil, "padding": nil,
		"added_tokens":   []any{map[string]any{"id": 0, "content": "[UNK]", "special": true, "single_word": false, "lstrip": false, "rstrip": false, "normalized": false}},
		"normalizer":     nil,
		"pre_tokenizer":  map[string]any{"type": "WhitespaceSplit"},
		"post_processor": nil,
		"decoder":        map[string]any{"type": "Fuse"},
		"model":          model,
	}
}

// writeVariant writes the case's tokenizer.json into a new directory.
func writeVariant(t *testing.T, c componentCase) string {
	t.Helper()
	var f map[string]any
	if c.build != nil {
		f = c.build()
	} else {
		data, err := os.ReadFile(filepath.Join(familyDir(t, c.base), "tokenizer.json"))
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(data, &f); err != nil {
			t.Fatal(err)
		}
		for k, v := range c.edit {
			f[k] = v
		}
		// Hugging Face wants every field of an added token.
		if added, ok := f["added_tokens"].([]any); ok {
			for _, a := range added {
				m := a.(map[string]any)
				for _, k := range []string{"single_word", "lstrip", "rstrip", "normalized", "special"} {
					if _, ok := m[k]; !ok {
						m[k] = false
					}
				}
			}
		}
	}
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

func TestComponentsMatchHuggingFace(t *testing.T) {
	skipShortOracle(t)
	for _, c := range componentCases() {
		t.Run(c.name, func(t *testing.T) {
			dir := writeVariant(t, c)
			tok, err := Load(dir)
			if err != nil {
				t.Fatal(err)
			}
			if tok.pipe == nil {
				t.Fatal("loaded on the fast path; the case must exercise the general pipeline")
			}
			texts := c.texts
			if c.build == nil {
				for i, s := range testCorpus(t) {
					if i%15 == 0 {
						texts = append(texts, s)
					}
				}
			}
			want := hfEncodeDecode(t, dir, texts)
			for i, s := range texts {
				got := tok.Encode(s)
				if !equalInts(got, want[i].IDs) {
					t.Fatalf("text %d %s: %s", i, quoteCut(s, 60), firstDiff(tok, s, got, want[i].IDs))
				}
				if d := tok.Decode(got); d != want[i].Text && !strings.ContainsRune(want[i].Text, '\uFFFD') {
					t.Fatalf("text %d %s: Decode differs from Hugging Face's:\n%s", i, quoteCut(s, 60), diffText(d, want[i].Text))
				}
				ids, offs := tok.EncodeOffsets(s)
				if !equalInts(ids, got) || len(offs) != len(ids) {
					t.Fatalf("text %d: EncodeOffsets ids differ from Encode's", i)
				}
				for k, o := range offs {
					if o[0] < 0 || o[1] > len(s) || o[0] > o[1] {
						t.Fatalf("text %d: token %d offset %v outside the text (%d bytes)", i, k, o, len(s))
					}
				}
			}
			t.Logf("%d texts: ids and decoded text identical to Hugging Face", len(texts))
		})
	}
}
