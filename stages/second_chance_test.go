package stages

import (
	"context"
	"encoding/json"
	"slices"
	"testing"

	"github.com/pipe-dev/pipe/pipeline/figure"
	"github.com/pipe-dev/pipe/pipeline/record"
	"github.com/pipe-dev/pipe/pipeline/record/recordline"
)

// A record validate-thinking rejects for a reason in second_chance leaves
// by the retry port with its completion dropped and its attempt counted;
// other reasons are rejected as before; a later judge counts what the
// extra attempt recovered, also for a record read back from JSON.
func TestSecondChanceRoutesAndCounts(t *testing.T) {
	cfg := decodeTestConfig(t, "validate-thinking", `thinking = "on"
second_chance = ["empty_answer"]`).(*validateThinkingConfig)
	v := newValidateThinking(cfg)
	e := newThinkTestEmitter()
	empty := &record.Record{ID: "a", Meta: map[string]any{"source": "x"},
		Completion: &record.Completion{Reasoning: "Some reasoning here.", Answer: "", FinishReason: "stop", CompletionTokens: 40}}
	unclosed := &record.Record{ID: "b", Completion: &record.Completion{Reasoning: "", Answer: "<think>never closed", FinishReason: "stop"}}
	for _, rec := range []*record.Record{empty, unclosed} {
		if err := v.Process(context.Background(), rec, e); err != nil {
			t.Fatal(err)
		}
	}
	retried := e.emitted[RetryPort]
	if len(retried) != 1 || retried[0].ID != "a" || len(e.rejected) != 1 || e.rejected[0].ID != "b" {
		t.Fatalf("retry %v, rejected %v: want a on retry, b rejected", retried, e.rejected)
	}
	r := retried[0]
	if r.Completion != nil || r.Reject != nil || r.Meta[recordline.MetaAttempt] != 2 || !slices.Equal(r.Meta[recordline.MetaRetriedAfter].([]string), []string{"empty_answer"}) || r.Meta["source"] != "x" {
		t.Fatalf("retried record: completion %v, reject %v, meta %v", r.Completion, r.Reject, r.Meta)
	}

	if r.Meta[recordline.MetaRetriedTokens] != 40 {
		t.Fatalf("meta.retried_tokens %v, want the dropped completion's 40", r.Meta[recordline.MetaRetriedTokens])
	}

	// The same record, read back from a JSON line after its second attempt
	// (a replay), is accepted by the next judge as attempt 2.
	b, _ := json.Marshal(r)
	var back record.Record
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	back.Completion = &record.Completion{Reasoning: "Better reasoning.", Answer: "An answer.", FinishReason: "stop"}
	v2 := newValidateThinking(decodeTestConfig(t, "validate-thinking", `thinking = "on"`).(*validateThinkingConfig))
	e2 := newThinkTestEmitter()
	if err := v2.Process(context.Background(), &back, e2); err != nil {
		t.Fatal(err)
	}
	if len(e2.emitted["accepted"]) != 1 {
		t.Fatalf("attempt 2 not accepted: %v %v", e2.emitted, e2.rejected)
	}
	if f, ok := figure.Find(v.Report(), "second_chances", "reason", "empty_answer"); !ok || f.Value != 1 {
		t.Fatalf("second_chances: %v", v.Report())
	}
	if f, ok := figure.Find(v2.Report(), "recovered", "attempt", "2"); !ok || f.Value != 1 {
		t.Fatalf("recovered: %v", v2.Report())
	}
}

// second_chance names reasons the stage gives: validate-thinking's codes,
// filter's rules' reasons; another, or one twice, is a problem.
func TestSecondChanceReasonsChecked(t *testing.T) {
	rules := filterRules{{RejectIf: `id == "x"`, Reason: "x_id"}}
	vt := func(reasons ...string) []error {
		return (&validateThinkingConfig{ThinkStart: "<think>", ThinkEnd: "</think>", SecondChance: reasons}).Validate()
	}
	for _, tc := range []struct {
		name string
		errs []error
		bad  bool
	}{
		{"validate-thinking codes", vt("empty_answer", "repetition"), false},
		{"validate-thinking misspelled", vt("empty_anwser"), true},
		{"validate-thinking twice", vt("empty_answer", "empty_answer"), true},
		{"filter rule reason", (&filterConfig{Rules: rules, SecondChance: []string{"x_id"}}).Validate(), false},
		{"filter other reason", (&filterConfig{Rules: rules, SecondChance: []string{"empty_answer"}}).Validate(), true},
	} {
		if (len(tc.errs) > 0) != tc.bad {
			t.Errorf("%s: problems %v, want bad=%v", tc.name, tc.errs, tc.bad)
		}
	}
}
