package stages

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/pipe-dev/pipe/pipeline"
	"github.com/pipe-dev/pipe/pipeline/config"
	"github.com/pipe-dev/pipe/pipeline/figure"
	"github.com/pipe-dev/pipe/pipeline/record"
	"github.com/pipe-dev/pipe/pipeline/record/recordline"
)

// A second chance sends a record that a judging stage (validate-thinking,
// filter) would reject for a reason the user names out of the stage's
// "retry" port instead, to a generate stage that samples it again. The
// attempts are bounded by the graph: each extra attempt is a generate
// stage and a judge of its own, wired in a chain the graph checks and
// draws, and the record ends once, in the output of its last attempt.

// RetryPort is the port second chances leave by.
const RetryPort = "retry"

// A second chance sets meta keys on the record it sends (recordline's
// MetaAttempt, MetaRetriedAfter, MetaRetriedTokens): the attempt it goes
// to (2 for the first second chance), the reasons of the attempts before,
// oldest first, and the output tokens of the completions dropped (GPU
// time the report counts as decoded, though no row keeps them). They
// reach the record's output rows.

// secondChanceOutputs is OutputsUsed for a kind whose config has a
// second_chance list: the retry port is used exactly when it is set.
func secondChanceOutputs(reasons func(cfg any) []string) func(cfg any) []string {
	return func(cfg any) []string {
		if len(reasons(cfg)) > 0 {
			return []string{RetryPort}
		}
		return nil
	}
}

// checkSecondChance says which codes of list are not among known (the
// reasons the stage can reject with), at the key second_chance.
func checkSecondChance(list, known []string) []error {
	var errs []error
	for i, r := range list {
		if !slices.Contains(known, r) {
			errs = append(errs, &config.FieldError{Key: "second_chance",
				Msg: fmt.Sprintf("unknown reason code %q; codes: %s", r, strings.Join(known, ", "))})
		}
		if slices.Contains(list[:i], r) {
			errs = append(errs, &config.FieldError{Key: "second_chance", Msg: fmt.Sprintf("%q is listed twice", r)})
		}
	}
	return errs
}

// secondChances is a judging stage's side of second chances: which
// reasons get one, and the counts its report gives.
type secondChances struct {
	reasons []string
	mu      sync.Mutex
	sent    map[string]int64 // records sent to retry, by reason
	// recovered counts accepted records by the attempt they came from
	// (meta.attempt ≥ 2): what each extra attempt recovered.
	recovered map[int]int64
	seen      atomic.Bool // something was sent or recovered
}

func newSecondChances(reasons []string) *secondChances {
	return &secondChances{reasons: reasons, sent: map[string]int64{}, recovered: map[int]int64{}}
}

// reject rejects rec for reason, or, when reason gets a second chance,
// sends it out of the retry port for a new attempt: its completion and
// anything made from it dropped, meta.attempt counted up and the reason
// added to meta.retried_after.
func (s *secondChances) reject(out pipeline.Emitter, rec *record.Record, reason, detail string) error {
	if !slices.Contains(s.reasons, reason) {
		return out.Reject(rec, reason, detail)
	}
	attempt := attemptOf(rec)
	if rec.Meta == nil {
		rec.Meta = map[string]any{}
	}
	rec.Meta[recordline.MetaAttempt] = attempt + 1
	rec.Meta[recordline.MetaRetriedAfter] = append(retriedAfter(rec), reason)
	if c := rec.Completion; c != nil {
		before, _ := metaNumber(rec.Meta[recordline.MetaRetriedTokens])
		rec.Meta[recordline.MetaRetriedTokens] = int(before) + c.CompletionTokens
	}
	rec.Completion, rec.Tokens, rec.Reject = nil, nil, nil
	s.mu.Lock()
	s.sent[reason]++
	s.mu.Unlock()
	s.seen.Store(true)
	return out.Emit(RetryPort, rec)
}

// accepted counts rec, accepted, toward what its attempt recovered.
func (s *secondChances) accepted(rec *record.Record) {
	if a := attemptOf(rec); a > 1 {
		s.mu.Lock()
		s.recovered[a]++
		s.mu.Unlock()
		s.seen.Store(true)
	}
}

// Report gives the records sent for another attempt, by reason, and the
// records accepted after one, by attempt.
func (s *secondChances) Report() []figure.Figure {
	if !s.seen.Load() && len(s.reasons) == 0 {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []figure.Figure
	for _, r := range s.reasons {
		out = append(out, figure.NewCounter("second_chances", s.sent[r], "reason", r))
	}
	attempts := make([]int, 0, len(s.recovered))
	for a := range s.recovered {
		attempts = append(attempts, a)
	}
	slices.Sort(attempts)
	for _, a := range attempts {
		out = append(out, figure.NewCounter("recovered", s.recovered[a], "attempt", fmt.Sprint(a)))
	}
	return out
}

// attemptOf is the attempt rec is on: meta.attempt, 1 without it.
func attemptOf(rec *record.Record) int {
	if n, ok := metaNumber(rec.Meta[recordline.MetaAttempt]); ok {
		return int(n)
	}
	return 1
}

// retriedAfter is a copy of rec's meta.retried_after as strings.
func retriedAfter(rec *record.Record) []string {
	var out []string
	switch v := rec.Meta[recordline.MetaRetriedAfter].(type) {
	case []string:
		out = append(out, v...)
	case []any:
		for _, x := range v {
			if s, ok := x.(string); ok {
				out = append(out, s)
			}
		}
	}
	return out
}
