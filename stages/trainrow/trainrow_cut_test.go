package trainrow

import (
	"testing"

	"github.com/pipe-dev/pipe/pipeline/record"
	"github.com/pipe-dev/pipe/pipeline/record/recordline"
)

// A completion cut by the length limit goes to the raw-conversation route
// only when its row fills max_length, so SpecForge's cut drops the closing
// tokens its template adds; the pre-tokenized route takes it either way.
func TestCutRowsInTheRawRoute(t *testing.T) {
	row := func(n int) *record.Record {
		ids, mask := make([]int32, n), make(record.LossMask, n)
		for i := n / 2; i < n; i++ {
			mask[i] = 1
		}
		return &record.Record{ID: "a", Messages: []record.Message{{Role: "user", Content: "q"}},
			Completion: &record.Completion{Reasoning: "r", FinishReason: "length"},
			Tokens:     &record.Tokens{InputIDs: ids, LossMask: mask},
			Meta:       map[string]any{recordline.MetaCutAtLength: true}}
	}
	r := Rules{MaxLength: 64, Trainer: TrainerDFlash}
	for _, tc := range []struct {
		layout string
		n      int
		want   string
	}{
		{Conversations, 64, ""},
		{Conversations, 63, ReasonUnfinishedTurn},
		{SpecForge, 63, ""},
	} {
		_, prob, err := Encode(tc.layout, r, row(tc.n))
		if err != nil {
			t.Fatal(err)
		}
		if got := ""; prob != nil {
			got = prob.Reason
			if got != tc.want {
				t.Errorf("%s, %d tokens: %s (%s), want %q", tc.layout, tc.n, got, prob.Detail, tc.want)
			}
		} else if tc.want != "" {
			t.Errorf("%s, %d tokens: written, want %s", tc.layout, tc.n, tc.want)
		}
	}
}
