package main

import (
	"strings"
	"testing"

	"github.com/pipe-dev/pipe/stages"
)

// Under a declared trainer a row cut at the length limit is kept as the
// trainer cuts it: the plan gives no larger max_output_tokens, which would
// not change a row; without one, the cut rows are rejected and it does.
func TestPlanAdviceUnderATrainer(t *testing.T) {
	l := &stages.LengthView{P99: 4096}
	with := &Projection{MaxOutputTokens: 4096, CutShare: 0.10, trainerMax: 4096}
	with.recommend(l)
	if with.Recommended != 0 || !strings.Contains(with.Why, "would not change the rows") {
		t.Errorf("with [trainer]: recommended %d, %q", with.Recommended, with.Why)
	}
	without := &Projection{MaxOutputTokens: 4096, CutShare: 0.10}
	without.recommend(l)
	if without.Recommended != 8192 {
		t.Errorf("without [trainer]: recommended %d, want 8192 (%q)", without.Recommended, without.Why)
	}
}
