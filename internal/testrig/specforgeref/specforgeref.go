// Package specforgeref is SpecForge's loss-mask labelling, written again
// from its source as an independent oracle for pipe's tests: the rule of
// specforge/data/parse.py GeneralParser.parse (and ThinkingParser.parse,
// which only adds enable_thinking) with the chat templates of
// specforge/data/template.py (github.com/sgl-project/SpecForge).
//
// The rule works on the rendered conversation text: every match of
// re.escape(assistant_header) + r"([\s\S]*?(?:" + re.escape(end_of_turn) + "|$))"
// (only the last with train_only_last_turn) sets loss_mask[a:b] = 1 where
// a = len(encode(conv[:match.start(1)])) and b = len(encode(conv[:match.end(1)]));
// then every occurrence of each ignore_token zeroes its tokens the same way.
// It searches marker strings, so text a user wrote can match it: pipe's own
// mask must agree with it on honest conversations only.
package specforgeref

import (
	"regexp"
	"strings"
)

// Template is the part of a SpecForge ChatTemplate the labelling reads.
type Template struct {
	Name            string
	AssistantHeader string
	EndOfTurn       string
	IgnoreTokens    []string
}

// SpecForge's templates for the Qwen family (specforge/data/template.py).
var (
	// Qwen3Thinking is "qwen3-thinking": the hybrid Qwen3 template with
	// thinking on.
	Qwen3Thinking = Template{Name: "qwen3-thinking", AssistantHeader: "<|im_start|>assistant\n", EndOfTurn: "<|im_end|>\n"}
	// Qwen3Instruct is "qwen3-instruct": the hybrid template with thinking
	// off; the empty think block is not trained.
	Qwen3Instruct = Template{Name: "qwen3-instruct", AssistantHeader: "<|im_start|>assistant\n", EndOfTurn: "<|im_end|>\n",
		IgnoreTokens: []string{"<think>\n\n</think>\n\n"}}
	// Qwen35 is "qwen3.5" (Qwen3.5/3.6 and forced-thinking templates).
	Qwen35 = Template{Name: "qwen3.5", AssistantHeader: "<|im_start|>assistant\n<think>\n", EndOfTurn: "<|im_end|>\n"}
)

// Span is a range of characters (bytes here) of the conversation whose
// tokens get Loss (1), or get zeroed (an ignore token).
type Span struct {
	Start, End int
	Loss       bool
}

// Spans returns the labelled ranges of conv, loss ranges first, in
// SpecForge's order of application.
func Spans(conv string, t Template, lastOnly bool) []Span {
	// Python's [\s\S]*? is RE2's (?s).*?; "$" without MULTILINE is the end
	// of the text (or before a final "\n", never reached: the end of turn
	// ends in "\n" and matches first).
	re := regexp.MustCompile(regexp.QuoteMeta(t.AssistantHeader) + `((?s).*?(?:` + regexp.QuoteMeta(t.EndOfTurn) + `|$))`)
	var spans []Span
	ms := re.FindAllStringSubmatchIndex(conv, -1)
	if lastOnly && len(ms) > 0 {
		ms = ms[len(ms)-1:]
	}
	for _, m := range ms {
		spans = append(spans, Span{Start: m[2], End: m[3], Loss: true})
	}
	for _, tok := range t.IgnoreTokens {
		for start := 0; ; {
			i := strings.Index(conv[start:], tok)
			if i < 0 {
				break
			}
			spans = append(spans, Span{Start: start + i, End: start + i + len(tok)})
			start += i + len(tok)
		}
	}
	return spans
}

// Mask is the loss mask of n tokens that spans give, where prefixLen(off)
// is the number of tokens conv[:off] encodes to (HF tokenizers, no special
// tokens added), as SpecForge computes token indexes.
func Mask(n int, spans []Span, prefixLen func(off int) int) []int {
	mask := make([]int, n)
	for _, s := range spans {
		a, b := min(prefixLen(s.Start), n), min(prefixLen(s.End), n)
		v := 0
		if s.Loss {
			v = 1
		}
		for i := a; i < b; i++ {
			mask[i] = v
		}
	}
	return mask
}
