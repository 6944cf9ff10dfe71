package commitlog_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/pipe-dev/pipe/pipeline/commitlog"
)

// Committed ends at the last committed line: pending lines appended after
// it are not counted, and a log without an index has nothing.
func TestCommitted(t *testing.T) {
	path := filepath.Join(t.TempDir(), "out.jsonl")
	if rows, n, err := commitlog.Committed(path); rows != 0 || n != 0 || err != nil {
		t.Fatalf("no log: %d, %d, %v", rows, n, err)
	}
	l := open(t, path, lineID)
	if rows, n, err := commitlog.Committed(path); rows != 0 || n != 0 || err != nil {
		t.Fatalf("empty log: %d, %d, %v", rows, n, err)
	}
	appendAll(t, l, "a", "b")
	if err := l.Commit(); err != nil {
		t.Fatal(err)
	}
	appendAll(t, l, "c") // pending
	defer mustClose(t, l)
	want := int64(len(want("a", "b")))
	if rows, n, err := commitlog.Committed(path); rows != 2 || n != want || err != nil {
		t.Fatalf("Committed = %d rows, %d bytes, %v; want 2, %d (two committed lines)", rows, n, err, want)
	}
	if st, _ := os.Stat(path); st.Size() <= want {
		t.Fatalf("the pending line is not in the file (size %d)", st.Size())
	}
	os.WriteFile(commitlog.IndexPath(path), []byte("garbage!"+"0123456789abcdef"), 0o644)
	if _, _, err := commitlog.Committed(path); err == nil {
		t.Fatal("a bad index header was not reported")
	}
}
