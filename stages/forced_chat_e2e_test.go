//go:build e2e

package stages

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
)

// A forced-thinking run on the chat API (the template's generation prompt
// opens <think>, as Qwen3.5/3.6's does) against servers whose answers are
// sometimes empty: every empty answer is named empty_answer, never
// think_unclosed, whether validate-thinking judges </think> from the
// output ids the chat API returns (with a tokenizer) or cannot tell
// (without one). Our users' worst dataset was 87% empty answers; the
// report must say so in those words.
func TestForcedChatEmptyAnswersAreEmptyAnswer(t *testing.T) {
	model := forcedQwen3Dir(t)
	var prompts strings.Builder
	for i := range 40 {
		fmt.Fprintf(&prompts, "{\"id\": \"p%02d\", \"prompt\": \"Question %d: why is the sky blue at noon and red at dusk?\"}\n", i, i)
	}
	for _, judge := range []struct{ name, tokenizer string }{
		{"ids judged", fmt.Sprintf("tokenizer = %q", model)},
		{"no ids judged", ""},
	} {
		t.Run(judge.name, func(t *testing.T) {
			src := fmt.Sprintf(`
[pipeline]
name = "forced-chat"
run_dir = "run"

[[stage]]
id   = "prompts"
kind = "read-prompts"
path = "p.jsonl"

[[stage]]
id                = "gen"
kind              = "generate"
input             = "prompts"
servers           = ["sim:1?speed=5000&forced_thinking=true&think_mean=80&answer_mean=40&faults=empty-answer:0.3"]
api               = "chat"
tokenizer         = %q
max_output_tokens = 4096

[[stage]]
id    = "check"
kind  = "validate-thinking"
input = "gen"
%s

[[stage]]
id    = "good"
kind  = "write-jsonl"
input = "check.accepted"
path  = "good.jsonl"

[[stage]]
id    = "bad"
kind  = "write-jsonl"
input = "check.rejected"
path  = "bad.jsonl"
`, model, judge.tokenizer)
			dir, sum, err := runTestPipeline(t, src, map[string]string{"p.jsonl": prompts.String()})
			if err != nil {
				t.Fatal(err)
			}
			bad := readRecords(t, filepath.Join(dir, "bad.jsonl"))
			good := readRecords(t, filepath.Join(dir, "good.jsonl"))
			if len(bad) == 0 || len(good) == 0 || len(bad)+len(good) != 40 {
				t.Fatalf("%d accepted and %d rejected of 40; want both sides", len(good), len(bad))
			}
			for _, rec := range bad {
				c := rec.Completion
				if !c.Request["thinking_forced"].(bool) {
					t.Fatalf("%s: the completion does not record thinking_forced: %v", rec.ID, c.Request)
				}
				if strings.TrimSpace(c.Answer) != "" || c.FinishReason != "stop" || strings.TrimSpace(c.Reasoning) == "" {
					t.Fatalf("%s rejected (%s: %s) but it is not an empty answer after reasoning: finish %s, answer %q", rec.ID, rec.Reject.Reason, rec.Reject.Detail, c.FinishReason, c.Answer)
				}
				if rec.Reject.Reason != ReasonEmptyAnswer {
					t.Fatalf("%s: an empty answer after complete reasoning rejected as %s (%s)", rec.ID, rec.Reject.Reason, rec.Reject.Detail)
				}
				if judge.tokenizer != "" && len(c.OutputIDs) == 0 {
					t.Fatalf("%s: no output ids on the chat API: the server was not asked for them", rec.ID)
				}
				// Judged, the detail says no more; not judged (the ids are
				// there, no tokenizer finds </think> in them), it says what
				// could not be told.
				cannot := strings.Contains(rec.Reject.Detail, "without a tokenizer to find </think>'s id in the output ids pipe cannot tell whether the model wrote </think>")
				if cannot != (judge.tokenizer == "") {
					t.Fatalf("%s (%s): detail %q", rec.ID, judge.name, rec.Reject.Detail)
				}
			}
			for _, rec := range good {
				if strings.TrimSpace(rec.Completion.Answer) == "" {
					t.Fatalf("%s accepted with an empty answer", rec.ID)
				}
			}
			for _, st := range sum.Stages {
				if st.ID == "check" && st.Reasons[ReasonEmptyAnswer] != int64(len(bad)) {
					t.Fatalf("the summary counts %v, want %d empty_answer", st.Reasons, len(bad))
				}
			}
		})
	}
}
