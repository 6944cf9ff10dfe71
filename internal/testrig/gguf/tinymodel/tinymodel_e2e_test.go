//go:build e2e

package tinymodel

import (
	"strings"
	"testing"

	"github.com/pipe-dev/pipe/internal/testrig/testenv"
)

// TestRealQwen3Tokenizer checks the files scripts/fetch-qwen3.sh fetches.
func TestRealQwen3Tokenizer(t *testing.T) {
	tok, err := LoadTokenizer(testenv.Qwen3Dir(t), 151936)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		token string
		id    int
		typ   int32
	}{
		{"user", 872, TokenNormal},
		{"<|endoftext|>", 151643, TokenControl},
		{"<|im_start|>", 151644, TokenControl},
		{"<|im_end|>", 151645, TokenControl},
		{"<tool_call>", 151657, TokenUserDefined},
		{"<|fim_prefix|>", 151659, TokenControl},
		{"<think>", 151667, TokenUserDefined},
		{"</think>", 151668, TokenUserDefined},
		{"[PAD151669]", 151669, TokenUnused},
		{"[PAD151935]", 151935, TokenUnused},
	} {
		if tok.Tokens[c.id] != c.token || tok.Types[c.id] != c.typ {
			t.Errorf("token %d = %q type %d, want %q type %d", c.id, tok.Tokens[c.id], tok.Types[c.id], c.token, c.typ)
		}
	}
	if tok.EOS != 151645 || tok.PAD != 151643 || tok.BOS != 151643 || tok.AddBOS {
		t.Errorf("specials bos=%d eos=%d pad=%d add_bos=%v", tok.BOS, tok.EOS, tok.PAD, tok.AddBOS)
	}
	if len(tok.Merges) != 151387 || tok.Merges[0] != "Ġ Ġ" {
		t.Errorf("%d merges, first %q", len(tok.Merges), tok.Merges[0])
	}
	if !strings.Contains(tok.ChatTemplate, "<|im_start|>") || !strings.Contains(tok.ChatTemplate, "enable_thinking") {
		t.Errorf("chat template is not Qwen3's: %.80q", tok.ChatTemplate)
	}
}
