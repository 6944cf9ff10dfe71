package main

import (
	"strings"
	"testing"

	"github.com/pipe-dev/pipe/pipeline/view"
)

// Under a declared trainer a row cut at the length limit is kept as the
// trainer cuts it: the plan gives no larger max_output_tokens, which would
// not change a row; without one, the cut rows are rejected and it does.
func TestPlanAdviceUnderATrainer(t *testing.T) {
	l := &view.Lengths{P99: 4096}
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

// A small plan's GPU-hours keep their digits (the JSON's 0.019 is not
// "0.0" on the terminal).
func TestPlanGPUHoursDigits(t *testing.T) {
	for x, want := range map[float64]string{0.019: "0.019", 0.5: "0.50", 12.34: "12.3", 0: "0.000"} {
		if got := gpuHours(x); got != want {
			t.Errorf("gpuHours(%g) = %q, want %q", x, got, want)
		}
	}
}
