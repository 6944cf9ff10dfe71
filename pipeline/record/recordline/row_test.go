package recordline

import (
	"encoding/json"
	"reflect"
	"slices"
	"testing"

	"github.com/pipe-dev/pipe/pipeline/record"
)

// A record as pipe writes it reads back as the Row the report counts:
// lengths, token counts, the loss mask within max_length, the output ids
// around </think>, the meta marks and the verdict.
func TestParseReadsWhatTheReportCounts(t *testing.T) {
	rec := &record.Record{ID: "r1", Tools: json.RawMessage(`[{"type":"function"}]`),
		Completion: &record.Completion{Reasoning: "hm", Answer: "yes", FinishReason: "length", PromptTokens: 7, CompletionTokens: 5,
			OutputIDs: []int{10, 11, 99, 12, 2}, Request: map[string]any{"thinking_forced": true}},
		Tokens: &record.Tokens{InputIDs: []int32{1, 2, 3, 4}, LossMask: record.LossMask{0, 1, 1, 1}, NumTokens: 4, NumLossTokens: 3},
		Meta:   map[string]any{MetaCutAtLength: true, MetaAttempt: 2, MetaRetriedTokens: 40, "source": "x"},
		Reject: &record.Rejection{Stage: "check", Reason: "too_long"}}
	line, err := record.AppendJSON(nil, rec)
	if err != nil {
		t.Fatal(err)
	}
	classes := make([]uint8, 100)
	classes[2], classes[99] = ClassSpecial, ClassEnd
	p := NewParser(Options{MaxLength: 3, Classes: classes})
	var x Row
	if err := p.Parse(line, &x); err != nil {
		t.Fatal(err)
	}
	want := Row{ID: "r1", Tools: true, Completion: true, FinishReason: "length", PromptTokens: 7, CompletionTokens: 5,
		ReasoningBytes: 2, AnswerBytes: 3, ThinkingForced: true, IDs: IDCount{Any: true, End: true, N: 3, Before: 2},
		Tokens: true, NumTokens: 4, LossTokens: 3, Mask: MaskCount{Known: true, All: 3, In: 2, Len: 4},
		Marks: Marks{CutAtLength: true, Attempt: 2, RetriedTokens: 40}, RejectStage: "check", RejectReason: "too_long"}
	if x.OutputIDs != nil || !equalRows(x, want) {
		t.Fatalf("Parse:\n got %+v\nwant %+v", x, want)
	}
	// The same line as a journal entry's record.
	entry := append([]byte(`{"crc":"00000000","port":"out","record":`), line...)
	entry = append(entry, '}')
	inner, ok := JournalRecord(entry)
	if !ok || string(inner) != string(line) {
		t.Fatalf("JournalRecord: %v, %s", ok, inner)
	}
	if _, ok := JournalRecord(line); ok {
		t.Fatal("a record line taken for a journal entry")
	}
}

func equalRows(a, b Row) bool {
	a.OutputIDs, b.OutputIDs = nil, nil
	return reflect.DeepEqual(a, b)
}

// A trainer row's input ids, cut at max_length, each with its loss mask's
// say; a line without input_ids is not one.
func TestEachInputID(t *testing.T) {
	var ids []int
	var loss []bool
	ok := EachInputID([]byte(`{"id":"a","input_ids":[5,300,7,8],"loss_mask":[0,1,1,0]}`), 3, func(id int, l bool) {
		ids, loss = append(ids, id), append(loss, l)
	})
	if !ok || !slices.Equal(ids, []int{5, 300, 7}) || !slices.Equal(loss, []bool{false, true, true}) {
		t.Fatalf("ok %v, ids %v, loss %v", ok, ids, loss)
	}
	if EachInputID([]byte(`{"id":"a","conversations":[]}`), 0, func(int, bool) {}) {
		t.Fatal("a row without input_ids read as one")
	}
}
