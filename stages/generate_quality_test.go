package stages

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pipe-dev/pipe/pipeline/engine"
	"github.com/pipe-dev/pipe/stages/sglang/sim"
)

// The breaker's verdicts: a server whose recent answers are mostly tiny
// while the others' are not trips it, and so does one whose speculative
// acceptance falls under half of its first completions'; a fleet that is
// all tiny (a setting, not a server) does not.
func TestQualityVerdict(t *testing.T) {
	bools := func(n int, v bool) []bool {
		out := make([]bool, n)
		for i := range out {
			out[i] = v
		}
		return out
	}
	floats := func(n int, v float64) []float64 {
		out := make([]float64, n)
		for i := range out {
			out[i] = v
		}
		return out
	}
	w := &qualityWatch{per: map[string]*serverQuality{
		"a": {tiny: bools(64, true)},
		"b": {tiny: bools(64, false)},
	}}
	if v := w.verdict("a", w.per["a"]); !strings.Contains(v, "100% of its last 64 answers are tiny") || !strings.Contains(v, "against 0% of the other servers'") {
		t.Errorf("tiny: %q", v)
	}
	w.per["b"].tiny = bools(64, true)
	if v := w.verdict("a", w.per["a"]); v != "" {
		t.Errorf("every server tiny: %q", v)
	}
	q := &serverQuality{firstAccept: floats(16, 3.6), accept: floats(64, 1.1), tiny: bools(10, false)}
	if v := w.verdict("c", q); !strings.Contains(v, "acceptance fell to 1.10 tokens per step over its last 32 completions, from 3.60") {
		t.Errorf("acceptance: %q", v)
	}
	q.accept = floats(64, 3.1)
	if v := w.verdict("c", q); v != "" {
		t.Errorf("steady acceptance: %q", v)
	}
}

// A server pipe did not launch whose answers turn empty is quarantined:
// ejected, kept out though its health answers, its requests re-sent
// elsewhere; the run finishes with every record once.
func TestQualityQuarantinesAServerNotLaunched(t *testing.T) {
	bad, err := sim.ParseFault("empty-answer:1#1")
	if err != nil {
		t.Fatal(err)
	}
	cfg := quickSim(2)
	cfg.Faults = []sim.Fault{bad}
	f := startTestFleet(t, cfg)
	const n = 600
	dir, sum, err := runGenPipeline(t, context.Background(),
		genPipeline(serversKey(f.URLs())+fastGenKeys+readyKey+"concurrency = 4\n"), genPrompts(n), engine.Options{})
	if err != nil {
		t.Fatal(err)
	}
	recs := readRecords(t, filepath.Join(dir, "out/completions.jsonl"))
	if len(recs) != n {
		t.Fatalf("%d records, want %d", len(recs), n)
	}
	byServer := map[string]int{}
	for _, r := range recs {
		byServer[r.Completion.Server]++
	}
	badURL := f.URLs()[1]
	if got := byServer[badURL]; got > 100 {
		t.Errorf("the bad server made %d of %d rows: it was not kept out (%v)", got, n, byServer)
	}
	if g := stageSummary(t, sum, "gen"); g.Out != n {
		t.Errorf("gen out %d", g.Out)
	}
	t.Logf("rows by server: %v", byServer)
}
