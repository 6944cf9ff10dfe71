package tokenize

import (
	"fmt"

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

// MaskMode chooses which assistant turns carry loss.
type MaskMode int

const (
	// MaskAssistant: every assistant turn (the convention draft-model trainers use).
	MaskAssistant MaskMode = iota
	// MaskLastTurn: only the last assistant turn.
	MaskLastTurn
)

// ParseMaskMode accepts "assistant" and "last_turn".
func ParseMaskMode(s string) (MaskMode, error) {
	switch s {
	case "assistant":
		return MaskAssistant, nil
	case "last_turn":
		return MaskLastTurn, nil
	}
	return 0, fmt.Errorf("mask mode %q: want \"assistant\" or \"last_turn\"", s)
}

func (m MaskMode) String() string {
	if m == MaskLastTurn {
		return "last_turn"
	}
	return "assistant"
}

// EncodeChat encodes a rendered ChatML-style conversation (render it with
// AddGenerationPrompt false) and returns its ids and loss mask: 1 for the
// tokens of assistant replies per mode — from the first token after
// "<|im_start|>assistant\n" through "<|im_end|>" and the "\n" after it —
// and 0 elsewhere. The whole text is encoded once; the mask comes from token
// offsets, because encoding prompt and reply separately can give other ids
// (a reply starting with "\n\n" merges differently).
func (t *Tokenizer) EncodeChat(rendered string, mode MaskMode) (ids, mask []int) {
	return t.EncodeMasked(rendered, chat.AssistantSpans(rendered, mode == MaskLastTurn))
}

// EncodeMasked encodes text and marks with 1 each token whose first byte lies
// in one of spans (byte ranges [start, end) of text, in order, not
// overlapping); every other token gets 0.
func (t *Tokenizer) EncodeMasked(text string, spans [][2]int) (ids, mask []int) {
	ids, offsets := t.EncodeOffsets(text)
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
