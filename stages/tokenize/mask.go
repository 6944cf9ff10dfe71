package tokenize

import (
	"fmt"
	"sync"

	"github.com/pipe-dev/pipe/stages/tokenize/chat"
)

// Chat returns the chat template to render with: name "" is the model's own
// (an error naming the directory if it has none), "chatml" the generic
// ChatML template. The template sees the model's special-token variables.
func (t *Tokenizer) Chat(name string) (*chat.Template, error) {
	switch name {
	case "":
		if t.chatTemplate == "" {
			return nil, fmt.Errorf("%s: the model has no chat template (in tokenizer_config.json or chat_template.jinja); set template = \"chatml\" to use ChatML", t.dir)
		}
		tmpl, err := chat.New(t.chatTemplate, t.specialVars)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", t.dir, err)
		}
		return tmpl, nil
	case "chatml":
		return chat.New(chat.ChatMLSource, t.specialVars)
	}
	return nil, fmt.Errorf("unknown template %q (want the model's own, or \"chatml\")", name)
}

// MaskMode chooses which tokens of a conversation carry loss. Every mode
// takes its spans from chat.Template.AssistantTurns, from rendering the
// conversation message by message, never from marker strings: what a user
// wrote is never trained on, whatever tokens it contains.
type MaskMode int

const (
	// MaskSpecForge is SpecForge's labelling for the template's family
	// (specforge/data/parse.py GeneralParser.parse with the chat templates
	// of specforge/data/template.py): every match of the template's
	// assistant_header through its end_of_turn_token is trained, so an
	// assistant turn's tool calls are trained with it, and tool results
	// (which Qwen3 renders in a user turn) and the tools block (in the
	// system turn) never are. A template that forces thinking (qwen3.5,
	// qwen3-next-thinking: assistant_header "<|im_start|>assistant\n<think>\n")
	// trains the turns rendered with the whole generation prompt: the
	// final one, and the turns after the last user query that keep their
	// thinking (the tool-call turns of an agentic exchange); earlier
	// turns, rendered without "<think>", get no loss. A hybrid template
	// (qwen3-thinking, qwen3-instruct) trains every assistant turn. Both
	// from after the generation prompt through the end of turn
	// ("<|im_end|>\n").
	MaskSpecForge MaskMode = iota
	// MaskAssistant: every assistant turn, from after (the part it is
	// rendered with of) its generation prompt through its end of turn.
	MaskAssistant
	// MaskLastTurn: only the last assistant turn, the same way.
	MaskLastTurn
	// MaskGenerated: exactly the tokens the model sampled: the last turn
	// from after its generation prompt through the end-of-sequence token
	// (<|im_end|>), not the template's "\n" after it.
	MaskGenerated
)

var maskModeNames = [...]string{"specforge", "assistant", "last_turn", "generated"}

// ParseMaskMode accepts "specforge", "assistant", "last_turn" and "generated".
func ParseMaskMode(s string) (MaskMode, error) {
	for i, n := range maskModeNames {
		if s == n {
			return MaskMode(i), nil
		}
	}
	return 0, fmt.Errorf("mask mode %q: want \"specforge\", \"assistant\", \"last_turn\" or \"generated\"", s)
}

func (m MaskMode) String() string {
	if m >= 0 && int(m) < len(maskModeNames) {
		return maskModeNames[m]
	}
	return fmt.Sprintf("MaskMode(%d)", int(m))
}

// LastOnly says whether the mode needs only the last assistant turn.
// forced is kept for the callers: MaskSpecForge needs every turn even for
// a template that forces thinking, since turns before the last one keep
// their thinking (and are trained) after tool results.
func (m MaskMode) LastOnly(forced bool) bool {
	return m == MaskLastTurn || m == MaskGenerated
}

