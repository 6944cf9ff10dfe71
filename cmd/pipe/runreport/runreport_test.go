package runreport

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/pipe-dev/pipe/internal/testrig/testenv"
	"github.com/pipe-dev/pipe/pipeline/commitlog"
	"github.com/pipe-dev/pipe/pipeline/engine"
	"github.com/pipe-dev/pipe/pipeline/record"
	"github.com/pipe-dev/pipe/pipeline/record/recordline"
	_ "github.com/pipe-dev/pipe/stages" // the kinds a run.json names, as pipe registers them
)

// Bins double in width so a handful of tokens has its own bars; the
// figures are exact order statistics.
func TestDist(t *testing.T) {
	s := sample{name: DistLoss}
	for _, v := range []int{100, 0, 3, 1, 9, 2, 0, 5, 1500} {
		s.add(v)
	}
	d := s.dist()
	var got []string
	for _, b := range d.Bins {
		if b.Count > 0 {
			got = append(got, fmt.Sprintf("%s:%d", b.Label(), b.Count))
		}
	}
	if want := "0:2 1:1 2–3:2 4–7:1 8–15:1 64–127:1 1K–2K:1"; strings.Join(got, " ") != want {
		t.Errorf("bins %v, want %s", got, want)
	}
	if len(d.Bins) != 12 || d.Bins[11].Lo != 1024 || d.Bins[11].Hi != 2047 {
		t.Errorf("bins end at %+v (%d bins), want 1024–2047 as the 12th", d.Bins[len(d.Bins)-1], len(d.Bins))
	}
	if d.N != 9 || d.Zero != 2 || d.Small != 7 || d.Min != 0 || d.Max != 1500 || d.P50 != 3 || d.P10 != 0 || d.P90 != 100 || d.Sum != 1620 {
		t.Errorf("figures %+v", d)
	}
	if g := d.Glance(); g != "loss tokens: median 3; most rows (78%) have fewer than 16 loss tokens; 22% have none" {
		t.Errorf("glance %q", g)
	}
	if sp := Sparkline(d.Bins); sp != "█▄█▄▄··▄···▄" {
		t.Errorf("sparkline %q", sp)
	}
}

