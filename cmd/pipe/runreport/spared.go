package runreport

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/pipe-dev/pipe/internal/numfmt"
	"github.com/pipe-dev/pipe/pipeline"
	"github.com/pipe-dev/pipe/pipeline/rundir"
)

// Spared is what the stages before generation rejected: prompts that never
// cost a completion (near duplicates, benchmark prompts, a user's filter),
// and the decode they would have cost at the run's mean output length.
type Spared struct {
	Prompts int64    `json:"prompts"`
	Of      int64    `json:"of_prompts,omitempty"` // the prompts those stages took
	Reasons []Reason `json:"by_reason"`
	// MeanOutput is the output tokens of a completion, measured (0: none
	// was); Decode is Prompts × MeanOutput.
	MeanOutput float64 `json:"mean_output_tokens,omitempty"`
	Decode     int64   `json:"decode_tokens_spared,omitempty"`
}

// Text is the summary's and the report's line.
func (s *Spared) Text() string {
	parts := make([]string, len(s.Reasons))
	for i, r := range s.Reasons {
		parts[i] = fmt.Sprintf("%s %s %d", r.Stage, r.Reason, r.Count)
	}
	t := fmt.Sprintf("spared: %s rejected before generation (%s", numfmt.Plural(s.Prompts, "prompt"), strings.Join(parts, ", "))
	if s.Of > 0 {
		t += fmt.Sprintf("; %s of %d", pct(Share(s.Prompts, s.Of)), s.Of)
	}
	t += ")"
	if s.MeanOutput > 0 {
		t += fmt.Sprintf(": at the measured mean of %.0f output tokens a completion, about %s tokens not decoded", s.MeanOutput, numfmt.Count(float64(s.Decode)))
	}
	return t
}

// NewSpared is the spared prompts of reasons (by stage and reason, in any
// order), counting the stages in before; nil when they rejected none.
func NewSpared(reasons []Reason, before map[string]bool, of int64, meanOutput float64) *Spared {
	s := &Spared{Of: of, MeanOutput: meanOutput}
	for _, r := range reasons {
		if before[r.Stage] {
			s.Prompts += r.Count
			s.Reasons = append(s.Reasons, r)
		}
	}
	if s.Prompts == 0 {
		return nil
	}
	slices.SortFunc(s.Reasons, func(a, b Reason) int {
		return cmp.Or(cmp.Compare(b.Count, a.Count), cmp.Compare(a.Stage+" "+a.Reason, b.Stage+" "+b.Reason))
	})
	s.Decode = int64(float64(s.Prompts) * meanOutput)
	return s
}

// BeforeGeneration is the stages whose accepted records reach a stage
// that generates at a cost (Spec.Expensive), which is not one of them:
// what they reject is never generated.
func BeforeGeneration(stages []rundir.RecordedStage) map[string]bool {
	readers := map[string][]string{} // stage → the stages reading its accepted ports
	expensive := map[string]bool{}
	for _, s := range stages {
		expensive[s.ID] = generates(s.Kind)
		for _, in := range s.Inputs {
			from, port, _ := strings.Cut(in, ".")
			if port != pipeline.RejectedPort {
				readers[from] = append(readers[from], s.ID)
			}
		}
	}
	before := map[string]bool{}
	var reaches func(id string, seen map[string]bool) bool
	reaches = func(id string, seen map[string]bool) bool {
		if seen[id] {
			return false
		}
		seen[id] = true
		for _, r := range readers[id] {
			if expensive[r] || reaches(r, seen) {
				return true
			}
		}
		return false
	}
	for _, s := range stages {
		if !expensive[s.ID] && reaches(s.ID, map[string]bool{}) {
			before[s.ID] = true
		}
	}
	return before
}
