package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/pipe-dev/pipe/pipeline/commitlog"
	"github.com/pipe-dev/pipe/pipeline/record"
)

// pipe inspect knows a journal segment as pipe writes it now (each line
// checksummed, {"crc":…,"port":…,"record":…}) and counts its records'
// verdicts and tokens through the record line's owner.
func TestInspectReadsAChecksummedJournal(t *testing.T) {
	seg := filepath.Join(t.TempDir(), "00000.jsonl")
	var data []byte
	for _, e := range []commitlog.JournalEntry{
		{Port: "out", Record: &record.Record{ID: "a", Tokens: &record.Tokens{NumTokens: 9, NumLossTokens: 4}}},
		{Port: "rejected", Record: &record.Record{ID: "b", Reject: &record.Rejection{Stage: "check", Reason: "empty_answer"}}},
	} {
		line, err := commitlog.AppendJournalEntry(nil, e)
		if err != nil {
			t.Fatal(err)
		}
		data = append(append(data, line...), '\n')
	}
	if err := os.WriteFile(seg, data, 0o644); err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	if code := run([]string{"inspect", "--json", "--rows", "2", seg}, &stdio{Out: &out, Err: &errOut}); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	var doc struct {
		JSONL *jsonlReport `json:"jsonl"`
		Rows  []rowReport  `json:"rows"`
	}
	if err := json.Unmarshal(out.Bytes(), &doc); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	j := doc.JSONL
	if j == nil || !j.Journal || j.Lines != 2 || j.WithTok != 1 || j.Tokens != 9 || j.LossTok != 4 ||
		len(j.Rejected) != 1 || j.Rejected[0].Reason != "empty_answer" || len(doc.Rows) != 2 || doc.Rows[0].Unreadable != "" {
		t.Fatalf("inspect of a journal segment: %s", out.String())
	}
}