// A run directory written by hand: one write-jsonl output with a pending
// (uncommitted) line, a dead letter of the same rejection, a timeline over
// two starts.
func writeRunDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	out := filepath.Join(dir, "out.jsonl")
	run := map[string]any{
		"pipeline": "/x/p.toml", "created": time.Now().UTC(),
		"settings": map[string]any{"out": map[string]any{"kind": "write-jsonl", "path": out}},
		"outputs":  []any{map[string]any{"stage": "out", "kind": "write-jsonl", "path": out}},
		"history":  []any{map[string]any{"pid": 1}, map[string]any{"pid": 2}},
	}
	data, _ := json.Marshal(run)
	if err := os.WriteFile(filepath.Join(dir, "run.json"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	rec := func(id string, think, answer string, ct, rt, loss int, reject string) []byte {
		r := record.Record{ID: id, Completion: &record.Completion{Reasoning: think, Answer: answer, FinishReason: "stop", PromptTokens: 10, CompletionTokens: ct, ReasoningTokens: rt}}
		if loss >= 0 {
			r.Tokens = &record.Tokens{NumLossTokens: loss, NumTokens: loss + 10}
		}
		if reject != "" {
			r.Reject = &record.Rejection{Stage: "check", Reason: reject}
		}
		b, _ := json.Marshal(r)
		return b
	}
	l, err := commitlog.Open(out, recordline.ID)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range [][]byte{
		rec("a", "think", "answer", 20, 12, 21, ""),      // server reported reasoning tokens
		rec("b", "xxxx", "", 8, 0, 9, ""),                // split by text length: all thinking
		rec("c", "xx", "yy", 8, 0, -1, "empty_answer"),   // a rejected row
		rec("d", "xxx", "y", 8, 0, 5, ""),                // 6 thinking, 2 answer
		rec("e", "pending", "line", 99, 0, 999, "never"), // after the commit: not counted
	} {
		var id struct{ ID string }
		json.Unmarshal(line, &id)
		if err := l.Append(id.ID, line); err != nil {
			t.Fatal(err)
		}
		if id.ID == "d" {
			if err := l.Commit(); err != nil {
				t.Fatal(err)
			}
		}
	}
	l.Close()
	// The same rejection of c kept as a dead letter, and another one.
	os.MkdirAll(filepath.Join(dir, "rejected"), 0o755)
	dl, err := commitlog.Open(filepath.Join(dir, "rejected", "check.jsonl"), recordline.ID)
	if err != nil {
		t.Fatal(err)
	}
	dl.Append("c", rec("c", "xx", "yy", 8, 0, -1, "empty_answer"))
	dl.Append("f", rec("f", "", "", 1, 0, -1, "empty_thinking"))
	dl.Commit()
	dl.Close()
	t0 := time.Now().Add(-time.Hour).UTC()
	var tl strings.Builder
	for i, p := range []Point{
		{T: t0, PID: 1, Finished: 0, Stages: []PointStage{{StageCounts: engine.StageCounts{ID: "gen", Kind: "generate", Out: 0}}}},
		{T: t0.Add(10 * time.Second), PID: 1, Finished: 0, Stages: []PointStage{{StageCounts: engine.StageCounts{ID: "gen", Kind: "generate", Out: 100}}}},
		{T: t0.Add(20 * time.Second), PID: 2, Elapsed: 1, Finished: 100, Stages: []PointStage{{StageCounts: engine.StageCounts{ID: "gen", Kind: "generate", Out: 5}}}},
		{T: t0.Add(30 * time.Second), PID: 2, Elapsed: 11, Finished: 150, Stages: []PointStage{{StageCounts: engine.StageCounts{ID: "gen", Kind: "generate", Out: 55}}}},
	} {
		b, _ := json.Marshal(p)
		tl.Write(b)
		tl.WriteString("\n")
		if i == 1 {
			tl.WriteString(`{"t":"torn`) // a crash mid-line: skipped
			tl.WriteString("\n")
		}
	}
	os.WriteFile(filepath.Join(dir, TimelineFile), []byte(tl.String()), 0o644)
	return dir
}

func TestBuild(t *testing.T) {
	dir := writeRunDir(t)
	r, err := Build(context.Background(), dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Outputs) != 1 {
		t.Fatalf("outputs %+v", r.Outputs)
	}
	o := r.Outputs[0]
	if o.Rows != 4 || o.RejectedRows != 1 || o.FinishReasons["stop"] != 4 {
		t.Errorf("output: %d rows, %d rejected, finish %v; want the 4 committed, 1 rejected", o.Rows, o.RejectedRows, o.FinishReasons)
	}
	dists := map[string]Dist{}
	for _, d := range o.Dists {
		dists[d.Name] = d
	}
	if d := dists[DistLoss]; d.N != 3 || d.Sum != 21+9+5 {
		t.Errorf("loss tokens %+v; want the 3 rows with tokens", d)
	}
	if d := dists[DistThinking]; d.Sum != 12+8+4+6 {
		t.Errorf("thinking tokens sum %d, want 30 (12 reported, 8, 4 and 6 by text length)", d.Sum)
	}
	if d := dists[DistAnswer]; d.Sum != 8+0+4+2 || !strings.Contains(d.Note, "1 rows: reasoning_tokens the server reported; 3 rows: estimated") {
		t.Errorf("answer tokens sum %d (want 14), note %q", d.Sum, d.Note)
	}
	if r.RejectedAll != 2 || len(r.Rejected) != 2 || r.Rejected[0].Count != 1 {
		t.Errorf("rejected %d %+v; want c once (in the output and the dead letters) and f", r.RejectedAll, r.Rejected)
	}
	tp := r.Throughput
	if tp == nil || len(tp.Starts) != 1 || len(tp.Finished) != 4 {
		t.Fatalf("throughput %+v", tp)
	}
	// 100 in the first 10 s, nothing across the restart, 50 in the last 10 s.
	var rates []string
	for _, p := range tp.Rates[0].Points {
		rates = append(rates, fmt.Sprintf("%.1f", p.Y))
	}
	if tp.Rates[0].Name != "gen completions/s" || strings.Join(rates, " ") != "10.0 5.0" {
		t.Errorf("rates %s: %v, want 10.0 5.0", tp.Rates[0].Name, rates)
	}
	var sb strings.Builder
	r.WriteHTML(&sb)
	for _, name := range r.PlotNames() {
		if !strings.Contains(sb.String(), `data-plot="`+name+`"`) {
			t.Errorf("the HTML lacks plot %q", name)
		}
	}
	if strings.Contains(sb.String(), "<script") || strings.Contains(sb.String(), "http://") && !strings.Contains(sb.String(), "http://www.w3.org/2000/svg") {
		t.Error("the HTML has a script or a link out")
	}
}

// RecordPoint writes often early in a run and at most every 30 s later.
func TestRecordPointPacing(t *testing.T) {
	dir := t.TempDir()
	synctest.Test(t, func(t *testing.T) { recordPoints(t, dir) })
}

func recordPoints(t *testing.T, dir string) {
	s := &engine.Summary{Elapsed: 2 * time.Second, Stages: []engine.StageSummary{{StageCounts: engine.StageCounts{ID: "gen", Kind: "generate", Out: 1}}}}
	RecordPoint(dir, s, false)
	RecordPoint(dir, s, false)        // 2s/360 = 5.6ms: too soon
	time.Sleep(10 * time.Millisecond) // the bubble's clock
	RecordPoint(dir, s, false)
	s.Elapsed = 10 * time.Hour
	RecordPoint(dir, s, false) // at most every 30 s now
	RecordPoint(dir, s, true)  // the final point is always written
	pts, err := ReadTimeline(dir)
	if err != nil || len(pts) != 3 || pts[0].Stages[0].ID != "gen" || pts[0].PID != os.Getpid() {
		t.Fatalf("%d points (%v): %+v", len(pts), err, pts)
	}
}

// A container gives every start the same pid: a restart is then told by the
// elapsed time going back, and no rate spans it.
func TestRestartWithTheSamePID(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	pt := func(at, elapsed float64, out int64) Point {
		return Point{T: t0.Add(time.Duration(at * float64(time.Second))), PID: 1, Elapsed: elapsed,
			Stages: []PointStage{{StageCounts: engine.StageCounts{ID: "gen", Kind: "generate", Out: out}}}}
	}
	tp := throughput([]Point{pt(0, 0, 0), pt(10, 10, 100), pt(20, 0, 0), pt(30, 10, 50)})
	if tp == nil || len(tp.Starts) != 1 {
		t.Fatalf("starts %+v, want the restart at 20 s", tp)
	}
	for _, p := range tp.Rates[0].Points {
		if p.Y < 0 {
			t.Errorf("a negative rate %v across the restart", p.Y)
		}
	}
}

// A forced-thinking output starts inside the reasoning: cut short (no
// </think>) it is all thinking, whatever text an older split stored as
// its answer; a hybrid one with answer text and no </think> is an answer.
func TestSplitForcedThinking(t *testing.T) {
	rd := newReader(context.Background(), &Report{}, testenv.TinyQwen3Dir(t))
	tok := rd.tokenizer()
	if tok == nil {
		t.Fatal(rd.tokErr)
	}
	ids := tok.Encode("cut short in the middle of the reasoning")
	x := &row{OutputIDs: ids, CompletionTokens: len(ids), AnswerBytes: 40, ThinkingForced: true}
	if think, answer, how := rd.split(x); think != len(ids) || answer != 0 || how != "ids" {
		t.Fatalf("forced: think %d, answer %d (%s), want %d, 0", think, answer, how, len(ids))
	}
	x.ThinkingForced = false
	if think, answer, _ := rd.split(x); think != 0 || answer != len(ids) {
		t.Fatalf("hybrid: think %d, answer %d", think, answer)
	}
}

// The outputs read are the kinds that write rows, known by their Spec: an
// upload's copy is not one; an older run.json without outputs names them
// in its settings.
func TestWritersByTheirSpec(t *testing.T) {
	dir := writeRunDir(t)
	out := filepath.Join(dir, "out.jsonl")
	for name, run := range map[string]map[string]any{
		"outputs with an upload": {"settings": map[string]any{}, "outputs": []any{
			map[string]any{"stage": "out", "kind": "write-jsonl", "path": out},
			map[string]any{"stage": "up", "kind": "upload-s3", "path": "s3://b/p", "from": []string{"out"}}}},
		"settings only": {"settings": map[string]any{
			"out":     map[string]any{"kind": "write-jsonl", "path": out},
			"prompts": map[string]any{"kind": "read-completions", "path": out}}},
	} {
		run["pipeline"], run["created"], run["history"] = "/x/p.toml", time.Now().UTC(), []any{map[string]any{"pid": 1}}
		data, _ := json.Marshal(run)
		if err := os.WriteFile(filepath.Join(dir, "run.json"), data, 0o644); err != nil {
			t.Fatal(err)
		}
		r, err := Build(context.Background(), dir, Options{})
		if err != nil {
			t.Fatal(err)
		}
		if len(r.Outputs) != 1 || r.Outputs[0].Stage != "out" || r.Outputs[0].Rows != 4 {
			t.Errorf("%s: outputs %+v, want out's 4 rows alone", name, r.Outputs)
		}
	}
}

// The report shows each server's concurrency limit over time from the
// timeline (what concurrency = "auto" chose), summed over the stages
// sharing a server; a server seen at one point only has no line.
func TestConcurrencyLimitsOverTime(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	pt := func(sec int, limits ...map[string]int64) Point {
		p := Point{T: t0.Add(time.Duration(sec) * time.Second)}
		for i, l := range limits {
			p.Stages = append(p.Stages, PointStage{StageCounts: engine.StageCounts{ID: fmt.Sprint("gen", i)}, ServerLimits: l})
		}
		return p
	}
	got := concurrencyLimits([]Point{
		pt(0, map[string]int64{"a:30000": 16, "b:30000": 16}),
		pt(30, map[string]int64{"a:30000": 32, "b:30000": 24}, map[string]int64{"a:30000": 8}),
		pt(60, map[string]int64{"a:30000": 128, "c:30000": 4}),
	})
	want := "a:30000 16 40 128; b:30000 16 24; "
	var b strings.Builder
	for _, s := range got {
		b.WriteString(s.Name)
		for _, p := range s.Points {
			fmt.Fprintf(&b, " %.0f", p.Y)
		}
		b.WriteString("; ")
	}
	if b.String() != want {
		t.Errorf("limits %q, want %q", b.String(), want)
	}
}

// The JSONL workers make their line parsers at once: every one of them
// finds </think> in the id table (one that took the table while another
// was still filling it counted </think> as text, and a report of a
// thinking run said "100% have no thinking tokens" now and then).
func TestLineParsersShareAWholeIDTable(t *testing.T) {
	rd := newReader(context.Background(), &Report{}, testenv.TinyQwen3Dir(t))
	tok := rd.tokenizer()
	if tok == nil {
		t.Fatal(rd.tokErr)
	}
	end, _ := tok.TokenID("</think>")
	parsers := make([]*lineParser, 8)
	var wg sync.WaitGroup
	for i := range parsers {
		wg.Go(func() { parsers[i] = rd.newLineParser() })
	}
	wg.Wait()
	line := []byte(fmt.Sprintf(`{"id":"a","completion":{"answer":"x","output_ids":[100,%d,101]}}`, end))
	for i, p := range parsers {
		var x row
		if err := p.Parse(line, &x); err != nil {
			t.Fatal(err)
		}
		if !x.IDs.End || x.IDs.Before != 1 || x.IDs.N != 2 {
			t.Fatalf("parser %d: </think> (%d) not found in %s: %+v", i, end, line, x.IDs)
		}
	}
}
