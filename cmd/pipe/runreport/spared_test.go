package runreport

import (
	"testing"

	"github.com/pipe-dev/pipe/pipeline/rundir"

	_ "github.com/pipe-dev/pipe/stages"
)

// Stages before generation are those whose accepted records reach a
// generating stage: not generate itself, not what reads its output, not
// what reads only another stage's rejects.
func TestBeforeGeneration(t *testing.T) {
	stages := []rundir.RecordedStage{
		{ID: "prompts", Kind: "read-prompts"},
		{ID: "unique", Kind: "dedupe-near-duplicates", Inputs: []string{"prompts"}},
		{ID: "clean", Kind: "decontaminate", Inputs: []string{"unique.out"}},
		{ID: "todo", Kind: "dedupe-against-progress", Inputs: []string{"clean"}},
		{ID: "gen", Kind: "generate", Inputs: []string{"todo"}},
		{ID: "check", Kind: "validate-thinking", Inputs: []string{"gen"}},
		{ID: "side", Kind: "filter", Inputs: []string{"unique.rejected"}},
		{ID: "rejects", Kind: "write-jsonl", Inputs: []string{"unique.rejected", "clean.rejected", "check.rejected"}},
	}
	got := BeforeGeneration(stages)
	for id, want := range map[string]bool{"prompts": true, "unique": true, "clean": true, "todo": true,
		"gen": false, "check": false, "side": false, "rejects": false} {
		if got[id] != want {
			t.Errorf("%s: before generation %v, want %v", id, got[id], want)
		}
	}
	sp := NewSpared([]Reason{{"check", "empty_answer", 9}, {"clean", "contaminated", 2}, {"unique", "near_duplicate", 30}}, got, 1000, 500)
	if sp == nil || sp.Prompts != 32 || sp.Decode != 16000 || len(sp.Reasons) != 2 || sp.Reasons[0].Reason != "near_duplicate" {
		t.Fatalf("%+v", sp)
	}
	const want = "spared: 32 prompts rejected before generation (unique near_duplicate 30, clean contaminated 2; 3.2% of 1000): at the measured mean of 500 output tokens a completion, about 16000 tokens not decoded"
	if sp.Text() != want {
		t.Errorf("%s\nwant\n%s", sp.Text(), want)
	}
	if NewSpared([]Reason{{"check", "empty_answer", 9}}, got, 1000, 500) != nil {
		t.Error("rejections after generation spared nothing")
	}
}
