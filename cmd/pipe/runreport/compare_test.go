package runreport

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/pipe-dev/pipe/pipeline/commitlog"
)

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

// Options.VerdictsOnly reads the same verdicts as a whole report, with no
// distributions; the verdicts of many ids survive their slots' growth.
func TestVerdictsOnly(t *testing.T) {
	dir := writeRunDir(t)
	full, err := Build(context.Background(), dir, Options{Verdicts: true})
	if err != nil {
		t.Fatal(err)
	}
	only, err := Build(context.Background(), dir, Options{VerdictsOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(only.Outputs) != 1 || only.Outputs[0].Rows != 4 || len(only.Outputs[0].Dists) != 0 {
		t.Fatalf("verdicts-only outputs %+v", only.Outputs)
	}
	c, err := Compare(full, only)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, ch := range c.Counts {
		got = append(got, fmt.Sprintf("%s %d %d", ch.Verdict, ch.A, ch.B))
	}
	if want := "accepted 3 3, rejected empty_answer 1 1, rejected empty_thinking 1 1"; strings.Join(got, ", ") != want || len(c.Moves) != 0 {
		t.Fatalf("counts %q (want %q), moves %+v", strings.Join(got, ", "), want, c.Moves)
	}
	v := newVerdicts()
	for i := range 100000 {
		v.accept(fmt.Sprintf("id-%d", i))
	}
	v.set("id-77", VerdictFailed)
	if v.of("id-99999") != VerdictAccepted || v.of("id-77") != VerdictFailed || v.of("id-100000") != VerdictAbsent || len(v.verdict) != 100000 {
		t.Fatalf("verdicts of many ids: %q %q %q, %d slots", v.of("id-99999"), v.of("id-77"), v.of("id-100000"), len(v.verdict))
	}
	// Two ids with one hash (about 3e-8 in a million ids): made here by
	// pointing y's hash at x's slot, as a collision would.
	v = newVerdicts()
	v.accept("x")
	v.at[commitlog.Hash("y")] = v.at[commitlog.Hash("x")]
	v.set("y", VerdictFailed)
	if v.of("x") != VerdictAccepted || v.of("y") != VerdictFailed || len(v.verdict) != 2 {
		t.Fatalf("colliding ids: x %q, y %q, %d slots", v.of("x"), v.of("y"), len(v.verdict))
	}
}
