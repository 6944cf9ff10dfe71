package stages

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/pipe-dev/pipe/pipeline"
	"github.com/pipe-dev/pipe/pipeline/commitlog"
	"github.com/pipe-dev/pipe/pipeline/record"
	"github.com/pipe-dev/pipe/pipeline/rundir/layout"
)

// A replay of a journal with an entry damaged on disk (a changed byte the
// checksum catches) replays every other entry and names the damaged one;
// it does not fail at every start.
func TestReadJournalSkipsADamagedEntry(t *testing.T) {
	runDir := t.TempDir()
	j, err := commitlog.OpenJournal(commitlog.JournalOptions{Dir: layout.Journal(runDir, "gen"), Legacy: layout.LegacyJournal(runDir, "gen"),
		Listing: layout.JournalListing(runDir, "gen"), IDOf: commitlog.JournalEntryID, Keep: true})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		id := fmt.Sprint("p", i)
		line, _ := commitlog.AppendJournalEntry(nil, commitlog.JournalEntry{Port: "out", Record: &record.Record{ID: id,
			Completion: &record.Completion{Reasoning: "r", Answer: "answer " + id}}})
		j.Append(id, line)
	}
	j.Commit()
	j.Close()
	seg := commitlog.JournalFiles(layout.JournalDir(runDir), "gen")[0]
	data, _ := os.ReadFile(seg)
	i := bytes.Index(data, []byte("answer p4"))
	data[i] = 'A' // still JSON: only the checksum tells
	os.WriteFile(seg, data, 0o644)

	var notice strings.Builder
	r := &readJournal{cfg: readJournalConfig{RunDir: runDir, Stage: "gen"}}
	if err := r.Open(context.Background(), &pipeline.Env{StageID: "replay", Notice: &notice}); err != nil {
		t.Fatal(err)
	}
	em := &collectEmitter{}
	if err := r.Read(context.Background(), em); err != nil {
		t.Fatalf("a damaged entry failed the replay: %v", err)
	}
	if n := len(em.sent["out"]); n != 9 {
		t.Errorf("replayed %d records, want the 9 undamaged", n)
	}
	if !strings.Contains(notice.String(), seg+":5 is damaged") {
		t.Errorf("notice %q does not name the damaged entry", notice.String())
	}
}
