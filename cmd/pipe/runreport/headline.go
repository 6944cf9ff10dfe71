package runreport

import (
	"fmt"

	"github.com/pipe-dev/pipe/internal/numfmt"
)

// Headline is what the report says first, each share named by what it is
// a share of: the training rows each output made of the prompts (an empty
// one named: "train: 0 rows"), the rejects of the prompts and the top
// reasons of the rejects.
func (r *Report) Headline() []HeadLine {
	var out []HeadLine
	prompts := r.Finished
	for _, o := range r.Outputs {
		if o.RejectsOnly {
			continue
		}
		rows := o.Rows - o.RejectedRows
		h := HeadLine{Text: fmt.Sprintf("%s: %s", o.Stage, numfmt.Plural(rows, "row")), Empty: rows == 0}
		switch {
		case rows == 0 && prompts > 0:
			h.Text += fmt.Sprintf(" — no training data from %s", numfmt.Plural(prompts, "prompt"))
		case rows == 0:
			h.Text += " — no training data"
		case prompts > 0:
			h.Text += fmt.Sprintf(" = %s of %s", pct(Share(rows, prompts)), numfmt.Plural(prompts, "prompt"))
		}
		out = append(out, h)
	}
	if r.RejectedAll > 0 {
		text := fmt.Sprintf("rejected: %d", r.RejectedAll)
		if prompts > 0 {
			text += fmt.Sprintf(" = %s of %s", pct(Share(r.RejectedAll, prompts)), numfmt.Plural(prompts, "prompt"))
		}
		for i, x := range r.Rejected {
			if i == 3 {
				break
			}
			sep := ", "
			if i == 0 {
				sep = "; by reason: "
			}
			text += fmt.Sprintf("%s%s %s %d = %s of rejects", sep, x.Stage, x.Reason, x.Count, pct(Share(x.Count, r.RejectedAll)))
		}
		out = append(out, HeadLine{Text: text})
	}
	if s := r.Spared; s != nil {
		out = append(out, HeadLine{Text: s.Text()})
	}
	if s := r.SecondChances; s != nil {
		out = append(out, HeadLine{Text: s.Text()})
	}
	if e := r.Economy; e != nil && e.Decoded > 0 {
		out = append(out, HeadLine{Text: fmt.Sprintf("%s (%d decoded, %d trained)", e.Ratio(), e.Decoded, e.Trained), Empty: e.Trained == 0})
	}
	if r.FailedAll > 0 {
		out = append(out, HeadLine{Text: fmt.Sprintf("failed: %d = %s of %s (kept in failed/; the next run retries them)",
			r.FailedAll, pct(Share(r.FailedAll, prompts)), numfmt.Plural(prompts, "prompt")), Empty: true})
	}
	return out
}

// HeadLine is one sentence of the headline; Empty marks one that says
// something is missing or wrong.
type HeadLine struct {
	Text  string
	Empty bool
}
