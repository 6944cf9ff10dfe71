package stages

import (
	"context"
	"testing"

	"github.com/pipe-dev/pipe/pipeline/engine"
	"github.com/pipe-dev/pipe/pipeline/figure"
	"github.com/pipe-dev/pipe/pipeline/view"
)

// The generate stage's typed view (what the live display reads) says what
// its figures (what the summary and the metrics render) say: the fleet's
// completions and answers, each server ready, the token budget per prompt.
func TestGenerateViewAgreesWithFigures(t *testing.T) {
	f := startTestFleet(t, quickSim(2))
	const n = 40
	_, sum, err := runGenPipeline(t, context.Background(),
		genPipeline(serversKey(f.URLs())+fastGenKeys+readyKey+"concurrency = 4\n"), genPrompts(n), engine.Options{})
	if err != nil {
		t.Fatal(err)
	}
	st := stageSummary(t, sum, "gen")
	v := st.Fleet
	if v == nil {
		t.Fatal("gen gives no fleet view")
	}
	tokens, _ := figure.Find(st.Figures, "output_tokens")
	if v.Answers != n || v.Tokens == 0 || float64(v.Tokens) != tokens.Value || v.MaxOutputTokens <= 0 {
		t.Errorf("view %+v; output_tokens figure %v", v, tokens.Value)
	}
	if len(v.Servers) != 2 {
		t.Fatalf("%d servers in the view, want 2", len(v.Servers))
	}
	var done int64
	for _, s := range v.Servers {
		state, _ := figure.Find(st.Figures, "state", "server", s.Name)
		if s.State != view.ServerReady || state.Text != s.State {
			t.Errorf("server %s: view %q, figure %q", s.Name, s.State, state.Text)
		}
		done += s.Completions
	}
	if done != n {
		t.Errorf("servers' completions sum to %d, want %d", done, n)
	}
}
