package stages

import (
	"github.com/pipe-dev/pipe/pipeline"
	"github.com/pipe-dev/pipe/pipeline/record"
)

// watchEarly runs the checks on completion c of generate's run and halts
// the run when one of them is certain.
func (g *generate) watchEarly(c *record.Completion) {
	w := &g.early
	w.mu.Lock()
	done := w.halted || (w.seen >= earlyLength && w.thinking < 0 && allOver(w.ids))
	w.mu.Unlock()
	if done || g.env == nil || g.env.Halt == nil {
		return
	}
	v := earlyVerdict{server: c.Server, thinkingOn: g.cfg.EnableThinking}
	if g.tok != nil && len(c.OutputIDs) > 0 {
		w.mu.Lock()
		check := w.ids[c.Server] >= 0
		w.mu.Unlock()
		if check {
			v.idsChecked, v.tokenizer, v.stage = true, g.cfg.Tokenizer, g.id
			v.decoded = g.tok.Decode(c.OutputIDs)
			v.misspelled = idsMisspell(v.decoded, c)
		}
	}
	if err := w.add(v, c, g.cfg.MaxOutputTokens); err != nil {
		g.env.Halt(pipeline.Permanent(err))
	}
}
