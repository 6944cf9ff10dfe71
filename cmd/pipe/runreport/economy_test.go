package runreport

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pipe-dev/pipe/pipeline/commitlog"
	"github.com/pipe-dev/pipe/pipeline/record"
	"github.com/pipe-dev/pipe/pipeline/record/recordline"
	"github.com/pipe-dev/pipe/stages/trainrow"
)

// economyRunDir is a run with [trainer] max_length 8: its kept rows in a
// write-arrow output (Parquet, as the writer makes it) and again in a
// write-jsonl output in the specforge layout (trainrow, as the writer
// encodes it), its rejects as dead letters, one of them twice.
func economyRunDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	row := func(id string, ct, ids, lossFrom int, cut bool) *record.Record {
		r := &record.Record{ID: id, Messages: []record.Message{{Role: "user", Content: "q " + id}},
			Completion: &record.Completion{Reasoning: "r", Answer: "a", FinishReason: "stop", PromptTokens: lossFrom, CompletionTokens: ct}}
		if cut {
			r.Completion.FinishReason = "length"
			r.Meta = map[string]any{"cut_at_length": true}
		}
		t := &record.Tokens{Source: "ids"}
		for i := range ids {
			t.InputIDs = append(t.InputIDs, int32(100+i))
			m := uint8(0)
			if i >= lossFrom {
				m = 1
				t.NumLossTokens++
			}
			t.LossMask = append(t.LossMask, m)
		}
		t.NumTokens = ids
		r.Tokens = t
		return r
	}
	kept := []*record.Record{
		row("k1", 10, 12, 4, false), // 8 loss tokens, 4 of them within max_length
		row("k2", 6, 8, 2, true),    // kept at length: 6 loss tokens
		row("k3", 2, 4, 2, false),   // 2 loss tokens
	}
	train := filepath.Join(dir, "train")
	writeArrowOutput(t, train, kept)
	handoff := filepath.Join(dir, "out.jsonl")
	l, err := commitlog.Open(handoff, recordline.ID)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range kept {
		line, prob, err := trainrow.Encode(trainrow.SpecForge, trainrow.Rules{MaxLength: 8}, r)
		if err != nil || prob != nil {
			t.Fatal(err, prob)
		}
		l.Append(r.ID, line)
	}
	l.Commit()
	l.Close()
	os.MkdirAll(filepath.Join(dir, "rejected"), 0o755)
	dl, err := commitlog.Open(filepath.Join(dir, "rejected", "check.jsonl"), recordline.ID)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range []struct {
		id, reason string
		ct         int
	}{{"r1", "truncated", 40}, {"r2", "think_unclosed", 30}, {"r3", "empty_answer", 1}, {"r2", "think_unclosed", 30}} {
		rec := record.Record{ID: r.id, Completion: &record.Completion{FinishReason: "length", CompletionTokens: r.ct},
			Reject: &record.Rejection{Stage: "check", Reason: r.reason}}
		line, _ := json.Marshal(rec)
		dl.Append(r.id, line)
	}
	dl.Commit()
	dl.Close()
	run, _ := json.Marshal(map[string]any{"pipeline": "/x.toml", "created": time.Now(),
		"settings": map[string]any{
			"train": map[string]any{"kind": "write-arrow", "path": train, "input": "tok"},
			"out":   map[string]any{"kind": "write-jsonl", "path": handoff, "layout": "specforge", "input": "tok"},
		},
		"outputs": []any{
			map[string]any{"stage": "train", "kind": "write-arrow", "path": train},
			map[string]any{"stage": "out", "kind": "write-jsonl", "path": handoff},
		},
		"trainer": map[string]any{"name": "specforge", "method": "dflash", "max_length": 8, "chat_template": "qwen3.5"},
		"history": []any{map[string]any{}}})
	os.WriteFile(filepath.Join(dir, "run.json"), run, 0o644)
	return dir
}

