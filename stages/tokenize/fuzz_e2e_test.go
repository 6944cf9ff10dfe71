//go:build e2e

package tokenize

import (
	"testing"
	"unicode/utf8"
)

// FuzzEncode checks the properties that hold for any input, valid UTF-8 or
// not: pieces tile the text, Decode inverts Encode (up to NFC), offsets are
// in order and inside the text, and the result does not depend on the cache.
// `go test` runs the seeds; `go test -fuzz FuzzEncode` explores.
func FuzzEncode(f *testing.F) {
	for _, s := range []string{"", "don't  stop", "<|im_start|>x<|im_end|>", "e\u0301\u0323", "\xff\xfe<think>", "  \n\n\t 12345 你好 🤖", "'ſS'LL"} {
		f.Add(s)
	}
	tok := qwen3(f)
	f.Fuzz(func(t *testing.T, s string) {
		for i := 0; i < len(s); {
			j := pieceEnd(s, i, tok.digitsMax)
			if j <= i || j > len(s) {
				t.Fatalf("pieceEnd(%q, %d) = %d", s, i, j)
			}
			i = j
		}
		ids, offsets := tok.EncodeOffsets(s)
		if !equalInts(ids, tok.Encode(s)) {
			t.Fatal("EncodeOffsets and Encode differ")
		}
		if got, want := tok.Decode(ids), nfcBetweenAdded(tok, s); got != want && utf8.ValidString(s) {
			t.Fatalf("Decode(Encode(%q)) = %q, want %q", s, got, want)
		}
		prev := 0
		for _, o := range offsets {
			if o[0] < prev || o[1] < o[0] || o[1] > len(s) {
				t.Fatalf("%q: offsets %v", s, offsets)
			}
			prev = o[0]
		}
		// Twice: the second run is served from the word cache.
		if !equalInts(ids, tok.Encode(s)) {
			t.Fatal("a second Encode differs from the first")
		}
	})
}

// FuzzEncodeGeneral checks the invariants on the families beyond Qwen3
// (DeepSeek-V3 and Llama 2 take the general pipeline, gpt-oss the fast path
// with its own matcher), valid UTF-8 or not: no
// panic, EncodeOffsets agrees with Encode, offsets are in order and inside
// the text, and a second (cached) Encode gives the same ids.
func FuzzEncodeGeneral(f *testing.F) {
	for _, s := range []string{"", "don't  stop", "<｜User｜>x<｜Assistant｜>", "e\u0301\u0323", "\xff\xfe<s>", "  \n\n\t 12345 你好 🤖", "'ſS'LL", "▁▁x▁"} {
		f.Add(s)
	}
	var toks []*Tokenizer
	for _, name := range []string{"deepseek_v3", "gptoss", "llama2"} {
		tok, _ := loadFamily(f, name)
		toks = append(toks, tok)
	}
	f.Fuzz(func(t *testing.T, s string) {
		for _, tok := range toks {
			ids, offsets := tok.EncodeOffsets(s)
			if !equalInts(ids, tok.Encode(s)) {
				t.Fatalf("%q: EncodeOffsets and Encode differ", s)
			}
			prev := 0
			for _, o := range offsets {
				if o[0] < prev || o[1] < o[0] || o[1] > len(s) {
					t.Fatalf("%q: offsets %v", s, offsets)
				}
				prev = o[0]
			}
			if !equalInts(ids, tok.Encode(s)) {
				t.Fatal("a second Encode differs from the first")
			}
		}
	})
}
