package stages

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pipe-dev/pipe/internal/testrig/testenv"
	"github.com/pipe-dev/pipe/pipeline/record"
)

func rec(id, user, answer string) *record.Record {
	return &record.Record{ID: id, Messages: []record.Message{{Role: "system", Content: "be brief"}, {Role: "user", Content: user}},
		Completion: &record.Completion{Answer: answer, Reasoning: "thinking about it", FinishReason: "stop", CompletionTokens: 40}}
}

// A rule that is true rejects with its reason (the first true one wins);
// the others go to accepted. The rules see the prompt, the completion, the
// row and meta, and script() tells the answer's language from the prompt's.
func TestFilterRules(t *testing.T) {
	cfg := &filterConfig{Rules: filterRules{
		{RejectIf: `len(trim(completion.answer)) < 20`, Reason: "short_answer"},
		{RejectIf: `lower(completion.answer) matches "^as an ai"`, Reason: "as_an_ai"},
		{RejectIf: `script(completion.answer) != script(prompt.text)`, Reason: "other_language"},
		{RejectIf: `meta.source == "forum" && completion.completion_tokens > 100`, Reason: "long_forum"},
		{RejectIf: `row.present && row.loss_tokens < 3`, Reason: "few_loss"},
		{RejectIf: `prompt.system != "be brief" || prompt.turns != 2 || prompt.messages[1].role != "user"`, Reason: "bad_prompt"},
	}}
	if errs := cfg.Validate(); errs != nil {
		t.Fatal(errs)
	}
	p, _ := newFilter(cfg)
	f := p.(*filter)
	if err := f.Open(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	forum := rec("f", "Why is the sky blue?", "Because of Rayleigh scattering of sunlight.")
	forum.Meta = map[string]any{"source": "forum"}
	forum.Completion.CompletionTokens = 500
	row := rec("r", "Why is the sky blue?", "Because of Rayleigh scattering of sunlight.")
	row.Tokens = &record.Tokens{NumTokens: 50, NumLossTokens: 2}
	cases := []struct {
		rec    *record.Record
		reason string
	}{
		{rec("ok", "Why is the sky blue?", "Because air scatters blue light more than red."), ""},
		{rec("short", "Why is the sky blue?", "  Scattering.  "), "short_answer"},
		{rec("ai", "Why is the sky blue?", "As an AI language model, I think it is scattering."), "as_an_ai"},
		{rec("lang", "Why is the sky blue?", "因为瑞利散射使蓝光比红光散射得更多，所以天空是蓝色的。"), "other_language"},
		{rec("zh", "天空为什么是蓝色的？", "因为瑞利散射使蓝光比红光散射得更多，所以天空是蓝色的。"), ""},
		{forum, "long_forum"},
		{row, "few_loss"},
	}
	for _, c := range cases {
		em := newThinkTestEmitter()
		if err := f.Process(context.Background(), c.rec, em); err != nil {
			t.Fatalf("%s: %v", c.rec.ID, err)
		}
		switch {
		case c.reason == "" && len(em.emitted["accepted"]) != 1:
			t.Errorf("%s: not accepted (%v)", c.rec.ID, c.rec.Reject)
		case c.reason != "" && (len(em.rejected) != 1 || em.rejected[0].Reject.Reason != c.reason):
			t.Errorf("%s: %+v, want rejected as %s", c.rec.ID, c.rec.Reject, c.reason)
		case c.reason != "" && !strings.HasPrefix(em.rejected[0].Reject.Detail, "rule "):
			t.Errorf("%s: detail %q does not name the rule", c.rec.ID, em.rejected[0].Reject.Detail)
		}
	}
	if got := f.counts[0].Load() + f.counts[1].Load() + f.counts[2].Load() + f.counts[3].Load() + f.counts[4].Load(); got != 5 {
		t.Errorf("%d rejections counted, want 5", got)
	}
}

// pipe check's judgement of rules: each mistake names the rule and says
// what the record has.
func TestFilterRuleProblems(t *testing.T) {
	for _, c := range []struct {
		rule, want string
	}{
		{`len(completion.anwser) < 20`, `#1 (x): completion has no field anwser (did you mean "answer"?) (1:16)`},
		{`anwser == ""`, `unknown name anwser (did you mean "completion.answer"?)`},
		{`promt.text == ""`, `unknown name promt (did you mean "prompt"?)`},
		{`completion.answer`, `expected bool, but got string`},
		{`completion.answer + 1 > 2`, `mismatched types string and int`},
		{`prompt.messages[0].rol == "user"`, `a message has no field rol (did you mean "role"?)`},
		{`row.tokenz > 3`, `row has no field tokenz (did you mean "tokens"?)`},
		{`tokens(completion.answer) > 4000`, `tokens() needs tokenizer = MODEL_DIR`},
	} {
		errs := (&filterConfig{Rules: filterRules{{RejectIf: c.rule, Reason: "x"}}}).Validate()
		if len(errs) != 1 || !strings.Contains(errs[0].Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.rule, errs, c.want)
		}
	}
	for _, c := range []struct {
		raw  any
		want string
	}{
		{[]any{}, "at least one rule"},
		{"len(x)", "must be an array"},
		{[]any{map[string]any{"reject_if": "true"}}, `rule 1: reason "" must be a code`},
		{[]any{map[string]any{"reject_if": "true", "reason": "Short Answer"}}, `reason "Short Answer" must be a code`},
		{[]any{map[string]any{"reject_if": "true", "reason": "a", "why": "x"}}, `unknown key "why"`},
		{[]any{map[string]any{"reject_if": "true", "reason": "a"}, map[string]any{"reject_if": "false", "reason": "a"}}, `rule 2: reason "a" is rule 1's too`},
		{[]any{map[string]any{"reason": "a"}}, "reject_if is missing"},
	} {
		var r filterRules
		if err := r.DecodeConfig(c.raw); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v, want %q", c.raw, err, c.want)
		}
	}
}

