//go:build e2e

package commitlog_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// A full disk: Commit fails, the hashes committed before are kept, and the
// log takes no more.
func TestIDLogDiskFull(t *testing.T) {
	dir := smallFS(t)
	path := filepath.Join(dir, "done.ids")
	l, _ := openIDs(t, path)
	for i := range 100 {
		l.Add(uint64(i))
	}
	if err := l.Commit(); err != nil {
		t.Fatal(err)
	}
	fill(t, filepath.Join(dir, "filler"))
	// More than the file's partly used page can take.
	for i := range 4096 {
		l.Add(uint64(1000 + i))
	}
	err := l.Commit()
	if !errors.Is(err, unix.ENOSPC) || !strings.Contains(err.Error(), path) {
		t.Fatalf("Commit on a full disk: err = %v, want ENOSPC naming %s", err, path)
	}
	if l.Len() != 100 {
		t.Fatalf("Len = %d after the failed Commit, want 100", l.Len())
	}
	if got := size(t, path); got != idsHeader+100*8 {
		t.Fatalf("file is %d bytes after the failed Commit, want %d (the partial write cut)", got, idsHeader+100*8)
	}
	if err := os.Remove(filepath.Join(dir, "filler")); err != nil {
		t.Fatal(err)
	}
	l.Add(5000)
	if l.Commit() == nil {
		t.Fatal("Commit succeeded after an earlier one failed")
	}
	l.Close()
	l, hashes := openIDs(t, path)
	defer l.Close()
	if len(hashes) != 100 || hashes[99] != 99 {
		t.Fatalf("reopened: %d hashes, want the 100 committed", len(hashes))
	}
}
