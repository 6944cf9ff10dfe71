package pipeline

import (
	"context"
	"fmt"
)

// InputChecker is implemented by sources that can judge their whole input
// without running (read-prompts, read-completions on JSONL): pipe check
// --data and pipe run --dry-run print what it found. The judgement is the
// one the source's reader makes, line for line. Open has not been called;
// env carries StageID and DuplicatesHandled.
type InputChecker interface {
	CheckInput(ctx context.Context, env *Env) (*InputReport, error)
}

// InputReport is what judging one input found.
type InputReport struct {
	Path string
	// Lines is the non-blank lines judged; Records of them go on unrejected.
	Lines, Records int64
	// Problems by reason code, in order of first appearance.
	Problems []*InputProblem
}

// InputProblem counts one kind of problem of an input.
type InputProblem struct {
	// Reason is the reason code the run gives it: bad_line, empty_prompt,
	// duplicate_id, or empty_input (a file with no record at all).
	Reason string
	Count  int64
	// Fatal problems stop the run (bad_line under on_bad_line = "fail", an
	// empty input without allow_empty); the others are rejected and counted.
	Fatal bool
	// Examples are the first few, "FILE:LINE: what is wrong".
	Examples []string
}

// maxInputExamples is how many examples an InputProblem keeps.
const maxInputExamples = 3

// Add counts one problem.
func (r *InputReport) Add(reason string, fatal bool, example string) {
	var p *InputProblem
	for _, q := range r.Problems {
		if q.Reason == reason {
			p = q
		}
	}
	if p == nil {
		p = &InputProblem{Reason: reason, Fatal: fatal}
		r.Problems = append(r.Problems, p)
	}
	p.Count++
	if len(p.Examples) < maxInputExamples {
		p.Examples = append(p.Examples, example)
	}
}

// Fatal is the first problem that would stop a run, or nil.
func (r *InputReport) Fatal() *InputProblem {
	for _, p := range r.Problems {
		if p.Fatal {
			return p
		}
	}
	return nil
}

// DuplicatesHandled reports whether the only stage reading ps's first output
// drops finished and repeated ids itself (Spec.DropsFinished:
// dedupe-against-progress). A source then leaves repeated ids to it;
// otherwise a source that can tell rejects them as duplicate_id.
func DuplicatesHandled(ps *PlanStage) bool {
	if len(ps.Spec.Outputs) == 0 {
		return false
	}
	edges := ps.Outputs[ps.Spec.Outputs[0]]
	return len(edges) == 1 && edges[0].To.Spec.DropsFinished && len(edges[0].To.Inputs) == 1
}

// Text is the report in one line: "200000 lines, 199990 records go on;
// empty_prompt 7, duplicate_id 3".
func (r *InputReport) Text() string {
	s := fmt.Sprintf("%d lines, %d records go on", r.Lines, r.Records)
	for i, p := range r.Problems {
		sep := ", "
		if i == 0 {
			sep = "; "
		}
		s += fmt.Sprintf("%s%s %d", sep, p.Reason, p.Count)
	}
	return s
}
