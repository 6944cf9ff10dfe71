//go:build e2e

package commitlog_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pipe-dev/pipe/internal/testrig/testenv"
	"github.com/pipe-dev/pipe/pipeline/commitlog"
	"golang.org/x/sys/unix"
)

// smallFS mounts a 1 MiB tmpfs in a temporary directory, for running out of
// space. Mounting needs root (CAP_SYS_ADMIN): without it the test is
// skipped, or failed under PIPE_CI=1 as every missing test component is.
func smallFS(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, "size=1m"); err != nil {
		if errors.Is(err, unix.EPERM) {
			testenv.Missing(t, "cannot mount a tmpfs to fill up: "+err.Error(), "the tests as root, or with CAP_SYS_ADMIN")
		}
		t.Fatalf("mount tmpfs on %s: %v", dir, err)
	}
	t.Cleanup(func() {
		if err := unix.Unmount(dir, unix.MNT_DETACH); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
	})
	return dir
}

// fill writes a file until the file system is full.
func fill(t *testing.T, path string) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 4096)
	for {
		if _, err := f.Write(buf); err != nil {
			if errors.Is(err, unix.ENOSPC) {
				return
			}
			t.Fatal(err)
		}
	}
}

// A full disk while appending: Append fails, Commit then returns the error
// (the log takes nothing more), and what was committed is unchanged when the
// log is opened again after space is freed.
func TestDiskFullOnAppend(t *testing.T) {
	dir := smallFS(t)
	path := filepath.Join(dir, "data.jsonl")
	l := open(t, path, lineID)
	var committed []string
	for i := range 10 {
		committed = append(committed, fmt.Sprint("c", i))
	}
	appendAll(t, l, committed...)
	if err := l.Commit(); err != nil {
		t.Fatal(err)
	}
	committedData := want(committed...)

	// Big lines until the disk is full.
	big := strings.Repeat("x", 10_000)
	var appendErr error
	var pendingIDs []string
	for i := 0; i < 1000; i++ {
		id := fmt.Sprint("p", i)
		if appendErr = l.Append(id, []byte(fmt.Sprintf(`{"id":%q,"v":%q}`, id, big))); appendErr != nil {
			break
		}
		pendingIDs = append(pendingIDs, id)
	}
	if !errors.Is(appendErr, unix.ENOSPC) {
		t.Fatalf("Append on a full disk: err = %v, want ENOSPC", appendErr)
	}
	if !strings.Contains(appendErr.Error(), path) {
		t.Errorf("error %q does not name the file", appendErr)
	}
	// The failed write's partial line is cut at once: the file holds whole
	// lines only, even before it is opened again.
	if data := readFile(t, path); !strings.HasSuffix(data, "\n") || strings.Count(data, "\n") != len(committed)+len(pendingIDs) {
		t.Fatalf("after the failed Append the data file has %d lines (ends with a newline: %v), want %d whole ones",
			strings.Count(data, "\n"), strings.HasSuffix(data, "\n"), len(committed)+len(pendingIDs))
	}
	err := l.Commit()
	if !errors.Is(err, unix.ENOSPC) {
		t.Fatalf("Commit after a failed Append: err = %v, want the ENOSPC", err)
	}
	if err := l.Append("later", line("later")); err == nil {
		t.Fatal("Append accepted a line after the log failed")
	}
	if st := l.Stats(); st.Rows != int64(len(committed)) {
		t.Fatalf("Stats after the failure = %+v, want %d committed rows", st, len(committed))
	}
	mustClose(t, l)

	// The committed part survives; without an IDFunc, everything after it
	// is cut.
	l = open(t, path, nil)
	checkStats(t, l, int64(len(committed)), 0)
	mustClose(t, l)
	if got := readFile(t, path); got != committedData {
		t.Fatalf("after the failure the data file is %d bytes, want the %d committed", len(got), len(committedData))
	}
}

