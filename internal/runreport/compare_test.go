package runreport

import (
	"bytes"
	"strings"
	"testing"
)

func newVerdicts() *verdicts { return &verdicts{ids: map[string]uint16{}, index: map[string]uint16{}} }

// An id's verdict: a rejection or failure committed anywhere overrides its
// presence in an output (a writer of every completion holds the rejected
// ones too), and the first rejection stands; moves count each id once and
// name the first ids by sort order.
func TestCompareVerdictsAndMoves(t *testing.T) {
	a, b := newVerdicts(), newVerdicts()
	for _, id := range []string{"p1", "p2", "p3", "p4", "p5"} {
		a.accept(id)
	}
	a.set("p5", VerdictRejected+" empty_answer")
	a.accept("p5") // seen later in an output of every completion: still rejected

	b.accept("p1")
	for _, id := range []string{"p4", "p3", "p2"} {
		b.accept(id)
		b.set(id, VerdictRejected+" answer_too_short")
		b.set(id, VerdictRejected+" tok_too_long") // a second rejection does not change the first
	}
	b.set("p5", VerdictRejected+" empty_answer")
	b.set("p9", VerdictFailed) // only in B

	c, err := Compare(&Report{RunDir: "A", verdicts: a}, &Report{RunDir: "B", verdicts: b})
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	c.WriteText(&out, "A", "B")
	want := `what changed: A → B
  verdict                          before         after
  accepted                              4             1
  rejected answer_too_short             0             3
  rejected empty_answer                 1             1
  failed                                0             1
moves:
  accepted → rejected answer_too_short: 3  e.g. p2, p3, p4
  absent → failed: 1  e.g. p9
`
	if out.String() != want {
		t.Fatalf("got\n%s\nwant\n%s", out.String(), want)
	}
	if _, err := Compare(&Report{}, &Report{verdicts: b}); err == nil || !strings.Contains(err.Error(), "Options.Verdicts") {
		t.Fatalf("reports without verdicts: %v", err)
	}
	if thousands(1204) != "1,204" || thousands(1234567) != "1,234,567" || thousands(12) != "12" {
		t.Fatal("thousands")
	}
}
