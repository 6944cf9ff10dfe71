// Package tinymodel builds a tiny random-weight language model in GGUF: the
// qwen2 architecture (what llama.cpp-based servers such as ollama v0.6.5 load;
// they predate a qwen3 architecture) with a real tokenizer, so a real
// inference server tokenizes, generates, counts, stops and streams with it.
// Its text is gibberish; everything around the text is real.
package tinymodel

import (
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/pipe-dev/pipe/internal/testrig/gguf"
)

// Config sizes the model; zero fields take the defaults given.
type Config struct {
	Layers      int // transformer blocks; default 2
	Embedding   int // hidden size; default 16
	Heads       int // attention heads; default 2 (must divide Embedding)
	KVHeads     int // key/value heads; default 1 (must divide Heads)
	FeedForward int // FFN hidden size; default 48
	// ContextLength is the trained context the file declares; default 32768.
	ContextLength int
	// StopBias raises the logit of the end-of-turn token (EOS) at every
	// step, so that sampled completions end by themselves at a steady rate
	// instead of always running to max_tokens; default 9. Measured with
	// ollama's default sampling (temperature 1, top-k 40): 8 stops about
	// 1% of steps, 9 about 2% (a completion averages some 50 tokens), 10
	// about 6%, 12 about 11%. A negative value makes natural stops rare.
	StopBias float64
	// Seed makes the weights, and so the file, reproducible; default 1.
	Seed uint64
	// Name is general.name; default "pipe-tiny-qwen".
	Name string
}

func (c *Config) defaults() error {
	def := func(p *int, v int) {
		if *p == 0 {
			*p = v
		}
	}
	def(&c.Layers, 2)
	def(&c.Embedding, 16)
	def(&c.Heads, 2)
	def(&c.KVHeads, 1)
	def(&c.FeedForward, 48)
	if c.StopBias == 0 {
		c.StopBias = 9
	}
	def(&c.ContextLength, 32768)
	if c.Seed == 0 {
		c.Seed = 1
	}
	if c.Name == "" {
		c.Name = "pipe-tiny-qwen"
	}
	switch {
	case c.Layers < 1 || c.Embedding < 2 || c.Heads < 1 || c.KVHeads < 1 || c.FeedForward < 1:
		return fmt.Errorf("tinymodel: sizes must be positive: %+v", *c)
	case c.Embedding%c.Heads != 0 || (c.Embedding/c.Heads)%2 != 0:
		return fmt.Errorf("tinymodel: embedding %d must split into %d heads of an even size (RoPE)", c.Embedding, c.Heads)
	case c.Heads%c.KVHeads != 0:
		return fmt.Errorf("tinymodel: %d heads do not group over %d KV heads", c.Heads, c.KVHeads)
	}
	return nil
}

