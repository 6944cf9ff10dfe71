package stages

import (
	"context"
	"strings"
	"testing"

	"github.com/pipe-dev/pipe/pipeline/engine"
)

// concurrency = "auto" on simulated servers that run 32 requests at once:
// every record comes out once, and each server's limit ends at its
// capacity (32, plus the small headroom), from the start of 16, within the
// ceiling max_concurrency.
func TestGenerateAdaptiveConcurrency(t *testing.T) {
	const n = 1500
	keys := `servers = ["sim:2?speed=400&max_running=32&think_mean=60&answer_mean=20"]` + "\n" + fastGenKeys + readyKey +
		"concurrency = \"auto\"\nmax_concurrency = 128\n"
	dir, sum, err := runGenPipeline(t, context.Background(), genPipeline(keys), genPrompts(n), engine.Options{})
	if err != nil {
		t.Fatal(err)
	}
	mustAllOut(t, dir, sum, n)
	figs := stageSummary(t, sum, "gen").Figures
	servers := 0
	for _, f := range figs {
		if f.Name != "concurrency" || len(f.Labels) == 0 {
			continue
		}
		servers++
		if f.Value < 32 || f.Value > 34 {
			t.Errorf("server %v: concurrency %v at the end, want 32…34", f.Labels, f.Value)
		}
	}
	if servers != 2 {
		t.Errorf("%d servers' concurrency figures, want 2", servers)
	}
	if problems := genProblems(t, `servers = ["http://a:1"]`+"\nmax_output_tokens = 10\nconcurrency = \"lots\""); !strings.Contains(problems, `must be 1..4096 or "auto", got "lots"`) {
		t.Errorf("a bad concurrency: %s", problems)
	}
}
