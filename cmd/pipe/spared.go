package main

import (
	"github.com/pipe-dev/pipe/cmd/pipe/runreport"
	"github.com/pipe-dev/pipe/pipeline"
	"github.com/pipe-dev/pipe/pipeline/engine"
	"github.com/pipe-dev/pipe/pipeline/rundir"
)

// sparedOf is what this start's stages before generation rejected, and
// the decode it spared at the fleet's measured mean; nil when they
// rejected none.
func sparedOf(plan *pipeline.Plan, s *engine.Summary) *runreport.Spared {
	var mean float64
	var reasons []runreport.Reason
	var of int64
	before := runreport.BeforeGeneration(recordedStages(plan))
	for _, st := range s.Stages {
		if st.Fleet != nil && st.Fleet.Lengths != nil {
			mean = st.Fleet.Lengths.Mean
		}
		if !before[st.ID] {
			continue
		}
		of = max(of, st.In)
		for r, n := range st.Reasons {
			reasons = append(reasons, runreport.Reason{Stage: st.ID, Reason: r, Count: n})
		}
	}
	return runreport.NewSpared(reasons, before, of, mean)
}

// recordedStages is the plan's graph as run.json records it.
func recordedStages(plan *pipeline.Plan) []rundir.RecordedStage {
	out := make([]rundir.RecordedStage, 0, len(plan.Stages))
	for _, ps := range plan.Stages {
		s := rundir.RecordedStage{ID: ps.ID(), Kind: ps.Spec.Kind}
		for _, in := range ps.Inputs {
			s.Inputs = append(s.Inputs, in.From.ID()+"."+in.Port)
		}
		out = append(out, s)
	}
	return out
}
