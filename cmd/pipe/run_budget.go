package main

import (
	"errors"
	"fmt"
	"time"

	"github.com/pipe-dev/pipe/pipeline/engine"
	"github.com/pipe-dev/pipe/pipeline/pipefile"
	"github.com/pipe-dev/pipe/pipeline/rundir"
)

// exitBudget is the exit code of a run that reached its [pipeline] budget:
// not done, not a failure a retry would mend; raise the budget and run
// the same command.
const exitBudget = 4

// budgetError says which limit of [pipeline] budget the run reached.
type budgetError struct {
	What  string // "output_tokens", "wall", "gpu_hours"
	Spent string // what the run spent of it, with the limit
	// Answers and InFlight are the fleets' completions so far and
	// requests in flight when it was measured.
	Answers, InFlight int64
}

func (e *budgetError) Error() string {
	return fmt.Sprintf("the run reached its budget: %s %s", e.What, e.Spent)
}

// budgetLimit is engine.Options.Limit for [pipeline] budget: the run's
// spend, its earlier starts' (before, from the timeline) and this one's
// (the fleets' decoded tokens and servers, the elapsed time), against b.
func budgetLimit(b pipefile.Budget, before rundir.Spent) func(*engine.Summary) error {
	return func(s *engine.Summary) error {
		var tokens, answers, inFlight int64
		servers := 0
		for _, st := range s.Stages {
			if v := st.Fleet; v != nil {
				tokens += v.Tokens
				servers += len(v.Servers)
				answers += v.Answers
				inFlight += v.InFlight
			}
		}
		tokens += before.OutputTokens
		wall := before.Wall + s.Elapsed
		gpu := before.GPUHours + float64(servers)*s.Elapsed.Hours()
		switch {
		case b.OutputTokens > 0 && tokens >= b.OutputTokens:
			return &budgetError{"output_tokens", fmt.Sprintf("%d decoded of %d", tokens, b.OutputTokens), answers, inFlight}
		case b.Wall > 0 && wall >= b.Wall:
			return &budgetError{"wall", fmt.Sprintf("%s of %s", wall.Round(time.Second), b.Wall), answers, inFlight}
		case b.GPUHours > 0 && gpu >= b.GPUHours:
			return &budgetError{"gpu_hours", fmt.Sprintf("%.2f of %g (%d servers)", gpu, b.GPUHours, servers), answers, inFlight}
		}
		return nil
	}
}

// budgetReached reports a run error that is a reached budget.
func budgetReached(err error) (*budgetError, bool) {
	var be *budgetError
	return be, errors.As(err, &be)
}

// finalSpend is the budget check of the run's last summary (nil without a
// budget or a summary).
func (r *runSession) finalSpend(sum *engine.Summary) error {
	if r.limit == nil || sum == nil {
		return nil
	}
	return r.limit(sum)
}
