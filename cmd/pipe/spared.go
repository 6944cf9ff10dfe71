package main

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/pipe-dev/pipe/pipeline"
	"github.com/pipe-dev/pipe/pipeline/engine"
)

// spared is what the stages before generation rejected: prompts that
// never cost a completion (near duplicates, benchmark prompts, a user's
// filter), and the decode they would have cost at the measured mean.
type spared struct {
	Prompts  int64            // rejected before generation
	Read     int64            // reached the first of those stages
	Reasons  map[string]int64 // by reason
	MeanOut  float64          // the fleet's mean output tokens a completion (0: none measured)
	Decoding int64            // Prompts × MeanOut
}

// sparedOf is s's spared prompts, or nil when no stage before an
// expensive one rejected any.
func sparedOf(plan *pipeline.Plan, s *engine.Summary) *spared {
	sp := &spared{Reasons: map[string]int64{}}
	for _, st := range s.Stages {
		ps := plan.Lookup(st.ID)
		if st.Fleet != nil && st.Fleet.Lengths != nil {
			sp.MeanOut = st.Fleet.Lengths.Mean
		}
		if ps == nil || ps.Spec.Expensive || ps.Spec.Source || !feedsExpensive(ps, map[*pipeline.PlanStage]bool{}) {
			continue
		}
		sp.Read = max(sp.Read, st.In)
		sp.Prompts += st.Rejected
		for r, n := range st.Reasons {
			sp.Reasons[r] += n
		}
	}
	if sp.Prompts == 0 {
		return nil
	}
	sp.Decoding = int64(float64(sp.Prompts) * sp.MeanOut)
	return sp
}

// feedsExpensive reports whether ps's accepted records reach an expensive
// stage (generate): what it rejects is then never generated.
func feedsExpensive(ps *pipeline.PlanStage, seen map[*pipeline.PlanStage]bool) bool {
	if seen[ps] {
		return false
	}
	seen[ps] = true
	for port, edges := range ps.Outputs {
		if port == pipeline.RejectedPort {
			continue
		}
		for _, e := range edges {
			if e.To.Spec.Expensive || feedsExpensive(e.To, seen) {
				return true
			}
		}
	}
	return false
}

func (sp *spared) String() string {
	reasons := slices.SortedFunc(maps.Keys(sp.Reasons), func(a, b string) int { return int(sp.Reasons[b] - sp.Reasons[a]) })
	parts := make([]string, len(reasons))
	for i, r := range reasons {
		parts[i] = fmt.Sprintf("%s %d", r, sp.Reasons[r])
	}
	s := fmt.Sprintf("%d prompts rejected before generation (%s; %.1f%% of %d)", sp.Prompts, strings.Join(parts, ", "), 100*float64(sp.Prompts)/float64(max(sp.Read, 1)), sp.Read)
	if sp.MeanOut > 0 {
		s += fmt.Sprintf(": at the measured mean of %.0f output tokens a completion, about %s tokens not decoded", sp.MeanOut, count(sp.Decoding))
	}
	return s
}
