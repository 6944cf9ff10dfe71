package runreport

import (
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/pipe-dev/pipe/pipeline/commitlog"
)

// Verdicts an id can have in a run. A rejection is VerdictRejected, a
// space and its reason ("rejected answer_too_short").
const (
	VerdictAccepted = "accepted"
	VerdictRejected = "rejected"
	VerdictFailed   = "failed"
	// VerdictAbsent is an id that one run has and the other has not (a
	// replay stopped early, or a run on other prompts).
	VerdictAbsent = "absent"
)

// verdicts is each id's verdict in one run: an id in an output without a
// rejection is accepted unless a rejection or failure of it was committed
// anywhere (an output of every completion, fed before validation, holds
// the rejected ones too). It is kept compact for runs of millions of ids,
// about 40 bytes an id: slots found by the id's 64-bit hash (another id
// with the same hash gets a slot of its own through more), the ids'
// bytes in one buffer (for the moves' examples), and interned verdict
// names, 2 bytes a slot.
type verdicts struct {
	at      map[uint64]int32
	more    map[string]int32
	ids     []byte
	ends    []int // slot i's id is ids[ends[i-1]:ends[i]]
	verdict []uint16
	names   []string
	index   map[string]uint16
}

func newVerdicts() *verdicts {
	return &verdicts{at: map[uint64]int32{}, more: map[string]int32{}, index: map[string]uint16{}}
}

func (v *verdicts) name(s string) uint16 {
	i, ok := v.index[s]
	if !ok {
		i = uint16(len(v.names))
		v.names = append(v.names, s)
		v.index[s] = i
	}
	return i
}

// id is slot i's id, valid until the next slot is added.
func (v *verdicts) id(i int32) []byte {
	lo := 0
	if i > 0 {
		lo = v.ends[i-1]
	}
	return v.ids[lo:v.ends[i]]
}

// slot is id's slot, or -1.
func (v *verdicts) slot(id string) int32 {
	i, ok := v.at[commitlog.Hash(id)]
	if !ok {
		return -1
	}
	if string(v.id(i)) == id {
		return i
	}
	if j, ok := v.more[id]; ok {
		return j
	}
	return -1
}

// add gives id, which has no slot, one with verdict.
func (v *verdicts) add(id string, verdict uint16) {
	i := int32(len(v.verdict))
	if h := commitlog.Hash(id); v.hasHash(h) {
		v.more[id] = i
	} else {
		v.at[h] = i
	}
	v.ids = append(v.ids, id...)
	v.ends = append(v.ends, len(v.ids))
	v.verdict = append(v.verdict, verdict)
}

func (v *verdicts) hasHash(h uint64) bool {
	_, ok := v.at[h]
	return ok
}

// set records a rejection or failure: it overrides acceptance, and the
// first one of an id stands.
func (v *verdicts) set(id, verdict string) {
	if v == nil {
		return
	}
	i := v.slot(id)
	if i < 0 {
		v.add(id, v.name(verdict))
		return
	}
	if v.names[v.verdict[i]] == VerdictAccepted {
		v.verdict[i] = v.name(verdict)
	}
}

func (v *verdicts) accept(id string) {
	if v == nil {
		return
	}
	if v.slot(id) < 0 {
		v.add(id, v.name(VerdictAccepted))
	}
}

func (v *verdicts) of(id string) string {
	if i := v.slot(id); i >= 0 {
		return v.names[v.verdict[i]]
	}
	return VerdictAbsent
}

// Comparison is what changed between two runs of the same ids (an
// original and its replay, or any two): each verdict's count in both, and
// the ids that moved from one verdict to another.
type Comparison struct {
	A, B   string   `json:"-"`
	Counts []Change `json:"counts"`
	Moves  []Move   `json:"moves"`
}

// Change is one verdict's count in run A and in run B.
type Change struct {
	Verdict string `json:"verdict"`
	A       int64  `json:"a"`
	B       int64  `json:"b"`
}

// Move is the ids whose verdict in A was From and in B is To.
type Move struct {
	From     string   `json:"from"`
	To       string   `json:"to"`
	Count    int64    `json:"count"`
	Examples []string `json:"examples"` // the first few ids, sorted
}

// MoveExamples is how many ids a move names.
const MoveExamples = 3