// Build lays out the GGUF file: qwen2 hyperparameters, the tokenizer, and
// random weights — F16 matrices, F32 vectors. Nearly all of the file is the
// tokenizer (about 6 MB for Qwen3) and the two vocabulary × Embedding
// matrices, the token embedding and the output projection.
func Build(tok *Tokenizer, cfg Config) (*gguf.File, error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	nVocab := len(tok.Tokens)
	if nVocab == 0 || len(tok.Types) != nVocab {
		return nil, fmt.Errorf("tinymodel: tokenizer has %d tokens and %d types", nVocab, len(tok.Types))
	}
	headDim := cfg.Embedding / cfg.Heads
	kvDim := cfg.KVHeads * headDim

	f := &gguf.File{}
	const arch = "qwen2"
	f.Set("general.architecture", arch)
	f.Set("general.type", "model")
	f.Set("general.name", cfg.Name)
	f.Set("general.file_type", uint32(1)) // mostly F16
	f.Set(arch+".context_length", uint32(cfg.ContextLength))
	f.Set(arch+".embedding_length", uint32(cfg.Embedding))
	f.Set(arch+".block_count", uint32(cfg.Layers))
	f.Set(arch+".feed_forward_length", uint32(cfg.FeedForward))
	f.Set(arch+".attention.head_count", uint32(cfg.Heads))
	f.Set(arch+".attention.head_count_kv", uint32(cfg.KVHeads))
	f.Set(arch+".rope.freq_base", float32(1e6))
	f.Set(arch+".attention.layer_norm_rms_epsilon", float32(1e-6))

	f.Set("tokenizer.ggml.model", "gpt2")
	f.Set("tokenizer.ggml.pre", "qwen2")
	f.Set("tokenizer.ggml.tokens", tok.Tokens)
	f.Set("tokenizer.ggml.token_type", tok.Types)
	f.Set("tokenizer.ggml.merges", tok.Merges)
	for _, special := range []struct {
		key string
		id  int
	}{
		{"tokenizer.ggml.bos_token_id", tok.BOS},
		{"tokenizer.ggml.eos_token_id", tok.EOS},
		{"tokenizer.ggml.eot_token_id", tok.EOT},
		{"tokenizer.ggml.padding_token_id", tok.PAD},
	} {
		if special.id >= 0 {
			f.Set(special.key, uint32(special.id))
		}
	}
	f.Set("tokenizer.ggml.add_bos_token", tok.AddBOS)
	if tok.ChatTemplate != "" {
		f.Set("tokenizer.chat_template", tok.ChatTemplate)
	}

	rng := rand.New(rand.NewPCG(cfg.Seed, 0x70697065)) // "pipe"
	// normal fills n values with N(0, std²).
	normal := func(n int, std float64) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(rng.NormFloat64() * std)
		}
		return v
	}
	ones := func(n int) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = 1
		}
		return v
	}
	e, ff := cfg.Embedding, cfg.FeedForward
	vec := func(name string, v []float32) gguf.Tensor {
		return gguf.NewF32(name, []uint64{uint64(len(v))}, v)
	}
	// matrix maps in → out, stored as out rows of in values, with the usual
	// 1/√in scale so that every block changes the residual stream about as
	// much as the embedding sets it: the next token depends on the context,
	// not only on the last token.
	matrix := func(name string, in, out int) (gguf.Tensor, []float32) {
		w := normal(in*out, 1/math.Sqrt(float64(in)))
		return gguf.NewF16(name, []uint64{uint64(in), uint64(out)}, w), w
	}
	// toResidual is a matrix writing into the residual stream; it leaves
	// dimension 0 alone (see below).
	toResidual := func(name string, in int) gguf.Tensor {
		_, w := matrix(name, in, e)
		clear(w[:in]) // row 0
		return gguf.NewF16(name, []uint64{uint64(in), uint64(e)}, w)
	}
	plain := func(name string, in, out int) gguf.Tensor {
		t, _ := matrix(name, in, out)
		return t
	}

	// Dimension 0 of the residual stream is a constant 1: every embedding
	// has 1 there and no block writes to it. Only the EOS row of the output
	// projection reads it, which gives that token a steady logit bias — the
	// architecture has no output bias of its own.
	embd := normal(e*nVocab, 1)
	for i := range nVocab {
		embd[i*e] = 1
	}
	f.Tensors = append(f.Tensors, gguf.NewF16("token_embd.weight", []uint64{uint64(e), uint64(nVocab)}, embd))
	for i := range cfg.Layers {
		blk := fmt.Sprintf("blk.%d.", i)
		f.Tensors = append(f.Tensors,
			vec(blk+"attn_norm.weight", ones(e)),
			plain(blk+"attn_q.weight", e, e),
			vec(blk+"attn_q.bias", normal(e, 0.1)),
			plain(blk+"attn_k.weight", e, kvDim),
			vec(blk+"attn_k.bias", normal(kvDim, 0.1)),
			plain(blk+"attn_v.weight", e, kvDim),
			vec(blk+"attn_v.bias", normal(kvDim, 0.1)),
			toResidual(blk+"attn_output.weight", e),
			vec(blk+"ffn_norm.weight", ones(e)),
			plain(blk+"ffn_gate.weight", e, ff),
			plain(blk+"ffn_up.weight", e, ff),
			toResidual(blk+"ffn_down.weight", ff),
		)
	}
	f.Tensors = append(f.Tensors, vec("output_norm.weight", ones(e)))

	// The output projection is its own matrix rather than tied to the
	// embedding: tied, each token's own logit dominates and sampling repeats
	// one token forever. Logits come out with a standard deviation of about
	// 2, so top-k sampling spreads over many tokens.
	out := normal(e*nVocab, 2/math.Sqrt(float64(e-1)))
	for i := range nVocab {
		out[i*e] = 0
	}
	if tok.EOS >= 0 {
		row := out[tok.EOS*e : (tok.EOS+1)*e]
		clear(row)
		row[0] = float32(cfg.StopBias)
	}
	f.Tensors = append(f.Tensors, gguf.NewF16("output.weight", []uint64{uint64(e), uint64(nVocab)}, out))
	return f, nil
}
