//go:build e2e

package sim

import (
	"context"
	"strings"
	"testing"

	"github.com/pipe-dev/pipe/internal/testrig/testenv"
	"github.com/pipe-dev/pipe/stages/tokenize"
)

// qwen3Tokenizer loads the real Qwen3 tokenizer (testenv.Qwen3Dir: skipped
// without it, a failure under PIPE_CI=1).
func qwen3Tokenizer(t *testing.T) *tokenize.Tokenizer {
	tok, err := tokenize.Load(testenv.Qwen3Dir(t))
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func TestRealTokenizer(t *testing.T) {
	tok := qwen3Tokenizer(t)
	f, err := Start(context.Background(), Config{Speed: 1e6, Tokenizer: tok})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	c := client(t)
	prompt := "<|im_start|>user\nWhat is the capital of France?<|im_end|>\n<|im_start|>assistant\n"
	r := post(t, c, f.URLs()[0]+"/generate", gen(prompt, 30000))
	if got, want := num(r.obj, "meta_info.prompt_tokens"), len(tok.Encode(prompt)); got != want {
		t.Errorf("prompt_tokens %d, tokenizer says %d", got, want)
	}
	out := ids(r.obj)
	text := str(r.obj, "text")
	if out[0] != idThinkStart || out[len(out)-1] != idImEnd {
		t.Fatalf("framing ids %d … %d", out[0], out[len(out)-1])
	}
	if got := tok.Decode(out[:len(out)-1]); got != text {
		t.Errorf("Decode(output_ids) differs from text:\n%.200q\n%.200q", got, text)
	}
	// Re-encoding the text gives nearly the same ids (pieces were encoded a
	// sentence at a time; BPE splits at the same word boundaries).
	re := tok.Encode(text)
	if d := len(re) - (len(out) - 1); d < -len(out)/50 || d > len(out)/50 {
		t.Errorf("re-encoded %d tokens, output has %d", len(re), len(out)-1)
	}
	if !strings.Contains(text, "</think>\n\n") {
		t.Errorf("no </think>: %.200q", text)
	}
}
