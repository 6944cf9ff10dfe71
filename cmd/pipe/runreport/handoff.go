package runreport

import (
	"errors"
	"os"

	"github.com/pipe-dev/pipe/stages/trainrow"
)

// Handoff is a SpecForge data: block a finished run wrote beside an
// output of a trainer layout (trainrow.HandoffPath), as written: the
// block and its comments (the memory the pre-tokenized route holds).
type Handoff struct {
	Stage string `json:"stage"`
	Path  string `json:"path"`
	Text  string `json:"yaml"`
}

// readHandoffs reads the handoff file beside each output: the run's end
// wrote one beside each output of a trainer layout (output.TrainerFile);
// one not there (another layout, a run without [trainer], or not
// finished) is left out.
func (r *Report) readHandoffs(ws []writer) {
	for _, w := range ws {
		path := trainrow.HandoffPath(w.path)
		text, err := os.ReadFile(path)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			r.note("%v", err)
			continue
		}
		r.Handoffs = append(r.Handoffs, Handoff{Stage: w.id, Path: path, Text: string(text)})
	}
}