// Same, with the IDFunc: the committed part is unchanged, the whole lines
// appended before the failing one are adopted, the partial line the failed
// write left is cut, and the log takes appends again once there is space.
func TestDiskFullRecoverWholeLines(t *testing.T) {
	dir := smallFS(t)
	path := filepath.Join(dir, "data.jsonl")
	l := open(t, path, lineID)
	appendAll(t, l, "c0", "c1")
	if err := l.Commit(); err != nil {
		t.Fatal(err)
	}
	spare := filepath.Join(dir, "spare") // removed to free space
	if err := os.WriteFile(spare, make([]byte, 64<<10), 0o644); err != nil {
		t.Fatal(err)
	}
	big := strings.Repeat("x", 10_000)
	var whole []string
	for i := 0; ; i++ {
		id := fmt.Sprint("p", i)
		if err := l.Append(id, []byte(fmt.Sprintf(`{"id":%q,"v":%q}`, id, big))); err != nil {
			break
		}
		whole = append(whole, id)
		if i > 1000 {
			t.Fatal("the 1 MiB file system never filled")
		}
	}
	if l.Commit() == nil {
		t.Fatal("Commit after a failed Append succeeded")
	}
	mustClose(t, l)

	l = open(t, path, lineID)
	if l.Recovered() != len(whole) {
		t.Fatalf("Recovered = %d, want %d (the whole lines before the failed write)", l.Recovered(), len(whole))
	}
	checkStats(t, l, int64(2+len(whole)), 0)
	data := readFile(t, path)
	if !strings.HasPrefix(data, want("c0", "c1")) {
		t.Fatal("the committed lines changed")
	}
	if !strings.HasSuffix(data, "\n") || strings.Count(data, "\n") != 2+len(whole) {
		t.Fatalf("data file has %d lines (torn tail not cut?), want %d", strings.Count(data, "\n"), 2+len(whole))
	}
	mustClose(t, l)

	// Once space is freed, the log takes appends again.
	if err := os.Remove(spare); err != nil {
		t.Fatal(err)
	}
	l = open(t, path, lineID)
	defer l.Close()
	appendAll(t, l, "after")
	if err := l.Commit(); err != nil {
		t.Fatalf("Commit after space was freed: %v", err)
	}
	checkStats(t, l, int64(3+len(whole)), 0)
}

// A full disk while Commit writes the index: Commit returns the error, the
// half-written entry is cut at once (the index stays whole for readers such
// as ReadIDs), and reopening finds exactly the committed lines.
func TestDiskFullOnCommitIndex(t *testing.T) {
	dir := smallFS(t)
	path := filepath.Join(dir, "data.jsonl")
	l := open(t, path, lineID)
	// 255 entries: the index is 8 + 255*16 = 4088 bytes, 8 short of a page,
	// so the next entry needs a new page of the file system.
	const n = 255
	var ids []string
	for i := range n {
		ids = append(ids, fmt.Sprint(i))
	}
	appendAll(t, l, ids...)
	if err := l.Commit(); err != nil {
		t.Fatal(err)
	}
	idx := commitlog.IndexPath(path)
	if got := size(t, idx); got != headerSize+n*entrySize {
		t.Fatalf("index is %d bytes", got)
	}
	if size(t, path)%4096 > 4096-100 {
		t.Skip("the data file's last page has no room for one more line; adjust the line sizes")
	}
	fill(t, filepath.Join(dir, "filler"))
	// The data file's last page has room: this Append succeeds.
	if err := l.Append("last", line("last")); err != nil {
		t.Fatalf("Append into the data file's partly used page: %v", err)
	}
	err := l.Commit()
	if !errors.Is(err, unix.ENOSPC) {
		t.Fatalf("Commit with no room for the index entry: err = %v, want ENOSPC", err)
	}
	if got := size(t, idx); got != headerSize+n*entrySize {
		t.Fatalf("after the failed Commit the index is %d bytes, want %d (whole entries only)", got, headerSize+n*entrySize)
	}
	if got, err := commitlog.ReadIDs(path); err != nil || len(got) != n {
		t.Fatalf("ReadIDs after the failed Commit: %d ids, %v; want %d", len(got), err, n)
	}
	if st := l.Stats(); st.Rows != n {
		t.Fatalf("Stats = %+v, want %d committed rows", st, n)
	}
	if l.Commit() == nil {
		t.Fatal("a second Commit after the failure succeeded")
	}
	mustClose(t, l)

	if err := os.Remove(filepath.Join(dir, "filler")); err != nil {
		t.Fatal(err)
	}
	// The line whose commit failed is whole in the data file: the next Open
	// adopts it; everything before it is as committed.
	if got := readFile(t, path); got != want(append(ids, "last")...) {
		t.Fatal("the data file is not the committed lines plus the pending one")
	}
	l = open(t, path, lineID)
	defer l.Close()
	if l.Recovered() != 1 || l.Truncated() != 0 {
		t.Fatalf("Recovered %d, Truncated %d; want 1, 0", l.Recovered(), l.Truncated())
	}
	checkStats(t, l, n+1, 0)
	if !l.Has("last") {
		t.Fatal(`Has("last") after recovery`)
	}
	if got := size(t, idx); got != headerSize+(n+1)*entrySize {
		t.Fatalf("index is %d bytes after recovery, want %d", got, headerSize+(n+1)*entrySize)
	}
}
