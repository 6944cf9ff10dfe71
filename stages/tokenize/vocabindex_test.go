package tokenize

import (
	"fmt"
	"testing"
)

// The index answers as the map it replaces: every token, tokens that share
// an id, and tokens not in the vocabulary (a prefix, a longer string, "").
func TestVocabIndexAgreesWithTheMap(t *testing.T) {
	vocab := map[string]int{}
	for i := range 50_000 {
		vocab[fmt.Sprintf("tok%d", i)] = i
	}
	vocab["alias-of-7"] = 7 // tokenizer.json may give two tokens one id
	vocab["Ġthe"] = 50_000
	tokens := make([]string, 50_001)
	for tok, id := range vocab {
		tokens[id] = tok
	}
	tab, err := packStrings(tokens)
	if err != nil {
		t.Fatal(err)
	}
	ix := newVocabIndex(vocab, tab)
	for tok, want := range vocab {
		if id, ok := ix.get(tok); !ok || id != want {
			t.Fatalf("get(%q) = %d, %v; want %d", tok, id, ok, want)
		}
	}
	for _, tok := range []string{"", "tok", "tok50000", "tok1x", "Ġth", "alias-of-8"} {
		if id, ok := ix.get(tok); ok {
			t.Fatalf("get(%q) = %d for a token not in the vocabulary", tok, id)
		}
	}
}