// Decoded tokens are every completion's, each id once (r2 is kept twice);
// trained tokens are the loss tokens within max_length, each id once (the
// kept rows are in two outputs); the panel tells kept lengths from
// rejected ones.
func TestEconomy(t *testing.T) {
	dir := economyRunDir(t)
	block := "# memory: about 1 GiB\ndata:\n  prompts_path: /x/out.jsonl\n"
	os.WriteFile(filepath.Join(dir, "out.specforge.yaml"), []byte(block), 0o644)
	r, err := Build(context.Background(), dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	e := r.Economy
	if e == nil {
		t.Fatalf("no economy; notes %v", r.Notes)
	}
	if e.MaxLength != 8 || e.Decoded != 10+6+2+40+30+1 || e.Trained != 4+6+2 {
		t.Errorf("max_length %d, decoded %d (want 89), trained %d (want 12)", e.MaxLength, e.Decoded, e.Trained)
	}
	if e.KeptAtLength != 1 || e.KeptAtLengthTokens != 6 {
		t.Errorf("kept at length %d (%d tokens), want k2 (6)", e.KeptAtLength, e.KeptAtLengthTokens)
	}
	if e.Kept.N != 3 || e.Kept.Max != 10 || e.Rejected.N != 3 || e.Rejected.Max != 40 || e.Rejected.P50 != 30 {
		t.Errorf("kept %+v\nrejected %+v", e.Kept, e.Rejected)
	}
	// 6 rows: the longest tenth is one row, r1's 40 tokens, rejected.
	if e.Longest != (Decile{From: 40, Rows: 1, Rejected: 1}) {
		t.Errorf("longest decile %+v", e.Longest)
	}
	var sb strings.Builder
	r.WriteText(&sb)
	for _, want := range []string{
		"decoded 89 output tokens, trained 12 (loss tokens within max_length 8): 7.42 decoded tokens per trained token; 87% of the decode is never trained on",
		"kept at length: 1 row stopped by the length limit and kept",
		"longest tenth of outputs (1 row, 40+ tokens): 100% rejected, against 50% of all rows",
		"kept rows", "rejected rows",
		"handoff to SpecForge, output out (", "out.specforge.yaml):\n    # memory: about 1 GiB\n    data:\n      prompts_path: /x/out.jsonl\n",
	} {
		if !strings.Contains(sb.String(), want) {
			t.Errorf("the text lacks %q:\n%s", want, sb.String())
		}
	}
	sb.Reset()
	r.WriteHTML(&sb)
	if !strings.Contains(sb.String(), `<pre class="handoff"># memory: about 1 GiB`) {
		t.Error("the HTML lacks the handoff")
	}
	for _, name := range []string{"economy:kept", "economy:rejected"} {
		if !strings.Contains(sb.String(), `data-plot="`+name+`"`) {
			t.Errorf("the HTML lacks plot %q", name)
		}
	}
	// The specforge layout's rows are training rows with their loss
	// tokens counted from the mask.
	for _, o := range r.Outputs {
		if o.Stage == "out" && (o.Rows != 3 || len(o.Dists) != 1 || o.Dists[0].Sum != 12) {
			t.Errorf("output out: %+v", o)
		}
	}
}

// Without [trainer] every loss token is trained; one training output
// needs no id set.
func TestEconomyNoTrainer(t *testing.T) {
	dir := writeRunDir(t)
	r, err := Build(context.Background(), dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	// a, b, d kept (20+8+8 decoded, 21+9+5 loss); c and f rejected (8+1).
	if e := r.Economy; e == nil || e.MaxLength != 0 || e.Decoded != 20+8+8+8+1 || e.Trained != 21+9+5 {
		t.Fatalf("economy %+v", e)
	}
}

// A row a second chance made also counts what its dropped attempts
// decoded (meta.retried_tokens): GPU time no row keeps.
func TestEconomyCountsDroppedAttempts(t *testing.T) {
	e := newEconomy(0, 1)
	e.keep(&row{ID: "a", Completion: true, CompletionTokens: 10, Marks: recordline.Marks{RetriedTokens: 25}, Tokens: true, LossTokens: 10})
	e.reject(&row{ID: "b", Completion: true, CompletionTokens: 5, Marks: recordline.Marks{RetriedTokens: 7}, RejectReason: "empty_answer"})
	if got := e.result(); got.Decoded != 10+25+5+7 || got.Trained != 10 {
		t.Fatalf("decoded %d (want 47), trained %d (want 10)", got.Decoded, got.Trained)
	}
}

// pipe init's pipeline writes every completion (before validate-thinking
// marks a row cut at the length limit) beside the training rows: a row
// kept at length counts once, whichever output is read first.
func TestKeptAtLengthCountedWithACompletionsWriter(t *testing.T) {
	e := newEconomy(4096, 2)
	e.keep(&row{ID: "a", Completion: true, CompletionTokens: 4000})                                             // the completions writer
	e.keep(&row{ID: "a", Completion: true, CompletionTokens: 4000, Marks: recordline.Marks{CutAtLength: true}}) // the training rows
	e.keep(&row{ID: "a", Completion: true, CompletionTokens: 4000, Marks: recordline.Marks{CutAtLength: true}}) // a third output
	if r := e.result(); r.KeptAtLength != 1 || r.KeptAtLengthTokens != 4000 || r.Decoded != 4000 {
		t.Fatalf("kept at length %d (%d tokens), decoded %d; want 1, 4000, 4000", r.KeptAtLength, r.KeptAtLengthTokens, r.Decoded)
	}
}
