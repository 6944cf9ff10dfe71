// Command mkmodel writes a tiny random-weight qwen2-architecture GGUF model
// with the real Qwen3 tokenizer, for testing against real inference servers.
//
//	go run ./internal/gguf/cmd/mkmodel -tokenizer .cache/qwen3 -o .cache/ollama/pipe-tiny-qwen.gguf
//
// The output is reproducible: the same flags write the same bytes.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/pipe-dev/pipe/internal/testrig/gguf/tinymodel"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "mkmodel:", err)
		os.Exit(1)
	}
}

func run() error {
	var cfg tinymodel.Config
	tokDir := flag.String("tokenizer", "", "directory with tokenizer.json and tokenizer_config.json (required)")
	out := flag.String("o", "", "output file (required)")
	vocab := flag.Int("vocab", 151936, "embedding rows; ids past the tokenizer's are [PADn] (Qwen3: 151936)")
	// Zero flags take tinymodel.Config's defaults.
	flag.IntVar(&cfg.Layers, "layers", 0, "transformer blocks (default 2)")
	flag.IntVar(&cfg.Embedding, "embd", 0, "hidden size (default 16)")
	flag.IntVar(&cfg.Heads, "heads", 0, "attention heads (default 2)")
	flag.IntVar(&cfg.KVHeads, "kv-heads", 0, "key/value heads (default 1)")
	flag.IntVar(&cfg.FeedForward, "ff", 0, "feed-forward size (default 48)")
	flag.Float64Var(&cfg.StopBias, "stop-bias", 0, "end-of-turn logit bias, sets how soon sampled completions stop (default 9)")
	flag.Uint64Var(&cfg.Seed, "seed", 0, "weight seed (default 1)")
	flag.Parse()
	if *tokDir == "" || *out == "" || flag.NArg() > 0 {
		flag.Usage()
		return fmt.Errorf("-tokenizer and -o are required")
	}

	tok, err := tinymodel.LoadTokenizer(*tokDir, *vocab)
	if err != nil {
		return err
	}
	f, err := tinymodel.Build(tok, cfg)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(*out), 0o755); err != nil {
		return err
	}
	// Write beside the target and rename, so a reader never sees half a model.
	tmp, err := os.CreateTemp(filepath.Dir(*out), ".mkmodel-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	n, err := f.WriteTo(tmp)
	if err == nil {
		err = tmp.Close()
	}
	if err != nil {
		tmp.Close()
		return err
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), *out); err != nil {
		return err
	}
	fmt.Printf("mkmodel: wrote %s (%.1f MB, %d tensors, %d tokens)\n", *out, float64(n)/1e6, len(f.Tensors), len(tok.Tokens))
	return nil
}
