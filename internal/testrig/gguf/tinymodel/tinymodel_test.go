package tinymodel

import (
	"bytes"
	"encoding/binary"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/pipe-dev/pipe/internal/testrig/gguf"
)

// writeTokenizer writes a small Qwen-shaped tokenizer into a temp dir.
func writeTokenizer(t *testing.T, merges, config string) string {
	t.Helper()
	dir := t.TempDir()
	tok := `{"model":{"type":"BPE","vocab":{"a":0,"b":1,"ab":2,"Ġ":3},"merges":` + merges + `},
	"added_tokens":[
		{"id":4,"content":"<|endoftext|>","special":true},
		{"id":5,"content":"<|im_start|>","special":true},
		{"id":6,"content":"<|im_end|>","special":true},
		{"id":7,"content":"<|fim_prefix|>","special":false},
		{"id":8,"content":"<think>","special":false}]}`
	if err := os.WriteFile(filepath.Join(dir, "tokenizer.json"), []byte(tok), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "tokenizer_config.json"), []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

const qwenConfig = `{"add_bos_token":false,"bos_token":null,"eos_token":"<|im_end|>","pad_token":"<|endoftext|>","chat_template":"{{ messages }}"}`

func TestLoadTokenizer(t *testing.T) {
	dir := writeTokenizer(t, `[["a","b"],["Ġ","a"]]`, qwenConfig)
	tok, err := LoadTokenizer(dir, 11)
	if err != nil {
		t.Fatal(err)
	}
	wantTokens := []string{"a", "b", "ab", "Ġ", "<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|fim_prefix|>", "<think>", "[PAD9]", "[PAD10]"}
	if !reflect.DeepEqual(tok.Tokens, wantTokens) {
		t.Errorf("tokens %q, want %q", tok.Tokens, wantTokens)
	}
	N, C, U, X := TokenNormal, TokenControl, TokenUserDefined, TokenUnused
	// <|fim_prefix|> is not flagged special but looks it, as llama.cpp's
	// converter decides; <think> is a plain added token.
	if want := []int32{N, N, N, N, C, C, C, C, U, X, X}; !reflect.DeepEqual(tok.Types, want) {
		t.Errorf("types %v, want %v", tok.Types, want)
	}
	if want := []string{"a b", "Ġ a"}; !reflect.DeepEqual(tok.Merges, want) {
		t.Errorf("merges %q, want %q", tok.Merges, want)
	}
	if tok.BOS != 4 || tok.EOS != 6 || tok.EOT != 6 || tok.PAD != 4 || tok.AddBOS {
		t.Errorf("specials bos=%d eos=%d eot=%d pad=%d add_bos=%v, want 4 6 6 4 false", tok.BOS, tok.EOS, tok.EOT, tok.PAD, tok.AddBOS)
	}
	if tok.ChatTemplate != "{{ messages }}" {
		t.Errorf("chat template %q", tok.ChatTemplate)
	}
	if id := tok.ID("<|im_end|>"); id != 6 {
		t.Errorf("ID(<|im_end|>) = %d", id)
	}
}

func TestLoadTokenizerVariants(t *testing.T) {
	// Older tokenizer.json merges are strings; special tokens may be objects;
	// chat_template may be a list of named templates.
	cfg := `{"bos_token":{"content":"<|im_start|>"},"eos_token":{"content":"<|im_end|>"},
		"chat_template":[{"name":"tool_use","template":"T"},{"name":"default","template":"D"}]}`
	tok, err := LoadTokenizer(writeTokenizer(t, `["a b","Ġ a"]`, cfg), 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(tok.Tokens) != 9 || tok.Merges[1] != "Ġ a" || tok.BOS != 5 || tok.EOS != 6 || tok.PAD != -1 || tok.ChatTemplate != "D" {
		t.Errorf("got %d tokens, merges %q, bos %d eos %d pad %d, template %q", len(tok.Tokens), tok.Merges, tok.BOS, tok.EOS, tok.PAD, tok.ChatTemplate)
	}

	if _, err := LoadTokenizer(writeTokenizer(t, `[]`, qwenConfig), 5); err == nil || !strings.Contains(err.Error(), "smaller than") {
		t.Errorf("vocabulary too small: err = %v", err)
	}
	if _, err := LoadTokenizer(writeTokenizer(t, `[["a b","c"]]`, qwenConfig), 0); err == nil || !strings.Contains(err.Error(), "contains a space") {
		t.Errorf("merge with a space: err = %v", err)
	}
}

func smallTokenizer(t *testing.T) *Tokenizer {
	tok, err := LoadTokenizer(writeTokenizer(t, `[["a","b"]]`, qwenConfig), 12)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func TestBuildLayout(t *testing.T) {
	tok := smallTokenizer(t)
	f, err := Build(tok, Config{Layers: 2, Embedding: 8, Heads: 2, KVHeads: 1, FeedForward: 12})
	if err != nil {
		t.Fatal(err)
	}
	kv := map[string]any{}
	for _, p := range f.KV {
		kv[p.Key] = p.Value
	}
	for key, want := range map[string]any{
		"general.architecture":                   "qwen2",
		"qwen2.embedding_length":                 uint32(8),
		"qwen2.block_count":                      uint32(2),
		"qwen2.feed_forward_length":              uint32(12),
		"qwen2.attention.head_count":             uint32(2),
		"qwen2.attention.head_count_kv":          uint32(1),
		"qwen2.context_length":                   uint32(32768),
		"qwen2.attention.layer_norm_rms_epsilon": float32(1e-6),
		"tokenizer.ggml.model":                   "gpt2",
		"tokenizer.ggml.pre":                     "qwen2",
		"tokenizer.ggml.eos_token_id":            uint32(6),
		"tokenizer.ggml.eot_token_id":            uint32(6),
		"tokenizer.ggml.bos_token_id":            uint32(4),
		"tokenizer.ggml.padding_token_id":        uint32(4),
		"tokenizer.ggml.add_bos_token":           false,
		"tokenizer.chat_template":                "{{ messages }}",
	} {
		if !reflect.DeepEqual(kv[key], want) {
			t.Errorf("%s = %#v, want %#v", key, kv[key], want)
		}
	}
	if got := kv["tokenizer.ggml.tokens"].([]string); len(got) != 12 {
		t.Errorf("%d tokens", len(got))
	}

	// Names and shapes (innermost first) are what llama.cpp's qwen2 loader
	// asks for: head dim 4, so K/V project to 1×4.
	shapes := map[string][]uint64{
		"token_embd.weight":  {8, 12},
		"output_norm.weight": {8},
		"output.weight":      {8, 12},
	}
	for _, b := range []string{"blk.0.", "blk.1."} {
		for name, s := range map[string][]uint64{
			"attn_norm.weight": {8}, "attn_q.weight": {8, 8}, "attn_q.bias": {8},
			"attn_k.weight": {8, 4}, "attn_k.bias": {4}, "attn_v.weight": {8, 4}, "attn_v.bias": {4},
			"attn_output.weight": {8, 8}, "ffn_norm.weight": {8},
			"ffn_gate.weight": {8, 12}, "ffn_up.weight": {8, 12}, "ffn_down.weight": {12, 8},
		} {
			shapes[b+name] = s
		}
	}
	got := map[string]gguf.Tensor{}
	for _, tn := range f.Tensors {
		got[tn.Name] = tn
	}
	if len(got) != len(shapes) {
		t.Errorf("%d tensors, want %d", len(got), len(shapes))
	}
	for name, s := range shapes {
		tn, ok := got[name]
		if !ok {
			t.Errorf("missing %s", name)
			continue
		}
		wantType := gguf.F16
		if len(s) == 1 {
			wantType = gguf.F32
		}
		if !reflect.DeepEqual(tn.Shape, s) || tn.Type != wantType {
			t.Errorf("%s: shape %v %v, want %v %v", name, tn.Shape, tn.Type, s, wantType)
		}
	}

	// The stop mechanism: embedding dimension 0 is 1 everywhere, no block
	// writes dimension 0, and only the EOS output row reads it.
	const one = 0x3c00
	f16 := func(tn gguf.Tensor, i int) uint16 { return binary.LittleEndian.Uint16(tn.Data[2*i:]) }
	for id := range 12 {
		if v := f16(got["token_embd.weight"], id*8); v != one {
			t.Errorf("embedding %d dim 0 = %#x, want 1", id, v)
		}
		v := f16(got["output.weight"], id*8)
		if id == tok.EOS && v != gguf.Float16(9) || id != tok.EOS && v != 0 {
			t.Errorf("output row %d dim 0 = %#x", id, v)
		}
	}
	for _, name := range []string{"blk.0.attn_output.weight", "blk.1.ffn_down.weight"} {
		in := int(got[name].Shape[0])
		for i := range in {
			if v := f16(got[name], i); v != 0 {
				t.Errorf("%s row 0 [%d] = %#x, want 0", name, i, v)
			}
		}
	}
}

func TestBuildIsReproducible(t *testing.T) {
	tok := smallTokenizer(t)
	write := func(seed uint64) []byte {
		f, err := Build(tok, Config{Embedding: 8, Heads: 2, Seed: seed})
		if err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		if _, err := f.WriteTo(&buf); err != nil {
			t.Fatal(err)
		}
		return buf.Bytes()
	}
	a, b, c := write(7), write(7), write(8)
	if !bytes.Equal(a, b) {
		t.Error("same seed, different files")
	}
	if bytes.Equal(a, c) {
		t.Error("different seeds, same file")
	}
}

func TestBuildRejectsBadSizes(t *testing.T) {
	tok := smallTokenizer(t)
	for _, cfg := range []Config{
		{Embedding: 10, Heads: 4},             // does not divide
		{Embedding: 6, Heads: 2},              // odd head size
		{Embedding: 16, Heads: 4, KVHeads: 3}, // heads do not group
		{Layers: -1},
	} {
		if _, err := Build(tok, cfg); err == nil {
			t.Errorf("Build(%+v) succeeded", cfg)
		}
	}
}
