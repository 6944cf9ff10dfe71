package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/pipe-dev/pipe/pipeline/commitlog"
	"github.com/pipe-dev/pipe/pipeline/record"
	"github.com/pipe-dev/pipe/pipeline/record/recordline"
	"github.com/pipe-dev/pipe/stages/trainrow"
)

// The counts are SpecForge's generate_vocab_mapping_file Counter: each id
// as often as it carries loss, within the first max_length tokens of each
// committed row; an uncommitted tail is not counted.
func TestWriteTokenFreq(t *testing.T) {
	out := filepath.Join(t.TempDir(), "sf.jsonl")
	l, err := commitlog.Open(out, recordline.ID)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range []*record.Record{
		{ID: "a", Tokens: &record.Tokens{InputIDs: []int32{1, 2, 7, 7, 8, 9}, LossMask: record.LossMask{0, 0, 1, 1, 1, 1}}},
		{ID: "b", Tokens: &record.Tokens{InputIDs: []int32{1, 7, 9}, LossMask: record.LossMask{0, 1, 1}}},
	} {
		line, prob, err := trainrow.Encode(trainrow.SpecForge, trainrow.Rules{}, r)
		if err != nil || prob != nil {
			t.Fatal(err, prob)
		}
		l.Append(r.ID, line)
	}
	l.Commit()
	l.Append("c", []byte(`{"id":"c","input_ids":[5,5],"loss_mask":[1,1]}`)) // not committed
	l.Close()

	path, fig, err := writeTokenFreq(context.Background(), out, 5) // row a cut before its 9
	if err != nil {
		t.Fatal(err)
	}
	if fig != (promptsFig{rows: 2, tokens: 8}) {
		t.Errorf("memory figures %+v, want 2 rows of 8 tokens, none above 256", fig)
	}
	b, _ := os.ReadFile(path)
	var got tokenFreq
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	if want := map[int32]int64{7: 3, 8: 1, 9: 1}; !reflect.DeepEqual(got.Counts, want) || got.Rows != 2 || got.LossTokens != 5 {
		t.Fatalf("counts %v over %d rows, %d loss tokens; want %v over 2 rows, 5", got.Counts, got.Rows, got.LossTokens, want)
	}
}
