package pipefile

import (
	"strings"
	"testing"
	"time"
)

func TestParseBudget(t *testing.T) {
	for _, c := range []struct {
		in   any
		want Budget
		err  string
	}{
		{in: map[string]any{"output_tokens": int64(2_000_000_000)}, want: Budget{OutputTokens: 2_000_000_000}},
		{in: map[string]any{"wall": "36h", "gpu_hours": int64(300)}, want: Budget{Wall: 36 * time.Hour, GPUHours: 300}},
		{in: map[string]any{"gpu_hours": 12.5}, want: Budget{GPUHours: 12.5}},
		{in: map[string]any{"output_token": int64(5)}, err: `budget has no key "output_token"; allowed: output_tokens, wall, gpu_hours (did you mean "output_tokens"?)`},
		{in: map[string]any{"output_tokens": int64(0)}, err: "budget.output_tokens must be a positive whole number"},
		{in: map[string]any{"wall": "two days"}, err: `budget.wall must be a duration like "36h"`},
		{in: map[string]any{"gpu_hours": "300"}, err: "budget.gpu_hours must be a positive number"},
		{in: int64(5), err: "budget must be a table"},
	} {
		b, err := ParseBudget(c.in)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("ParseBudget(%#v): %v, want %q", c.in, err, c.err)
			}
			continue
		}
		if err != nil || b != c.want {
			t.Errorf("ParseBudget(%#v) = %+v, %v; want %+v", c.in, b, err, c.want)
		}
	}
}

// The budget is read from [pipeline] with its position on a mistake, and
// one key of it can be raised with --set.
func TestBudgetInTheFile(t *testing.T) {
	src := "[pipeline]\nbudget = {output_tokens = 1000, wall = \"2h\"}\n"
	f, probs := Parse("p.toml", []byte(src), Options{Set: []string{"pipeline.budget.output_tokens=5000"}})
	if f == nil {
		t.Fatalf("%v", probs)
	}
	if f.Budget != (Budget{OutputTokens: 5000, Wall: 2 * time.Hour}) {
		t.Fatalf("budget %+v", f.Budget)
	}
	_, probs = Parse("p.toml", []byte("[pipeline]\nbudget = {wal = \"2h\"}\n"), Options{})
	if s := probs.Error(); !strings.Contains(s, "p.toml:2:") || !strings.Contains(s, `budget has no key "wal"`) {
		t.Fatalf("problems: %s", s)
	}
	_, probs = Parse("p.toml", []byte(src), Options{Set: []string{"pipeline.budget.tokens=5"}})
	if s := probs.Error(); !strings.Contains(s, `budget has no key "tokens"`) {
		t.Fatalf("problems: %s", s)
	}
}
