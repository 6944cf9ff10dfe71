package pipefile

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/pipe-dev/pipe/internal/suggest"
)

// Budget is [pipeline] budget: what the run may spend over every start of
// its run directory. When one limit is reached the run stops intake, lets
// the requests in flight finish, commits, and exits with its own code;
// the same command with a larger budget goes on. A zero field is no limit.
// Not a data-defining setting: raising it continues the run.
type Budget struct {
	// OutputTokens bounds the tokens the servers decode.
	OutputTokens int64
	// Wall bounds the time the run's starts last, together.
	Wall time.Duration
	// GPUHours bounds servers × hours: each server of the fleet counts
	// for the time it was part of a start.
	GPUHours float64
}

// IsZero reports a budget without limits.
func (b Budget) IsZero() bool { return b == Budget{} }

// budgetKeys are budget's keys, in the order shown.
var budgetKeys = []string{"output_tokens", "wall", "gpu_hours"}

// ParseBudget reads budget = {output_tokens = 2_000_000_000, wall =
// "36h", gpu_hours = 300}: any of them.
func ParseBudget(v any) (Budget, error) {
	m, ok := v.(map[string]any)
	if !ok {
		return Budget{}, fmt.Errorf("budget must be a table like {output_tokens = 2_000_000_000, wall = \"36h\", gpu_hours = 300}, got %s", DescribeValue(v))
	}
	var b Budget
	for _, k := range slices.Sorted(maps.Keys(m)) {
		if err := b.set(k, m[k]); err != nil {
			return Budget{}, err
		}
	}
	return b, nil
}

// set sets one key of the budget.
func (b *Budget) set(key string, v any) error {
	switch key {
	case "output_tokens":
		n, ok := v.(int64)
		if !ok || n <= 0 {
			return fmt.Errorf("budget.output_tokens must be a positive whole number of tokens, got %s", DescribeValue(v))
		}
		b.OutputTokens = n
	case "wall":
		s, ok := v.(string)
		d, err := time.ParseDuration(strings.TrimSpace(s))
		if !ok || err != nil || d <= 0 {
			return fmt.Errorf(`budget.wall must be a duration like "36h" or "90m", got %s`, DescribeValue(v))
		}
		b.Wall = d
	case "gpu_hours":
		var h float64
		switch x := v.(type) {
		case int64:
			h = float64(x)
		case float64:
			h = x
		}
		if h <= 0 {
			return fmt.Errorf("budget.gpu_hours must be a positive number (servers × hours), got %s", DescribeValue(v))
		}
		b.GPUHours = h
	default:
		return fmt.Errorf("budget has no key %q; allowed: %s%s", key, strings.Join(budgetKeys, ", "), suggest.DidYouMean(key, budgetKeys))
	}
	return nil
}

// String is the budget as the summary names it: "output_tokens 2000000,
// wall 36h0m0s".
func (b Budget) String() string {
	var parts []string
	if b.OutputTokens > 0 {
		parts = append(parts, fmt.Sprintf("output_tokens %d", b.OutputTokens))
	}
	if b.Wall > 0 {
		parts = append(parts, "wall "+b.Wall.String())
	}
	if b.GPUHours > 0 {
		parts = append(parts, fmt.Sprintf("gpu_hours %g", b.GPUHours))
	}
	return strings.Join(parts, ", ")
}