// tokens() counts with the stage's tokenizer (the real Qwen3 one here).
func TestFilterTokens(t *testing.T) {
	dir := testenv.TinyQwen3Dir(t)
	cfg := &filterConfig{Tokenizer: dir, Rules: filterRules{{RejectIf: `tokens(completion.answer) > 5`, Reason: "long"}}}
	if errs := cfg.Validate(); errs != nil {
		t.Fatal(errs)
	}
	p, _ := newFilter(cfg)
	if err := p.(*filter).Open(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	for answer, want := range map[string]int{"Yes.": 1, "Because air scatters blue light more than red light.": 0} {
		em := newThinkTestEmitter()
		if err := p.Process(context.Background(), rec("a", "q", answer), em); err != nil {
			t.Fatal(err)
		}
		if got := len(em.emitted["accepted"]); got != want {
			t.Errorf("%q: accepted %d, want %d", answer, got, want)
		}
	}
}

func TestDominantScript(t *testing.T) {
	for s, want := range map[string]string{"Hello, world 123": "Latin", "你好，世界": "Han", "Привет, мир": "Cyrillic", "123 !?": "", "مرحبا": "Arabic", "Hi 你好你好": "Han"} {
		if got := dominantScript(s); got != want {
			t.Errorf("%q: %q, want %q", s, got, want)
		}
	}
}

// A filter in a run: the rules' rejects go to the rejected port with their
// reasons, the summary counts them, and the rest go on.
func TestFilterInAPipeline(t *testing.T) {
	var lines strings.Builder
	for i := range 30 {
		answer := "Because the air scatters blue light more than red light."
		if i%3 == 0 {
			answer = "Blue."
		}
		fmt.Fprintf(&lines, `{"id":"c%02d","messages":[{"role":"user","content":"Why is the sky blue?"}],"completion":{"reasoning":"think","answer":%q,"finish_reason":"stop"}}`+"\n", i, answer)
	}
	dir, sum, err := runTestPipeline(t, `
[pipeline]
name    = "filter"
run_dir = "run"

[[stage]]
id   = "in"
kind = "read-completions"
path = "c.jsonl"

[[stage]]
id    = "rules"
kind  = "filter"
input = "in"
rules = [{reject_if = 'len(completion.answer) < 20', reason = "short_answer"}]

[[stage]]
id    = "good"
kind  = "write-jsonl"
input = "rules.accepted"
path  = "good.jsonl"

[[stage]]
id    = "bad"
kind  = "write-jsonl"
input = "rules.rejected"
path  = "bad.jsonl"
`, map[string]string{"c.jsonl": lines.String()})
	if err != nil {
		t.Fatal(err)
	}
	good, bad := readRecords(t, filepath.Join(dir, "good.jsonl")), readRecords(t, filepath.Join(dir, "bad.jsonl"))
	if len(good) != 20 || len(bad) != 10 {
		t.Fatalf("%d accepted, %d rejected; want 20 and 10", len(good), len(bad))
	}
	for _, r := range bad {
		if r.Reject == nil || r.Reject.Reason != "short_answer" || r.Reject.Stage != "rules" {
			t.Fatalf("%s: %+v", r.ID, r.Reject)
		}
	}
	for _, st := range sum.Stages {
		if st.ID == "rules" && st.Reasons["short_answer"] != 10 {
			t.Fatalf("summary reasons %v", st.Reasons)
		}
	}
}

// BenchmarkFilter judges a record by three rules (a length, a regular
// expression, a script comparison): go test -bench Filter ./stages.
func BenchmarkFilter(b *testing.B) {
	cfg := &filterConfig{Rules: filterRules{
		{RejectIf: `len(trim(completion.answer)) < 20`, Reason: "short_answer"},
		{RejectIf: `lower(completion.answer) matches "^as an ai"`, Reason: "as_an_ai"},
		{RejectIf: `script(completion.answer) != script(prompt.text)`, Reason: "other_language"},
	}}
	p, _ := newFilter(cfg)
	if err := p.(*filter).Open(context.Background(), nil); err != nil {
		b.Fatal(err)
	}
	r := rec("a", "Why is the sky blue at noon and red at dusk?", strings.Repeat("Because the air scatters blue light more than red light. ", 20))
	em := newThinkTestEmitter()
	b.ReportAllocs()
	for b.Loop() {
		em.emitted["accepted"] = em.emitted["accepted"][:0]
		if err := p.Process(context.Background(), r, em); err != nil {
			b.Fatal(err)
		}
	}
}

// meta as a reader keeps it (the input line's JSON text) is seen by
// expressions as values: a string compares as a string, a number as a
// number; a map that leaves a field as it was keeps the input's spelling.
func TestExpressionsSeeInputMeta(t *testing.T) {
	line := []byte(`{"id":"a","source":"web","n":5.0,"messages":[{"role":"user","content":"hi"}]}`)
	read := func() *record.Record {
		r, _, prob := promptLine(line, "id", true, true)
		if prob != nil {
			t.Fatal(prob.Detail)
		}
		return r
	}
	p, _ := newFilter(&filterConfig{Rules: filterRules{{RejectIf: `meta.source == "web" && meta.n > 4`, Reason: "web"}}})
	f := p.(*filter)
	if err := f.Open(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	e := newThinkTestEmitter()
	if err := f.Process(context.Background(), read(), e); err != nil {
		t.Fatal(err)
	}
	if len(e.rejected) != 1 || e.rejected[0].Reject.Reason != "web" {
		t.Fatalf("emitted %v, rejected %v: want rejected as web", e.emitted, e.rejected)
	}

	m, _ := newMap(&mapConfig{Set: mapAssignments{{Field: "meta.n", Value: `meta.n`}, {Field: "meta.k", Value: `meta.n * 2`}}})
	if err := m.(*mapStage).Open(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	e = newThinkTestEmitter()
	if err := m.Process(context.Background(), read(), e); err != nil {
		t.Fatal(err)
	}
	out := e.emitted["out"][0]
	b, _ := json.Marshal(out.Meta)
	if string(b) != `{"k":10,"n":5.0,"source":"web"}` {
		t.Fatalf("meta %s, want n as the input spelled it and k = 10", b)
	}
}
