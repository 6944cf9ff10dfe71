//go:build e2e

package tokenize

import (
	"slices"
	"testing"
)

// DecodeOffsets gives each id the bytes it adds to the decoded text in
// context: its end is where decoding every id up to it ends, and where the
// text decodes back to what was encoded, the ranges are the encoder's own
// (EncodeOffsets). Decoding a token alone gives another length where the
// decoder treats the first token apart (Llama 2's Strip, a Metaspace
// decoder), for texts that start with spaces, which the test makes sure it
// covers.
func TestDecodeOffsetsInContext(t *testing.T) {
	texts := []string{
		" Hello world", "  two leading spaces", "\n newline then space", " 你好，世界 🙂 émoji",
		"<think>\n reasoning </think>\n\n The answer is 42.", "a  b   c    d", " ",
	}
	ms := map[string]any{"type": "Metaspace", "replacement": "▁", "prepend_scheme": "always", "split": true}
	for _, fam := range []string{"gemma3", "llama2", "qwen3", "llama2 with a Metaspace decoder"} {
		t.Run(fam, func(t *testing.T) {
			var tok *Tokenizer
			if fam == "llama2 with a Metaspace decoder" {
				var err error
				tok, err = Load(writeEdited(t, "llama2", func(f map[string]any) {
					f["normalizer"], f["pre_tokenizer"] = nil, ms
					f["decoder"] = map[string]any{"type": "Sequence", "decoders": []any{ms, map[string]any{"type": "ByteFallback"}, map[string]any{"type": "Fuse"}}}
				}))
				if err != nil {
					t.Fatal(err)
				}
			} else {
				tok, _ = loadFamily(t, fam)
			}
			aloneDiffers := 0
			for _, text := range texts {
				ids, encOff := tok.EncodeOffsets(text)
				got, off := tok.DecodeOffsets(ids)
				if want := tok.Decode(ids); got != want {
					t.Fatalf("%q: text %q, Decode gives %q", text, got, want)
				}
				pos := 0
				for i, o := range off {
					if o[0] != pos || o[1] < o[0] {
						t.Fatalf("%q: offsets %v do not tile the text at %d", text, off, i)
					}
					pos = o[1]
					if end := len(tok.Decode(ids[:i+1])); o[1] != end {
						t.Errorf("%q: id %d (%d) ends at %d; decoding ids[:%d] ends at %d", text, i, ids[i], o[1], i+1, end)
					}
					if len(tok.Decode(ids[i:i+1])) != o[1]-o[0] {
						aloneDiffers++
					}
				}
				if pos != len(got) {
					t.Errorf("%q: offsets end at %d of %d bytes", text, pos, len(got))
				}
				if got == text && tiles(encOff) && !slices.Equal(off, encOff) {
					t.Errorf("%q: decode offsets %v, encoder's %v", text, off, encOff)
				}
			}
			// gemma3's decoder (Replace ▁ by a space, ByteFallback, Fuse)
			// treats no token apart; Llama 2's Strip and Metaspace do.
			if fam != "qwen3" && fam != "gemma3" && aloneDiffers == 0 {
				t.Errorf("no token's length alone differs from its length in context: the texts do not test %s's decoder", fam)
			}
		})
	}
}

// tiles reports whether ranges follow each other without overlap (the
// encoder's do except where a normalizer inserted text, as Llama 2's
// Prepend ▁, which two tokens then share).
func tiles(off [][2]int) bool {
	for i := 1; i < len(off); i++ {
		if off[i][0] != off[i-1][1] {
			return false
		}
	}
	return true
}
