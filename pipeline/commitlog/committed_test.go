package commitlog_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/pipe-dev/pipe/pipeline/commitlog"
)

// CommittedSize ends at the last committed line: pending lines appended
// after it are not counted, and a log without an index has nothing.
func TestCommittedSize(t *testing.T) {
	path := filepath.Join(t.TempDir(), "out.jsonl")
	if n, err := commitlog.CommittedSize(path); n != 0 || err != nil {
		t.Fatalf("no log: %d, %v", n, err)
	}
	l := open(t, path, lineID)
	if n, err := commitlog.CommittedSize(path); n != 0 || err != nil {
		t.Fatalf("empty log: %d, %v", n, err)
	}
	appendAll(t, l, "a", "b")
	if err := l.Commit(); err != nil {
		t.Fatal(err)
	}
	appendAll(t, l, "c") // pending
	defer mustClose(t, l)
	want := int64(len(want("a", "b")))
	if n, err := commitlog.CommittedSize(path); n != want || err != nil {
		t.Fatalf("CommittedSize = %d, %v; want %d (two committed lines)", n, err, want)
	}
	if st, _ := os.Stat(path); st.Size() <= want {
		t.Fatalf("the pending line is not in the file (size %d)", st.Size())
	}
	os.WriteFile(commitlog.IndexPath(path), []byte("garbage!"+"0123456789abcdef"), 0o644)
	if _, err := commitlog.CommittedSize(path); err == nil {
		t.Fatal("a bad index header was not reported")
	}
}
