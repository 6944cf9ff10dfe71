//go:build e2e

package tokenize

import (
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pipe-dev/pipe/internal/testrig/testenv"
)

func TestLoadErrorsNameFileAndProblem(t *testing.T) {
	cases := []struct {
		name    string
		json    []byte
		config  string
		wantErr string
	}{
		{"not json", []byte("{"), "", "tokenizer.json: not a tokenizer.json"},
		{"wordpiece", tinyTokenizerJSON(func(f map[string]any) { f["model"].(map[string]any)["type"] = "WordPiece" }), "", `model.type is "WordPiece"`},
		{"bad pattern", tinyTokenizerJSON(func(f map[string]any) {
			f["pre_tokenizer"].(map[string]any)["pretokenizers"].([]any)[0].(map[string]any)["pattern"] = map[string]any{"Regex": `(\p{L}+`}
		}), "", `pre_tokenizer.pretokenizers[0]: pattern "(\\p{L}+"`},
		{"BertNormalizer", tinyTokenizerJSON(func(f map[string]any) {
			f["normalizer"] = map[string]any{"type": "Sequence", "normalizers": []any{map[string]any{"type": "NFKC"}, map[string]any{"type": "BertNormalizer"}}}
		}), "", `normalizer.normalizers[1]: type "BertNormalizer" is not supported (supported: NFC,`},
		{"Whitespace", tinyTokenizerJSON(func(f map[string]any) { f["pre_tokenizer"] = map[string]any{"type": "Whitespace"} }), "",
			`pre_tokenizer: type "Whitespace" is not supported (supported: ByteLevel,`},
		{"ByteLevel first", tinyTokenizerJSON(func(f map[string]any) {
			pts := f["pre_tokenizer"].(map[string]any)["pretokenizers"].([]any)
			pts[0], pts[1] = pts[1], pts[0]
		}), "", `pre_tokenizer.pretokenizers[1]: ByteLevel must be the last pre-tokenizer`},
		{"WordPiece decoder", tinyTokenizerJSON(func(f map[string]any) { f["decoder"] = map[string]any{"type": "WordPiece"} }), "",
			`decoder: type "WordPiece" is not supported`},
		{"dropout", tinyTokenizerJSON(func(f map[string]any) { f["model"].(map[string]any)["dropout"] = 0.1 }), "", `model.dropout is 0.1`},
		{"bad merge", tinyTokenizerJSON(func(f map[string]any) { f["model"].(map[string]any)["merges"] = []any{"Ġ zz"} }), "", `model.merges[0] "Ġ" + "zz"`},
		{"bad config", tinyTokenizerJSON(nil), "[1]", "tokenizer_config.json: not a JSON object"},
		{"bad template field", tinyTokenizerJSON(nil), `{"chat_template": 3}`, "tokenizer_config.json: chat_template: want a string"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Load(writeModel(t, c.json, c.config))
			if err == nil || !strings.Contains(err.Error(), c.wantErr) {
				t.Fatalf("error %v, want it to contain %q", err, c.wantErr)
			}
		})
	}
	if _, err := Load(t.TempDir()); err == nil || !strings.Contains(err.Error(), "tokenizer.json") {
		t.Fatalf("missing file: %v", err)
	}
}

// TestHeapMergesEqualScan checks the O(n log n) merge loop against the
// rescanning one on random long words of the real vocabulary.
func TestHeapMergesEqualScan(t *testing.T) {
	tok := qwen3(t)
	rng := rand.New(rand.NewPCG(1, 2))
	alphabet := []string{"a", "b", "e", "th", "in", " ", "的", "😀", "=", "1", "ing", "x"}
	sc := new(bpeScratch)
	for n := 0; n < 2000; n++ {
		var sb strings.Builder
		for sb.Len() < 2+rng.IntN(200) {
			sb.WriteString(alphabet[rng.IntN(len(alphabet))])
		}
		w := sb.String()
		a := append([]int32(nil), tok.bpeHeap(w, nil, sc)...)
		b := tok.bpeScan(w, nil, sc)
		if len(a) != len(b) {
			t.Fatalf("%q: heap %v, scan %v", w, a, b)
		}
		for i := range a {
			if a[i] != b[i] {
				t.Fatalf("%q: heap %v, scan %v", w, a, b)
			}
		}
	}
}

