//go:build e2e

package stages

import (
	"path/filepath"
	"reflect"
	"testing"

	"github.com/pipe-dev/pipe/internal/testrig/readers"
	"github.com/pipe-dev/pipe/pipeline/record"
	"github.com/pipe-dev/pipe/stages/arrowrow"
)

// DuckDB reads D/* — the glob a user types — with nothing but Parquet in
// it, and gives messages as structs with the reasoning of each turn.
func TestWriteArrowDirectoryGlobReadsInDuckDB(t *testing.T) {
	readers.Dirs(t)
	dir := filepath.Join(t.TempDir(), "train")
	recs := arrowTestRecords()
	recs[0].Messages = append(recs[0].Messages, record.Message{Role: "assistant", Content: "42", ReasoningContent: "6 × 7"},
		record.Message{Role: "user", Content: "and 6 × 8?"})
	writeArrowDir(t, dir, recs, 3)
	schema, rows := readers.Parquet(t, filepath.Join(dir, "*"))
	if len(rows) != len(recs) {
		t.Fatalf("DuckDB read %d rows, wrote %d", len(rows), len(recs))
	}
	for _, f := range schema {
		if f.Name == arrowrow.ColMessages && f.Type != "STRUCT(\"role\" VARCHAR, \"content\" VARCHAR, reasoning_content VARCHAR, tool_calls VARCHAR, tool_call_id VARCHAR, \"name\" VARCHAR)[]" {
			t.Fatalf("messages is %s", f.Type)
		}
	}
	for i, row := range rows {
		if got := readers.String(t, row["id"]); got != recs[i].ID {
			t.Fatalf("row %d is %s, want %s", i, got, recs[i].ID)
		}
		var msgs []record.Message
		if row["messages"] != nil {
			for _, m := range row["messages"].([]any) {
				m := m.(map[string]any)
				msg := record.Message{Role: readers.String(t, m["role"]), Content: readers.String(t, m["content"])}
				if m["reasoning_content"] != nil {
					msg.ReasoningContent = readers.String(t, m["reasoning_content"])
				}
				msgs = append(msgs, msg)
			}
		}
		if want := recs[i].Messages; !reflect.DeepEqual(msgs, want) && !(len(msgs) == 0 && len(want) == 0) {
			t.Fatalf("%s: messages %v, want %v", recs[i].ID, msgs, want)
		}
	}
}
