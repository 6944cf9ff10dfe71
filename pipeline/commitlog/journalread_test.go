package commitlog_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pipe-dev/pipe/pipeline/commitlog"
)

// A reader of a journal sees what was committed, in order, and neither the
// pending lines nor a torn tail a killed process left; the file is not
// changed by reading it.
func TestEachCommittedReadsOnlyCommittedLines(t *testing.T) {
	path := filepath.Join(t.TempDir(), "gen.jsonl")
	l := open(t, path, lineID)
	long := strings.Repeat("x", 3<<20) // longer than the reader's buffer
	for _, id := range []string{"a", "b", long} {
		if err := l.Append(id, line(id)); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := l.Append("pending", line("pending")); err != nil {
		t.Fatal(err)
	}
	f, _ := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString(`{"id":"torn`)
	f.Close()
	before, _ := os.ReadFile(path)

	var got []string
	err := commitlog.EachCommitted(path, func(n int, ln []byte) error {
		id, err := lineID(ln)
		if err != nil {
			t.Fatalf("line %d: %v", n, err)
		}
		got = append(got, id)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 || got[0] != "a" || got[1] != "b" || got[2] != long {
		t.Fatalf("read %d lines %.20q, want a, b and the long one", len(got), got)
	}
	after, _ := os.ReadFile(path)
	if string(before) != string(after) {
		t.Fatal("reading changed the file")
	}
	l.Close()
}

func TestEachCommittedOfNoLog(t *testing.T) {
	called := false
	err := commitlog.EachCommitted(filepath.Join(t.TempDir(), "none.jsonl"), func(int, []byte) error { called = true; return nil })
	if err != nil || called {
		t.Fatalf("a missing log: err %v, called %v; want nothing read and no error", err, called)
	}
}

// The single-file journal comes first, then segments by number (a wider
// number after the narrower ones).
func TestJournalFilesOrder(t *testing.T) {
	dir := t.TempDir()
	if got, err := commitlog.StageJournalFiles(dir, "gen"); err != nil || got != nil {
		t.Fatalf("no journal: %v, %v", got, err)
	}
	os.MkdirAll(filepath.Join(dir, "journal", "gen"), 0o755)
	for _, n := range []string{"journal/gen.jsonl", "journal/gen/00002.jsonl", "journal/gen/100000.jsonl", "journal/gen/00010.jsonl", "journal/gen/00002.jsonl.idx", "journal/other.jsonl"} {
		os.WriteFile(filepath.Join(dir, n), nil, 0o644)
	}
	got, err := commitlog.StageJournalFiles(dir, "gen")
	if err != nil {
		t.Fatal(err)
	}
	var rel []string
	for _, p := range got {
		r, _ := filepath.Rel(dir, p)
		rel = append(rel, r)
	}
	want := "journal/gen.jsonl journal/gen/00002.jsonl journal/gen/00010.jsonl journal/gen/100000.jsonl"
	if strings.Join(rel, " ") != want {
		t.Fatalf("got %v, want %s", rel, want)
	}
}
