package main

import (
	"strings"

	"github.com/pipe-dev/pipe/pipeline/record"
)

// pipe inspect: rows.

type rowReport struct {
	ID           string            `json:"id"`
	FinishReason string            `json:"finish_reason,omitempty"`
	Reject       *record.Rejection `json:"reject,omitempty"`
	Failure      *record.Failure   `json:"failure,omitempty"`
	LastUser     string            `json:"last_user,omitempty"`
	// Tools are the declared tools' names; ToolSteps the calls and
	// results after the last user message, then the completion's calls.
	Tools      []string          `json:"tools,omitempty"`
	ToolSteps  []record.ToolStep `json:"tool_steps,omitempty"`
	Answer     *string           `json:"answer,omitempty"`
	Reasoning  string            `json:"reasoning,omitempty"`
	PromptTok  int               `json:"prompt_tokens,omitempty"`
	CompTok    int               `json:"completion_tokens,omitempty"`
	HasTokens  bool              `json:"has_tokens"`
	NumTokens  int               `json:"num_tokens,omitempty"`
	NumLossTok int               `json:"num_loss_tokens,omitempty"`
	LossSpans  [][2]int          `json:"loss_spans,omitempty"`
	// Unreadable says why a JSONL line shown is not a record.
	Unreadable string `json:"unreadable,omitempty"`
	// Decoded is input_ids as text (with --tokenizer), loss spans in ⟦ ⟧.
	Decoded string `json:"decoded,omitempty"`
	// segments of Decoded, for shortening each in the text output.
	segs []decodedSeg
}

type decodedSeg struct {
	text   string
	masked bool
}

func (ins *inspector) rows(recs []*record.Record) []rowReport {
	out := make([]rowReport, 0, len(recs))
	for _, rec := range recs {
		r := rowReport{ID: rec.ID, Reject: rec.Reject, Failure: rec.Failure}
		for i := len(rec.Messages) - 1; i >= 0; i-- {
			if rec.Messages[i].Role == "user" {
				r.LastUser = rec.Messages[i].Content
				break
			}
		}
		r.Tools, r.ToolSteps = rec.ToolNames(), rec.ToolSteps()
		if c := rec.Completion; c != nil {
			r.FinishReason = c.FinishReason
			a := c.Answer
			r.Answer = &a
			r.Reasoning = c.Reasoning
			r.PromptTok, r.CompTok = c.PromptTokens, c.CompletionTokens
		}
		if t := rec.Tokens; t != nil {
			r.HasTokens = true
			r.NumTokens, r.NumLossTok = t.NumTokens, t.NumLossTokens
			r.LossSpans = lossSpans(t.LossMask)
			if ins.tok != nil {
				r.segs = ins.decode(t.InputIDs, t.LossMask)
				var b strings.Builder
				for _, s := range r.segs {
					if s.masked {
						b.WriteString("⟦" + s.text + "⟧")
					} else {
						b.WriteString(s.text)
					}
				}
				r.Decoded = b.String()
			}
		}
		out = append(out, r)
	}
	return out
}

// lossSpans are the [from, to) index ranges where mask is 1.
func lossSpans(mask record.LossMask) [][2]int {
	var out [][2]int
	start := -1
	for i, m := range mask {
		switch {
		case m != 0 && start < 0:
			start = i
		case m == 0 && start >= 0:
			out = append(out, [2]int{start, i})
			start = -1
		}
	}
	if start >= 0 {
		out = append(out, [2]int{start, len(mask)})
	}
	return out
}

// decode turns ids into runs of text that are trained on (mask 1) or not.
func (ins *inspector) decode(ids []int32, mask record.LossMask) []decodedSeg {
	var segs []decodedSeg
	buf := make([]int, 0, len(ids))
	cur := false
	flush := func() {
		if len(buf) > 0 {
			segs = append(segs, decodedSeg{text: strings.ToValidUTF8(ins.tok.Decode(buf), "\uFFFD"), masked: cur})
			buf = buf[:0]
		}
	}
	for i, id := range ids {
		m := i < len(mask) && mask[i] != 0
		if m != cur {
			flush()
			cur = m
		}
		buf = append(buf, int(id))
	}
	flush()
	return segs
}
