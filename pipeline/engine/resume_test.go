package engine_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pipe-dev/pipe/pipeline"
	"github.com/pipe-dev/pipe/pipeline/commitlog"
	"github.com/pipe-dev/pipe/pipeline/engine"
	"github.com/pipe-dev/pipe/pipeline/record"
)

// resumeGraph: N ids → dedupe-against-progress → an expensive stage (the
// engine journals what it emits) → fan-out to two real write-jsonl sinks,
// one behind a slow stage, so that a stop finds records that passed the
// expensive stage but reached only one sink, or none.
func resumeGraph(n int, key string) string {
	return fmt.Sprintf(`
[[stage]]
id = "src"
kind = "count"
n = %d

[[stage]]
id = "todo"
kind = "dedupe-against-progress"
input = "src"

[[stage]]
id = "exp"
kind = "expensive"
input = "todo"
key = %q
workers = 4
delay = "100us"
reject_every = 10

[[stage]]
id = "fast"
kind = "write-jsonl"
input = "exp"
path = "fast.jsonl"

[[stage]]
id = "slow"
kind = "delay"
input = "exp"
delay = "100us"

[[stage]]
id = "slowout"
kind = "write-jsonl"
input = "slow"
path = "slow.jsonl"
`, n, key)
}

// rejectedID reports whether the expensive stage of resumeGraph rejects id.
func rejectedID(id string) bool {
	var i int
	fmt.Sscan(id, &i)
	return (i+1)%10 == 0
}

// journalIDs reads the ids an expensive stage's journal holds.
// journalIDs reads every segment of stage's journal in the run
// directory's journal/ dir (segments whose ids all finished are gone).
func journalIDs(t *testing.T, dir, stage string) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	for _, path := range commitlog.JournalFiles(dir, stage) {
		journalFileIDs(t, path, out)
	}
	return out
}

func journalFileIDs(t *testing.T, path string, out map[string]bool) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<24)
	for sc.Scan() {
		var e struct {
			Port   string        `json:"port"`
			Record record.Record `json:"record"`
		}
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		port := "out"
		if rejectedID(e.Record.ID) {
			port = pipeline.RejectedPort
			if e.Record.Reject == nil || e.Record.Reject.Reason != "bad_completion" {
				t.Fatalf("journal entry %s lacks its rejection", sc.Text())
			}
		}
		if e.Port != port || e.Record.Completion == nil || e.Record.Completion.Answer != "answer to "+e.Record.ID {
			t.Fatalf("journal entry %s does not hold what the stage emitted (port %s)", sc.Text(), port)
		}
		out[e.Record.ID] = true
	}
}

// Exactly once across a stop: run 1 is stopped midway, run 2 on the same
// run directory completes. Every id is in each output (accepted or
// rejected) exactly once; done.ids ends with the N ids; ids finished in run
// 1 are skipped by dedupe-against-progress; and the expensive stage never
// redoes an id whose result reached its journal — those are replayed from
// it — so its work is at most N plus the records it had in flight when run
// 1 stopped.
//
// "cancel" stops at once (ctx canceled: records in flight and on the edges
// are abandoned, so some passed the expensive stage and reached one output
// or none: they must be replayed). "drain" closes Stop: intake stops,
// what passed the expensive stage is finished and committed, so nothing is
// left to replay and no work is done twice.
//
// With journal segments of 4 KiB the same holds while segments whose ids
// all finished are deleted as the runs go, and the finished run leaves no
// journal.
func TestResumeAfterStopIsExactlyOnce(t *testing.T) {
	for _, mode := range []string{"cancel", "drain"} {
		t.Run(mode, func(t *testing.T) { testResumeAfterStop(t, mode, 0) })
		t.Run(mode+"/small-segments", func(t *testing.T) { testResumeAfterStop(t, mode, 4096) })
	}
}