// Compare compares two reports built with Options.Verdicts.
func Compare(a, b *Report) (*Comparison, error) {
	if a.verdicts == nil || b.verdicts == nil {
		return nil, fmt.Errorf("runreport.Compare: build both reports with Options.Verdicts")
	}
	c := &Comparison{A: a.RunDir, B: b.RunDir}
	counts := map[string]*Change{}
	count := func(verdict string) *Change {
		if counts[verdict] == nil {
			counts[verdict] = &Change{Verdict: verdict}
		}
		return counts[verdict]
	}
	moves := map[[2]string]*Move{}
	move := func(id []byte, from, to string) {
		if from == to {
			return
		}
		k := [2]string{from, to}
		m := moves[k]
		if m == nil {
			m = &Move{From: from, To: to}
			moves[k] = m
		}
		m.Count++
		// The first few ids by sort order: a string only for one that enters.
		if len(m.Examples) == MoveExamples && string(id) >= m.Examples[MoveExamples-1] {
			return
		}
		m.Examples = append(m.Examples, string(id))
		sort.Strings(m.Examples)
		if len(m.Examples) > MoveExamples {
			m.Examples = m.Examples[:MoveExamples]
		}
	}
	// One pass over each run's slots: A's ids looked up in B, then B's
	// ids that A has not.
	av, bv := a.verdicts, b.verdicts
	for i := range int32(len(av.verdict)) {
		id := av.id(i)
		va, vb := av.names[av.verdict[i]], bv.of(string(id))
		count(va).A++
		move(id, va, vb)
	}
	for i := range int32(len(bv.verdict)) {
		id := bv.id(i)
		vb := bv.names[bv.verdict[i]]
		count(vb).B++
		if av.slot(string(id)) < 0 {
			move(id, VerdictAbsent, vb)
		}
	}
	for _, ch := range counts {
		c.Counts = append(c.Counts, *ch)
	}
	sort.Slice(c.Counts, func(i, j int) bool { return verdictLess(c.Counts[i].Verdict, c.Counts[j].Verdict) })
	for _, m := range moves {
		c.Moves = append(c.Moves, *m)
	}
	sort.Slice(c.Moves, func(i, j int) bool {
		if c.Moves[i].Count != c.Moves[j].Count {
			return c.Moves[i].Count > c.Moves[j].Count
		}
		return c.Moves[i].From+c.Moves[i].To < c.Moves[j].From+c.Moves[j].To
	})
	return c, nil
}

// verdictLess orders accepted first, then rejections by reason, then the rest.
func verdictLess(a, b string) bool {
	rank := func(v string) int {
		switch {
		case v == VerdictAccepted:
			return 0
		case strings.HasPrefix(v, VerdictRejected):
			return 1
		case v == VerdictFailed:
			return 2
		}
		return 3
	}
	if rank(a) != rank(b) {
		return rank(a) < rank(b)
	}
	return a < b
}

// WriteText prints the comparison: the counts side by side, then each move
// with its count and example ids ("accepted → rejected answer_too_short:
// 1,204  e.g. p1, p17, p9").
func (c *Comparison) WriteText(w io.Writer, nameA, nameB string) {
	fmt.Fprintf(w, "what changed: %s → %s\n", nameA, nameB)
	vw := len("verdict")
	for _, ch := range c.Counts {
		vw = max(vw, len(ch.Verdict))
	}
	fmt.Fprintf(w, "  %-*s  %12s  %12s\n", vw, "verdict", "before", "after")
	for _, ch := range c.Counts {
		if ch.Verdict == VerdictAbsent {
			continue
		}
		fmt.Fprintf(w, "  %-*s  %12s  %12s\n", vw, ch.Verdict, thousands(ch.A), thousands(ch.B))
	}
	if len(c.Moves) == 0 {
		fmt.Fprintln(w, "  no id changed its verdict")
		return
	}
	fmt.Fprintln(w, "moves:")
	for _, m := range c.Moves {
		fmt.Fprintf(w, "  %s → %s: %s  e.g. %s\n", m.From, m.To, thousands(m.Count), strings.Join(m.Examples, ", "))
	}
}

// thousands is n with commas: 1,204.
func thousands(n int64) string {
	s := fmt.Sprint(n)
	if n < 0 {
		return "-" + thousands(-n)
	}
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}
