package stages

import (
	"fmt"
	"github.com/pipe-dev/pipe/internal/termsafe"
	"strings"
	"sync"

	"github.com/pipe-dev/pipe/pipeline/record"
)

// Mistakes that are certain after a run's first completions, stopped
// before they cost its GPU time. The data-quality stop ([pipeline]
// max_rejected) judges a window of 2,000 records, each a full generation;
// these need far fewer, and each has one cause to name:
//
//   - a server whose first earlyIDs completions all have output ids that
//     do not spell their text: the tokenizer is not the server's;
//   - the first earlyThinking completions with thinking on all without
//     reasoning: the server or template ignores enable_thinking;
//   - more than earlyLengthShare of the first earlyLength completions cut
//     at max_output_tokens and rejected for it by validate-thinking (a
//     row it keeps because it fills the [trainer]'s max_length is no
//     mismatch).
//
// generate watches the ids (with a tokenizer) and the thinking;
// validate-thinking the ids (on any API) and the cuts.
//
// The run then stops the way max_rejected stops it (intake ends, what is
// in flight finishes, everything is committed, the completions stay in the
// journal for the next run) and exits 2, naming what it saw and what to
// fix.
const (
	earlyIDs         = 20
	earlyThinking    = 50
	earlyLength      = 100
	earlyLengthShare = 0.8
)

// earlyWatch holds the counts of the checks above. Safe for concurrent use.
type earlyWatch struct {
	mu     sync.Mutex
	halted bool
	// ids: per server, completions whose ids did not spell their text,
	// all of its first ones; -1 once one did (the check is over).
	ids map[string]int
	// thinking: completions with thinking on, none with reasoning so far
	// (-1 once one had some).
	thinking int
	// seen and cut: the first completions, and those of them cut at
	// max_output_tokens.
	seen, cut int
}

// earlyVerdict is what one completion tells the checks.
type earlyVerdict struct {
	server string
	// misspelled is the part of the text the output ids do not hold
	// ("answer", "thinking"), decoded what they decode to; "" when they
	// spell it or were not checked.
	misspelled, decoded string
	idsChecked          bool
	// tokenizer is the directory of the tokenizer the ids were decoded
	// with, and the stage that has it.
	tokenizer, stage string
	thinkingOn       bool
	cutRejected      bool // cut at max_output_tokens, and no [trainer] keeps it
}

func allOver(ids map[string]int) bool {
	for _, n := range ids {
		if n >= 0 {
			return false
		}
	}
	return len(ids) > 0
}

// add counts one completion and returns the error that stops the run when
// a check is certain (once).
func (w *earlyWatch) add(v earlyVerdict, c *record.Completion, maxOutput int) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.halted {
		return nil
	}
	if w.ids == nil {
		w.ids = map[string]int{}
	}
	err := w.addIDs(v, c)
	if err == nil {
		err = w.addThinking(v, c)
	}
	// The first completions are counted for the length check even after
	// another check failed.
	if lengthErr := w.addLength(v, maxOutput); err == nil {
		err = lengthErr
	}
	if err != nil {
		w.halted = true
	}
	return err
}

// addIDs counts the completion for its server's ids check: the first
// completion whose ids spell its text settles it, earlyIDs that do not in
// a row fail it.
func (w *earlyWatch) addIDs(v earlyVerdict, c *record.Completion) error {
	if !v.idsChecked || w.ids[v.server] < 0 {
		return nil
	}
	if v.misspelled == "" {
		w.ids[v.server] = -1
		return nil
	}
	if w.ids[v.server]++; w.ids[v.server] < earlyIDs {
		return nil
	}
	return fmt.Errorf("server %s: the output ids of its first %d completions do not spell their text: the tokenizer is not the server's "+
		"(the last one's %s is %q; its ids decode to %q with %s). Set the %s stage's tokenizer to the model directory the server serves "+
		"(or start pipe sim with --tokenizer); the completions made so far are kept in the journal",
		v.server, earlyIDs, v.misspelled, termsafe.Cut(partText(c, v.misspelled), 80), termsafe.Cut(v.decoded, 80), v.tokenizer, v.stage)
}

// addThinking counts the completion for the thinking check: the first
// with reasoning settles it, earlyThinking without fail it.
func (w *earlyWatch) addThinking(v earlyVerdict, c *record.Completion) error {
	if !v.thinkingOn || w.thinking < 0 {
		return nil
	}
	// Thinking left in the answer (a server without a reasoning
	// parser on a template that opens the reasoning itself) is
	// thinking: validate-thinking says what is wrong with it.
	if strings.TrimSpace(c.Reasoning) != "" || strings.Contains(c.Answer, "</think>") {
		w.thinking = -1
		return nil
	}
	if w.thinking++; w.thinking < earlyThinking {
		return nil
	}
	return fmt.Errorf("thinking is not happening: none of the first %d completions with enable_thinking = true has any reasoning (the last from %s). "+
		"The server ignores enable_thinking, or its chat template has no thinking; check the model and its template, "+
		"or set enable_thinking = false if answers without thinking are what you want", earlyThinking, v.server)
}

// addLength counts the first earlyLength completions, and those of them
// cut at max_output_tokens and rejected for it: more than
// earlyLengthShare of them fail the check.
func (w *earlyWatch) addLength(v earlyVerdict, maxOutput int) error {
	if w.seen >= earlyLength {
		return nil
	}
	w.seen++
	if v.cutRejected {
		w.cut++
	}
	if w.seen == earlyLength && float64(w.cut) > earlyLengthShare*earlyLength {
		return fmt.Errorf("%d of the first %d completions were cut at the length limit (max_output_tokens = %d) and rejected for it: "+
			"the model writes more than that. Raise max_output_tokens, or declare the trainer ([trainer] max_length) so that rows cut at its length are kept",
			w.cut, earlyLength, maxOutput)
	}
	return nil
}

// partText is the completion's text of the part named.
func partText(c *record.Completion, part string) string {
	if part == "thinking" {
		return c.Reasoning
	}
	return c.Answer
}