// Convention describes the labelling m gives, with forced saying whether
// the template forces thinking: for run logs and row metadata.
func (m MaskMode) Convention(forced bool) string {
	switch {
	case m == MaskSpecForge && forced:
		return "specforge qwen3.5 (forced thinking): the assistant turns rendered with the whole generation prompt (the final one, and tool-call turns after the last user query that keep their thinking), from after it through the end of turn"
	case m == MaskSpecForge:
		return "specforge qwen3-thinking (hybrid thinking): every assistant turn, from after its generation prompt through the end of turn"
	case m == MaskAssistant:
		return "assistant: every assistant turn, from after its generation prompt through the end of turn"
	case m == MaskLastTurn:
		return "last_turn: the last assistant turn, from after its generation prompt through the end of turn"
	}
	return "generated: exactly the tokens the model sampled (the last turn through its end-of-sequence token)"
}

// MaskSpans returns the byte ranges of the rendered conversation that carry
// loss under m, from its assistant turns (chat.Template.AssistantTurns);
// forced says the template forces thinking (chat.Template.ThinkingForced).
// Use the ranges with EncodeMasked's rule: a token carries loss when its
// first byte lies in one.
func MaskSpans(turns []chat.Turn, m MaskMode, forced bool) [][2]int {
	if len(turns) == 0 {
		return nil
	}
	last := turns[len(turns)-1]
	var spans [][2]int
	switch m {
	case MaskLastTurn:
		spans = append(spans, [2]int{last.Body, last.End})
	case MaskGenerated:
		// Through the first byte of the end of turn: the token that starts
		// there is the end-of-sequence token the model sampled.
		spans = append(spans, [2]int{last.Body, min(last.ContentEnd+1, last.End)})
	default:
		for _, t := range turns {
			if m == MaskSpecForge && forced && !t.Prompted {
				continue
			}
			spans = append(spans, [2]int{t.Body, t.End})
		}
	}
	return spans
}

// EncodeConversation renders messages with tmpl (no generation prompt),
// encodes the whole text once without adding special tokens, and returns
// the text, its ids and the loss mask under m: 1 for each token whose first
// byte lies in a span of MaskSpans, 0 elsewhere. The whole text is encoded
// once and the mask comes from token offsets, because encoding prompt and
// reply separately can give other ids (a reply starting with "\n\n" merges
// differently).
func (t *Tokenizer) EncodeConversation(tmpl *chat.Template, messages []chat.Message, opts chat.Options, m MaskMode, forced bool) (rendered string, ids, mask []int, err error) {
	rendered, turns, err := tmpl.AssistantTurns(messages, opts, m.LastOnly(forced))
	if err != nil {
		return "", nil, nil, err
	}
	ids, mask = t.EncodeMasked(rendered, MaskSpans(turns, m, forced))
	return rendered, ids, mask, nil
}

var offsetBufs = sync.Pool{New: func() any { return new([][2]int) }}

// EncodeMasked encodes text and marks with 1 each token whose first byte lies
// in one of spans (byte ranges [start, end) of text, in order, not
// overlapping); every other token gets 0.
func (t *Tokenizer) EncodeMasked(text string, spans [][2]int) (ids, mask []int) {
	// The offsets are only read here: their buffer is reused (a fresh one
	// per row was a tenth of a rehearsal's allocations).
	buf := offsetBufs.Get().(*[][2]int)
	defer offsetBufs.Put(buf)
	e := encoder{t: t, ids: make([]int, 0, len(text)/3+4), offsets: (*buf)[:0], wantOffsets: true}
	e.run(text)
	ids, offsets := e.ids, e.offsets
	if cap(offsets) <= 1<<16 {
		*buf = offsets
	}
	mask = make([]int, len(ids))
	s := 0
	for i, off := range offsets {
		for s < len(spans) && off[0] >= spans[s][1] {
			s++
		}
		if s < len(spans) && off[0] >= spans[s][0] {
			mask[i] = 1
		}
	}
	return ids, mask
}