func testResumeAfterStop(t *testing.T, mode string, segmentBytes int64) {
	const n = 1500
	dir := t.TempDir()
	key := dir // unique per test run (also under -count)
	p := durablePlan(t, dir, resumeGraph(n, key))
	c := counterFor(key)
	runDir := filepath.Join(dir, "run")

	// Run 1: commits every few milliseconds; stopped once the expensive
	// stage has done a third of the ids.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stop := make(chan struct{})
	var stopped atomic.Bool
	sum1, err := engine.Run(ctx, p, engine.Options{
		Stop:        stop,
		CommitEvery: 5 * time.Millisecond, JournalEvery: time.Millisecond, ProgressEvery: time.Millisecond,
		JournalSegmentBytes: segmentBytes,
		Progress: func(s *engine.Summary) {
			if s.Stages[2].Out >= n/3 && stopped.CompareAndSwap(false, true) {
				if mode == "cancel" {
					cancel()
				} else {
					close(stop)
				}
			}
		},
	})
	switch mode {
	case "cancel":
		if !errors.Is(err, engine.ErrStopped) {
			t.Fatalf("run 1: err = %v, want ErrStopped (it was canceled)", err)
		}
	case "drain":
		if err != nil || !sum1.Drained {
			t.Fatalf("run 1: err = %v, drained %v; want a clean drain", err, sum1.Drained)
		}
		allBalanced(t, sum1)
	}
	calls1, finished1 := c.snapshot()
	exp1 := stageByID(t, sum1, "exp")
	if len(finished1) >= n {
		t.Fatalf("run 1 finished all %d ids before the stop; the test needs a partial run", n)
	}
	var inFlight1 int // ids the stage started in run 1 and did not finish
	for id := range calls1 {
		if !finished1[id] {
			inFlight1++
		}
	}
	if inFlight1 > 4 || (mode == "drain" && inFlight1 > 0) {
		t.Fatalf("run 1 (%s): %d ids started and not finished (the stage has 4 workers)", mode, inFlight1)
	}

	done1 := commitlog.NewSet(doneHashes(t, filepath.Join(runDir, pipeline.DoneFile)))
	journal1 := journalIDs(t, filepath.Join(runDir, "journal"), "exp")
	// Everything the stage emitted in run 1 and not finished is in the
	// journal (committed by the final commit round even though the run was
	// stopped); what finished may be gone with its segment.
	for id := range finished1 {
		if !journal1[id] && !done1.Has(commitlog.Hash(id)) {
			t.Fatalf("id %s was emitted by the expensive stage in run 1 but is not in its journal", id)
		}
	}
	// Ids done in run 1 are in both outputs (or the rejected file); ids in
	// the journal but not done reached at most one output.
	fast1, slow1 := idCounts(t, filepath.Join(dir, "fast.jsonl")), idCounts(t, filepath.Join(dir, "slow.jsonl"))
	rej1 := idCounts(t, filepath.Join(runDir, "rejected", "exp.jsonl"))
	var wantReplay int
	for _, id := range ids(n) {
		switch {
		case !journal1[id] && !done1.Has(commitlog.Hash(id)):
			if fast1[id]+slow1[id]+rej1[id] != 0 {
				t.Fatalf("id %s is not in the journal but in the outputs", id)
			}
		case done1.Has(commitlog.Hash(id)):
			if rejectedID(id) && rej1[id] != 1 {
				t.Fatalf("id %s is in done.ids after run 1 but %d times in rejected/exp.jsonl", id, rej1[id])
			}
			if !rejectedID(id) && (fast1[id] != 1 || slow1[id] != 1) {
				t.Fatalf("id %s is in done.ids after run 1 but in fast %d, slow %d times", id, fast1[id], slow1[id])
			}
		default:
			if fast1[id]+slow1[id]+rej1[id] > 1 {
				t.Fatalf("id %s is not finished after run 1 but in fast %d, slow %d, rejected %d times", id, fast1[id], slow1[id], rej1[id])
			}
			wantReplay++
		}
	}
	if done1.Len() == 0 {
		t.Fatal("run 1 finished no id; the test needs some done before the stop")
	}
	if mode == "cancel" && wantReplay == 0 {
		t.Fatalf("run 1 left no id in the journal that was not finished (journal %d, done %d); nothing to replay", len(journal1), done1.Len())
	}
	if mode == "drain" && wantReplay != 0 {
		t.Fatalf("after a drain %d ids are in the journal but not finished; a drain finishes what passed the expensive stage", wantReplay)
	}
	t.Logf("run 1: expensive stage in %d, out %d, abandoned %d; journal %d ids, done %d ids; %d to replay, %d were in flight",
		exp1.In, exp1.Out, exp1.Abandoned, len(journal1), done1.Len(), wantReplay, inFlight1)

	// Run 2: to the end.
	sum2, err := engine.Run(context.Background(), p, engine.Options{CommitEvery: 5 * time.Millisecond, JournalSegmentBytes: segmentBytes})
	if err != nil {
		t.Fatalf("run 2: %v", err)
	}
	if left := commitlog.JournalFiles(filepath.Join(runDir, "journal"), ""); len(left) > 0 {
		t.Errorf("a finished run left journal segments %v: every id in them is finished", left)
	}
	allBalanced(t, sum2)
	todo2, exp2 := stageByID(t, sum2, "todo"), stageByID(t, sum2, "exp")
	if todo2.Skips["done"] != int64(done1.Len()) || todo2.Out != int64(n-done1.Len()) {
		t.Fatalf("run 2: dedupe skipped %v and passed %d; want done %d and %d passed", todo2.Skips, todo2.Out, done1.Len(), n-done1.Len())
	}
	if exp2.Replayed != int64(wantReplay) {
		t.Fatalf("run 2: the expensive stage replayed %d records from its journal, want %d (in the journal, not finished)", exp2.Replayed, wantReplay)
	}
	if sum2.FinishedAtStart != done1.Len() || sum2.Finished != n {
		t.Fatalf("run 2: finished %d (%d at start), want %d (%d)", sum2.Finished, sum2.FinishedAtStart, n, done1.Len())
	}

	// The expensive work: no id in run 1's journal was done again; every
	// id was done once, plus once more for those cut off in flight.
	calls, _ := c.snapshot()
	var total int
	for _, id := range ids(n) {
		k := calls[id]
		total += k
		switch {
		case journal1[id] && k != 1:
			t.Errorf("id %s reached the journal in run 1 but the expensive stage ran %d times for it", id, k)
		case k < 1 || k > 2 || (k == 2 && calls1[id] != 1):
			t.Errorf("id %s: the expensive stage ran %d times (%d in run 1)", id, k, calls1[id])
		}
	}
	if total > n+inFlight1 {
		t.Fatalf("the expensive stage ran %d times for %d ids; at most %d allowed (%d in flight at the stop)", total, n, n+inFlight1, inFlight1)
	}
	t.Logf("run 2: replayed %d, expensive work done %d times for %d ids", exp2.Replayed, total, n)

	// Each output holds each accepted id exactly once, and only those; the
	// rejected file each rejected id exactly once.
	var accepted, rejected []string
	for _, id := range ids(n) {
		if rejectedID(id) {
			rejected = append(rejected, id)
		} else {
			accepted = append(accepted, id)
		}
	}
	for _, out := range []string{"fast.jsonl", "slow.jsonl", "run/rejected/exp.jsonl"} {
		want := accepted
		if out == "run/rejected/exp.jsonl" {
			want = rejected
		}
		got := idCounts(t, filepath.Join(dir, out))
		if len(got) != len(want) {
			t.Fatalf("%s holds %d distinct ids, want %d", out, len(got), len(want))
		}
		for _, id := range want {
			if got[id] != 1 {
				t.Fatalf("%s holds id %s %d times", out, id, got[id])
			}
		}
		recs := readRecords(t, filepath.Join(dir, out))
		for _, r := range recs {
			if r.Completion == nil || r.Completion.Answer != "answer to "+r.ID {
				t.Fatalf("%s: record %s lacks its completion (a replay must carry it)", out, r.ID)
			}
		}
		if committed, err := commitlog.ReadIDs(filepath.Join(dir, out)); err != nil || len(committed) != len(want) {
			t.Fatalf("%s: %d committed lines in the index (%v), want %d", out, len(committed), err, len(want))
		}
	}
	done := doneHashes(t, filepath.Join(runDir, pipeline.DoneFile))
	doneSet := commitlog.NewSet(done)
	if len(done) != n || doneSet.Len() != n {
		t.Fatalf("done.ids holds %d entries, %d distinct; want %d", len(done), doneSet.Len(), n)
	}
	for _, id := range ids(n) {
		if !doneSet.Has(commitlog.Hash(id)) {
			t.Fatalf("id %s missing from done.ids", id)
		}
	}

	// Run 3 has nothing to do.
	sum3, err := engine.Run(context.Background(), p, engine.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if todo3, exp3 := stageByID(t, sum3, "todo"), stageByID(t, sum3, "exp"); todo3.Skips["done"] != n || exp3.In != 0 {
		t.Fatalf("run 3: dedupe skipped %v, expensive stage took %d; want all done, 0", todo3.Skips, exp3.In)
	}
	if calls3, _ := c.snapshot(); len(calls3) != len(calls) {
		t.Fatal("run 3 did expensive work")
	}
}

// Without dedupe-against-progress, a resumed run still never writes an id
// twice: the expensive stage replays from its journal (no work redone) and
// each write-jsonl skips what it already committed.
func TestResumeWithoutDedupeReplaysAndSkips(t *testing.T) {
	const n = 500
	dir := t.TempDir()
	key := dir // unique per test run (also under -count)
	src := fmt.Sprintf(`
[[stage]]
id = "src"
kind = "count"
n = %d

[[stage]]
id = "exp"
kind = "expensive"
input = "src"
key = %q

[[stage]]
id = "out"
kind = "write-jsonl"
input = "exp"
path = "out.jsonl"
`, n, key)
	p := durablePlan(t, dir, src)
	if _, err := engine.Run(context.Background(), p, engine.Options{}); err != nil {
		t.Fatal(err)
	}
	sum, err := engine.Run(context.Background(), p, engine.Options{})
	if err != nil {
		t.Fatal(err)
	}
	allBalanced(t, sum)
	exp, out := stageByID(t, sum, "exp"), stageByID(t, sum, "out")
	if exp.Replayed != n || exp.Out != n {
		t.Fatalf("run 2: expensive stage replayed %d, out %d; want %d, %d", exp.Replayed, exp.Out, n, n)
	}
	if out.Skips["already_committed"] != n || out.Out != 0 {
		t.Fatalf("run 2: sink skipped %v and wrote %d; want already_committed %d, 0", out.Skips, out.Out, n)
	}
	calls, _ := counterFor(key).snapshot()
	for _, id := range ids(n) {
		if calls[id] != 1 {
			t.Fatalf("id %s: expensive work done %d times, want 1", id, calls[id])
		}
	}
	if got := idCounts(t, filepath.Join(dir, "out.jsonl")); len(got) != n {
		t.Fatalf("output holds %d ids, want %d", len(got), n)
	}
	if lines := len(readRecords(t, filepath.Join(dir, "out.jsonl"))); lines != n {
		t.Fatalf("output has %d lines, want %d", lines, n)
	}
}

// With the journal turned off (Options.NoJournal), nothing is replayed:
// the expensive stage does the work again for what was not finished.
func TestNoJournalRedoesWork(t *testing.T) {
	const n = 100
	dir := t.TempDir()
	key := dir // unique per test run (also under -count)
	p := durablePlan(t, dir, fmt.Sprintf(`
[[stage]]
id = "src"
kind = "count"
n = %d

[[stage]]
id = "exp"
kind = "expensive"
input = "src"
key = %q

[[stage]]
id = "out"
kind = "write-jsonl"
input = "exp"
path = "out.jsonl"
`, n, key))
	for range 2 {
		if _, err := engine.Run(context.Background(), p, engine.Options{NoJournal: true}); err != nil {
			t.Fatal(err)
		}
	}
	if files := commitlog.JournalFiles(filepath.Join(dir, "run", "journal"), ""); len(files) > 0 {
		t.Fatalf("NoJournal wrote a journal: %v", files)
	}
	calls, _ := counterFor(key).snapshot()
	if calls["0"] != 2 {
		t.Fatalf("without the journal and without dedupe, id 0 was worked on %d times, want 2", calls["0"])
	}
	if got := idCounts(t, filepath.Join(dir, "out.jsonl")); len(got) != n || got["0"] != 1 {
		t.Fatalf("output: %d ids (0: %d times), want %d once each", len(got), got["0"], n)
	}
}

// An id skipped because another output has it (against) was not finished
// by this run directory — not accepted, rejected or failed here — so it must
// not go into done.ids: the summary would count it as finished, and a resume
// without that against (--force-new-config) would skip it as done and never
// produce it.
func TestAgainstSkipDoesNotFinishTheID(t *testing.T) {
	dir := t.TempDir()
	other := filepath.Join(dir, "other.jsonl")
	if err := os.WriteFile(other, []byte(`{"id":"3"}`+"\n"+`{"id":"5"}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	graph := func(against string) string {
		return `
[[stage]]
id = "src"
kind = "count"
n = 10

[[stage]]
id = "todo"
kind = "dedupe-against-progress"
input = "src"
against = [` + against + `]

[[stage]]
id = "out"
kind = "write-jsonl"
input = "todo"
path = "out.jsonl"
`
	}
	sum, err := engine.Run(context.Background(), durablePlan(t, dir, graph(`"other.jsonl"`)), engine.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if todo := stageByID(t, sum, "todo"); todo.Skips["against"] != 2 || todo.Out != 8 {
		t.Fatalf("todo skipped %v and passed %d; want against 2, 8 passed", todo.Skips, todo.Out)
	}
	if got := idCounts(t, filepath.Join(dir, "out.jsonl")); len(got) != 8 || got["3"] != 0 || got["5"] != 0 {
		t.Fatalf("output holds %v; want the 8 ids other than 3 and 5", got)
	}
	done := commitlog.NewSet(doneHashes(t, filepath.Join(dir, "run", pipeline.DoneFile)))
	if done.Has(commitlog.Hash("3")) || sum.Finished != 8 {
		t.Fatalf("an id skipped by against is recorded as finished in this run directory's done.ids "+
			"(finished %d, want 8; done.ids has %d ids) although the run never produced it", sum.Finished, done.Len())
	}
	// Without against, the two are done now.
	_, err = engine.Run(context.Background(), durablePlan(t, dir, graph("")), engine.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if got := idCounts(t, filepath.Join(dir, "out.jsonl")); len(got) != 10 {
		t.Fatalf("after a run without against the output holds %d ids, want 10", len(got))
	}
}

// A journal removed by hand between runs is noticed: the next run names
// it in a warning on the user's terminal (Notice), then does the ids whose
// completions went with it again, exactly once in every output.
func TestRemovedJournalIsNamed(t *testing.T) {
	const n = 600
	dir := t.TempDir()
	key := dir
	p := durablePlan(t, dir, resumeGraph(n, key))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var once sync.Once
	_, err := engine.Run(ctx, p, engine.Options{
		CommitEvery: 5 * time.Millisecond, JournalEvery: time.Millisecond, ProgressEvery: time.Millisecond,
		Progress: func(s *engine.Summary) {
			if s.Stages[2].Out >= n/3 {
				once.Do(cancel)
			}
		},
	})
	if !errors.Is(err, engine.ErrStopped) {
		t.Fatalf("run 1: %v", err)
	}
	runDir := filepath.Join(dir, "run")
	if len(journalIDs(t, filepath.Join(runDir, "journal"), "exp")) == 0 {
		t.Fatal("run 1 left no journal to remove")
	}
	if err := os.RemoveAll(filepath.Join(runDir, "journal")); err != nil {
		t.Fatal(err)
	}
	var notice bytes.Buffer
	sum, err := engine.Run(context.Background(), p, engine.Options{CommitEvery: 5 * time.Millisecond, Notice: &notice})
	if err != nil {
		t.Fatalf("run 2: %v", err)
	}
	want := `pipe: warning: stage "exp": journal: segment ` + filepath.Join(runDir, "journal", "exp", "00000.jsonl") + ` (`
	if !strings.Contains(notice.String(), want) || !strings.Contains(notice.String(), "was removed by hand") {
		t.Fatalf("notice %q lacks %q … was removed by hand", notice.String(), want)
	}
	if sum.Finished != n {
		t.Fatalf("run 2 finished %d ids, want %d", sum.Finished, n)
	}
	for _, out := range []string{"fast.jsonl", "slow.jsonl"} {
		for id, k := range idCounts(t, filepath.Join(dir, out)) {
			if k != 1 {
				t.Fatalf("%s holds %s %d times", out, id, k)
			}
		}
	}
}
