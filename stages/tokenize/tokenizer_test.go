package tokenize

import (
	"encoding/json"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pipe-dev/pipe/internal/testrig/testenv"
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