// TestConcurrentEncode shares one tokenizer (and its word cache) across
// goroutines; run with -race to check the cache's locking.
func TestConcurrentEncode(t *testing.T) {
	tok := qwen3(t)
	texts := []string{"Hello, world! 你好 🤖", "func main() {\n\tfmt.Println(\"hi\")\n}", strings.Repeat("tokenizer ", 200)}
	want := make([][]int, len(texts))
	for i, s := range texts {
		want[i] = tok.Encode(s)
	}
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := 0; n < 200; n++ {
				i := (g + n) % len(texts)
				if got := tok.Encode(texts[i]); !equalInts(got, want[i]) {
					t.Errorf("goroutine %d: ids differ", g)
					return
				}
			}
		}()
	}
	wg.Wait()
}

func TestLoadIsFast(t *testing.T) {
	dir := testenv.Qwen3Dir(t)
	start := time.Now()
	if _, err := Load(dir); err != nil {
		t.Fatal(err)
	}
	// About 0.35 s of CPU on an idle machine; the bound leaves room for a
	// busy one while still catching a return to encoding/json (~1 s+).
	d := time.Since(start)
	t.Logf("Load: %v", d)
	if d > 5*time.Second {
		t.Fatalf("loading Qwen3 took %v", d)
	}
}

func TestEncodeMaskedReplyStartingWithNewlines(t *testing.T) {
	tok := qwen3(t)
	// The reply "\n\nHi" merges with the header's "\n" into one "\n\n\n"
	// token that starts in the header: it gets 0, "Hi" and the end get 1.
	s := "<|im_start|>assistant\n\n\nHi<|im_end|>\n"
	ids, mask := tok.EncodeMasked(s, [][2]int{{len("<|im_start|>assistant\n"), len(s)}})
	var got []string
	for i, id := range ids {
		got = append(got, tok.Decode([]int{id})+"="+itoa(mask[i]))
	}
	want := "<|im_start|>=0|assistant=0|\n\n\n=0|Hi=1|<|im_end|>=1|\n=1"
	if strings.Join(got, "|") != want {
		t.Fatalf("got %q\nwant %q", strings.Join(got, "|"), want)
	}
}

func TestOffsetsAcrossNormalization(t *testing.T) {
	tok := qwen3(t)
	for _, s := range []string{"cafe\u0301 x", "\u212a is kelvin", "a\u0323\u0307b <think>e\u0301", "ok\xff\xfe bytes"} {
		ids, offsets := tok.EncodeOffsets(s)
		if !equalInts(ids, tok.Encode(s)) {
			t.Fatalf("%q: EncodeOffsets ids differ from Encode", s)
		}
		prev := 0
		for i, o := range offsets {
			if o[0] < prev || o[1] < o[0] || o[1] > len(s) {
				t.Fatalf("%q: offset %d %v out of order or range (%v)", s, i, o, offsets)
			}
			prev = o[0]
		}
		if offsets[len(offsets)-1][1] != len(s) {
			t.Fatalf("%q: offsets end at %d, text at %d", s, offsets[len(offsets)-1][1], len(s))
		}
	}
	// Invalid UTF-8 round-trips byte for byte.
	if s := "ok\xff\xfe bytes"; tok.Decode(tok.Encode(s)) != s {
		t.Fatal("invalid UTF-8 does not round-trip")
	}
}

// Decode writes each id's bytes as tokenBytes holds them, whatever their
// length (added tokens are longer than 8 bytes), in any order and with
// ids it does not know skipped; compared with a plain concatenation.
func TestDecodeIsConcatenation(t *testing.T) {
	tok, err := Load(testenv.Qwen3Dir(t))
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(7, 8))
	for round := range 2000 {
		ids := make([]int, rng.IntN(300))
		for i := range ids {
			switch rng.IntN(20) {
			case 0:
				ids[i] = -1 - rng.IntN(3)
			case 1:
				ids[i] = tok.tokenBytes.len() + rng.IntN(3)
			case 2:
				ids[i] = 151643 + rng.IntN(tok.tokenBytes.len()-151643) // added tokens
			default:
				ids[i] = rng.IntN(tok.tokenBytes.len())
			}
		}
		var want strings.Builder
		for _, id := range ids {
			if id >= 0 && id < tok.tokenBytes.len() {
				want.WriteString(tok.tokenBytes.at(id))
			}
		}
		if got := tok.Decode(ids); got != want.String() {
			t.Fatalf("round %d: Decode(%v) = %q, want %q", round, ids, got, want.String())
		}
	}
}

func BenchmarkDecode(b *testing.B) {
	tok, err := Load(testenv.Qwen3Dir(b))
	if err != nil {
		b.Fatal(err)
	}
	ids := tok.Encode(strings.Repeat("Okay, let me think about whether 17 + 4 is even or odd, step by step. ", 60))
	b.SetBytes(int64(len(tok.Decode(ids))))
	for b.Loop() {
		tok.Decode(ids)
	}
}
