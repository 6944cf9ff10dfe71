//go:build e2e

package stages

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pipe-dev/pipe/internal/testrig/ollamatest"
	"github.com/pipe-dev/pipe/pipeline/engine"
)

// TestGenerateAgainstOllama runs the same pipeline with api = "chat" against
// a real OpenAI-compatible server that is not ours (ollama, serving a tiny
// random-weight model with the real Qwen3 vocabulary): readiness without
// SGLang's endpoints, the model name taken from /v1/models, real usage
// counts and stops. The text is gibberish.
func TestGenerateAgainstOllama(t *testing.T) {
	url, model := ollamatest.Start(t)
	const n = 12
	keys := serversKey([]string{url}) + readyKey + `
backoff_min       = "5ms"
concurrency       = 4
max_output_tokens = 24
temperature       = 0.8
seed              = 42
system_prompt     = "You are terse."
`
	dir, sum, err := runGenPipeline(t, context.Background(), genPipeline(keys), genPrompts(n), engine.Options{})
	if err != nil {
		t.Fatal(err)
	}
	recs := readRecords(t, filepath.Join(dir, "out/completions.jsonl"))
	if len(recs) != n {
		t.Fatalf("%d of %d records completed; summary %+v", len(recs), n, stageSummary(t, sum, "gen"))
	}
	for _, r := range recs {
		c := r.Completion
		if c.Request["model"] != model && !strings.HasPrefix(c.Request["model"].(string), model) {
			t.Errorf("%s: model sent %v, want the server's %q", r.ID, c.Request["model"], model)
		}
		if c.PromptTokens < 10 || c.CompletionTokens < 1 || c.CompletionTokens > 24 {
			t.Errorf("%s: usage prompt %d completion %d (max 24)", r.ID, c.PromptTokens, c.CompletionTokens)
		}
		if c.FinishReason != "stop" && c.FinishReason != "length" {
			t.Errorf("%s: finish_reason %q", r.ID, c.FinishReason)
		}
		if c.FinishReason == "length" && c.CompletionTokens != 24 {
			t.Errorf("%s: stopped for length after %d tokens, max 24", r.ID, c.CompletionTokens)
		}
		if c.Reasoning+c.Answer == "" && c.CompletionTokens > 2 {
			t.Errorf("%s: %d tokens but no text", r.ID, c.CompletionTokens)
		}
		if c.Server != url || c.Attempts != 1 || c.SystemPrompt != "You are terse." {
			t.Errorf("%s: %+v", r.ID, c)
		}
	}
	g := stageSummary(t, sum, "gen")
	if g.In != n || g.Out != n {
		t.Errorf("gen %+v", g)
	}
	t.Logf("figures %v", g.Figures)
}
