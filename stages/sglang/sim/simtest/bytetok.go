// Package simtest holds what tests of the simulator and of its clients
// share.
package simtest

import "strings"

// ByteTokenizer is a sim.Tokenizer for tests that need no tokenizer files:
// Qwen3's special tokens by their ids, every other byte its own id
// (0-255). Decode(Encode(s)) == s.
type ByteTokenizer struct{}

// Specials are the special tokens ByteTokenizer knows, by their Qwen3 ids.
var Specials = []struct {
	Text string
	ID   int
}{{"<|endoftext|>", 151643}, {"<|im_start|>", 151644}, {"<|im_end|>", 151645}, {"<think>", 151667}, {"</think>", 151668},
	{"<tool_call>", 151657}, {"</tool_call>", 151658}}

func (ByteTokenizer) Encode(text string) []int {
	var ids []int
next:
	for i := 0; i < len(text); {
		if text[i] == '<' {
			for _, sp := range Specials {
				if strings.HasPrefix(text[i:], sp.Text) {
					ids = append(ids, sp.ID)
					i += len(sp.Text)
					continue next
				}
			}
		}
		ids = append(ids, int(text[i]))
		i++
	}
	return ids
}

func (ByteTokenizer) Decode(ids []int) string {
	var b strings.Builder
	for _, id := range ids {
		if id < 256 {
			b.WriteByte(byte(id))
			continue
		}
		for _, sp := range Specials {
			if sp.ID == id {
				b.WriteString(sp.Text)
			}
		}
	}
	return b.String()
}
