package stages

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pipe-dev/pipe/pipeline"
	"github.com/pipe-dev/pipe/pipeline/record"
)

// skipEmitter records Skip calls; the writer uses nothing else.
type skipEmitter struct {
	fakeEmitter
	skipped []string
}

func (s *skipEmitter) Skip(rec *record.Record, reason string) error {
	s.skipped = append(s.skipped, rec.ID+":"+reason)
	return nil
}

// What a writer commits survives a crash; what it appended after its last
// commit is cut by the next run, which continues the file and skips what is
// already in it; a file the writer did not make is kept aside, never
// overwritten.
func TestWriteJSONLCommitsAndContinues(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "sub", "out.jsonl")
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte("{\"id\":\"theirs\"}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	open := func() *writeJSONL {
		w := &writeJSONL{cfg: writeJSONLConfig{Path: path}}
		if err := w.Open(ctx, &pipeline.Env{}); err != nil {
			t.Fatal(err)
		}
		return w
	}
	w := open()
	if w.prev == "" {
		t.Fatal("a file the writer did not make was not kept aside")
	}
	if kept, _ := os.ReadFile(w.prev); string(kept) != "{\"id\":\"theirs\"}\n" {
		t.Fatalf("kept file holds %q", kept)
	}
	em := &skipEmitter{}
	for _, id := range []string{"a", "b"} {
		if err := w.Process(ctx, &record.Record{ID: id, Tokens: &record.Tokens{LossMask: record.LossMask{0, 1}}}, em); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Commit(ctx, &skipEmitter{}); err != nil {
		t.Fatal(err)
	}
	committed, _ := os.ReadFile(path)
	if got := strings.Count(string(committed), "\n"); got != 2 || !strings.Contains(string(committed), `"loss_mask":[0,1]`) {
		t.Fatalf("committed %q", committed)
	}
	// Appended, never committed: a crash (no Commit, no Close).
	// c is committed; d is only written (a kill -9 after write(2)), and a
	// torn half line follows it.
	w.Process(ctx, &record.Record{ID: "c"}, em)
	if err := w.Commit(ctx, &skipEmitter{}); err != nil {
		t.Fatal(err)
	}
	w.Process(ctx, &record.Record{ID: "d"}, em)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(`{"id":"e","mess`)
	f.Close()

	w2 := open()
	if w2.log.Truncated() != int64(len(`{"id":"e","mess`)) || w2.log.Recovered() != 1 {
		t.Fatalf("reopen cut %d bytes and kept %d lines; want the torn line cut and d kept", w2.log.Truncated(), w2.log.Recovered())
	}
	after, _ := os.ReadFile(path)
	if strings.Contains(string(after), `"id":"e"`) || !strings.Contains(string(after), `"id":"d"`) {
		t.Fatalf("after reopen the file holds %q; want a, b, c, d and no torn line", after)
	}
	em2 := &skipEmitter{}
	for _, id := range []string{"a", "d", "e"} {
		if err := w2.Process(ctx, &record.Record{ID: id}, em2); err != nil {
			t.Fatal(err)
		}
	}
	if strings.Join(em2.skipped, " ") != "a:already_committed d:already_committed" {
		t.Fatalf("skipped %v, want a and d as already_committed", em2.skipped)
	}
	if err := w2.Commit(ctx, &skipEmitter{}); err != nil {
		t.Fatal(err)
	}
	w2.Close()
	final, _ := os.ReadFile(path)
	for _, id := range []string{"a", "b", "c", "d", "e"} {
		if n := strings.Count(string(final), `"id":"`+id+`"`); n != 1 {
			t.Fatalf("id %s appears %d times in %q", id, n, final)
		}
	}
	if st, _ := os.Stat(path); st.Mode().Perm() != 0o644 {
		t.Fatalf("output mode %v, want 0644", st.Mode().Perm())
	}
}
