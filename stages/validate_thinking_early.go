package stages

import (
	"github.com/pipe-dev/pipe/pipeline"
	"github.com/pipe-dev/pipe/pipeline/record"
)

// watchEarly runs the checks on completion c, which validate-thinking
// rejected for reason ("" for kept), and halts the run when one of them
// is certain.
func (v *validateThinking) watchEarly(c *record.Completion, reason string) {
	w := &v.early
	w.mu.Lock()
	done := w.halted || (w.seen >= earlyLength && allOver(w.ids))
	check := !w.halted && w.ids[c.Server] >= 0
	w.mu.Unlock()
	if done {
		return
	}
	e := earlyVerdict{server: c.Server, cutRejected: c.FinishReason == "length" && reason != ""}
	if check && v.tok != nil && len(c.OutputIDs) > 0 {
		e.idsChecked, e.tokenizer, e.stage = true, v.cfg.Tokenizer, v.id
		e.decoded = v.tok.Decode(c.OutputIDs)
		e.misspelled = idsMisspell(e.decoded, c)
	}
	bound := max(requestIntOr0(c.Request, "max_new_tokens"), requestIntOr0(c.Request, "max_tokens"))
	if err := w.add(e, c, bound); err != nil {
		v.halt(pipeline.Permanent(err))
	}
}
