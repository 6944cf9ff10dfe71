package runreport

import (
	"strings"
	"testing"
)

// The headline names each training output's rows as a share of the
// prompts, an empty one as such, and every reject reason's share as a
// share of the rejects (not of the data: "100%" of rejects once read as
// 100% of the rows).
func TestHeadline(t *testing.T) {
	r := &Report{Finished: 200,
		Outputs: []Output{
			{Stage: "train", Rows: 150},
			{Stage: "sft", Rows: 0},
			{Stage: "rejects", Rows: 50, RejectedRows: 50, RejectsOnly: true},
		},
		Rejected:    []Reason{{Stage: "check", Reason: "empty_answer", Count: 40}, {Stage: "gen", Reason: "length", Count: 10}},
		RejectedAll: 50,
	}
	var got []string
	for _, h := range r.Headline() {
		got = append(got, h.Text)
		if h.Empty != strings.Contains(h.Text, "no training data") {
			t.Errorf("%q: empty %v", h.Text, h.Empty)
		}
	}
	want := []string{
		"train: 150 rows = 75% of 200 prompts",
		"sft: 0 rows — no training data from 200 prompts",
		"rejected: 50 = 25% of 200 prompts; by reason: check empty_answer 40 = 80% of rejects, gen length 10 = 20% of rejects",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("headline:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// The second chances' sentence names what each extra attempt recovered
// and what was still rejected after its last one.
func TestSecondChancesText(t *testing.T) {
	s := &SecondChances{Recovered: map[int]int64{3: 13, 2: 77}, LostAfter: map[int]int64{3: 1}}
	want := "second chances recovered 90 prompts (attempt 2: 77, attempt 3: 13); 1 rejected after their last attempt"
	if got := s.Text(); got != want {
		t.Fatalf("%q, want %q", got, want)
	}
}
