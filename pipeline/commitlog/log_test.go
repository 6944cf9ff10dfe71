package commitlog_test

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pipe-dev/pipe/pipeline/commitlog"
)

// Index layout, as the package documents it: an 8-byte header, then 16-byte
// entries (id hash, end offset), little-endian.
const (
	headerSize = 8
	entrySize  = 16
)

// lineID is the IDFunc of the tests' lines: JSON objects with an "id".
func lineID(line []byte) (string, error) {
	var r struct {
		ID *string `json:"id"`
	}
	if err := json.Unmarshal(line, &r); err != nil || r.ID == nil {
		return "", errors.New("not a whole record")
	}
	return *r.ID, nil
}

func line(id string) []byte { return []byte(fmt.Sprintf(`{"id":%q,"v":"value of %s"}`, id, id)) }

func open(t *testing.T, path string, idOf commitlog.IDFunc) *commitlog.Log {
	t.Helper()
	l, err := commitlog.Open(path, idOf)
	if err != nil {
		t.Fatalf("Open(%s): %v", path, err)
	}
	return l
}

// openLookup is open for a log read back by id (commitlog.OpenLookup).
func openLookup(t *testing.T, path string, idOf commitlog.IDFunc) *commitlog.Log {
	t.Helper()
	l, err := commitlog.OpenLookup(path, idOf)
	if err != nil {
		t.Fatalf("OpenLookup(%s): %v", path, err)
	}
	return l
}

func appendAll(t *testing.T, l *commitlog.Log, ids ...string) {
	t.Helper()
	for _, id := range ids {
		if err := l.Append(id, line(id)); err != nil {
			t.Fatalf("Append(%q): %v", id, err)
		}
	}
}

func mustClose(t *testing.T, l *commitlog.Log) {
	t.Helper()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
}

// want is the data file holding exactly the lines of ids.
func want(ids ...string) string {
	var b strings.Builder
	for _, id := range ids {
		b.Write(line(id))
		b.WriteByte('\n')
	}
	return b.String()
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func size(t *testing.T, path string) int64 {
	t.Helper()
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return st.Size()
}

func appendRaw(t *testing.T, path string, b []byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

func checkStats(t *testing.T, l *commitlog.Log, rows, pending int64) {
	t.Helper()
	st := l.Stats()
	if st.Rows != rows || st.PendingRows != pending {
		t.Fatalf("Stats = %+v, want %d committed rows and %d pending", st, rows, pending)
	}
}

func TestIndexPath(t *testing.T) {
	if got, want := commitlog.IndexPath("out/train.jsonl"), filepath.Join("out", ".train.jsonl.idx"); got != want {
		t.Fatalf("IndexPath = %q, want %q", got, want)
	}
}

func TestAppendCommitReopen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "data.jsonl")
	l := open(t, path, lineID)
	checkStats(t, l, 0, 0)
	if _, err := os.Stat(commitlog.IndexPath(path)); err != nil {
		t.Fatalf("Open did not create the index: %v", err)
	}
	appendAll(t, l, "a", "b", "c")
	st := l.Stats()
	if st.Rows != 0 || st.PendingRows != 3 || st.PendingBytes != int64(len(want("a", "b", "c"))) {
		t.Fatalf("before Commit: Stats = %+v, want 3 pending rows of %d bytes", st, len(want("a", "b", "c")))
	}
	// Append writes at once (a kill -9 would leave the lines in the file).
	if got := readFile(t, path); got != want("a", "b", "c") {
		t.Fatalf("data before Commit = %q", got)
	}
	if err := l.Commit(); err != nil {
		t.Fatal(err)
	}
	st = l.Stats()
	if st.Rows != 3 || st.PendingRows != 0 || st.Bytes != int64(len(want("a", "b", "c"))) || st.PendingBytes != 0 {
		t.Fatalf("after Commit: Stats = %+v", st)
	}
	if got, want := size(t, commitlog.IndexPath(path)), int64(headerSize+3*entrySize); got != want {
		t.Fatalf("index is %d bytes, want %d (header + 3 entries)", got, want)
	}
	if err := l.Commit(); err != nil { // nothing pending: a no-op
		t.Fatal(err)
	}
	mustClose(t, l)

	l = openLookup(t, path, lineID)
	checkStats(t, l, 3, 0)
	if l.Recovered() != 0 || l.Truncated() != 0 {
		t.Fatalf("clean reopen: Recovered %d, Truncated %d; want 0, 0", l.Recovered(), l.Truncated())
	}
	for _, id := range []string{"a", "b", "c"} {
		got, ok, err := l.Lookup(id)
		if err != nil || !ok || !bytes.Equal(got, line(id)) {
			t.Fatalf("Lookup(%q) = %q, %v, %v; want %q", id, got, ok, err, line(id))
		}
	}
	if l.Has("d") {
		t.Fatal(`Has("d") on a log that never held it`)
	}
	if _, ok, err := l.Lookup("d"); ok || err != nil {
		t.Fatalf(`Lookup("d") = %v, %v; want not found`, ok, err)
	}
	// It continues the file.
	appendAll(t, l, "d")
	if err := l.Commit(); err != nil {
		t.Fatal(err)
	}
	mustClose(t, l)
	if got := readFile(t, path); got != want("a", "b", "c", "d") {
		t.Fatalf("data after the second run = %q", got)
	}
	ids, err := commitlog.ReadIDs(path)
	if err != nil {
		t.Fatal(err)
	}
	wantIDs := []uint64{commitlog.Hash("a"), commitlog.Hash("b"), commitlog.Hash("c"), commitlog.Hash("d")}
	if fmt.Sprint(ids) != fmt.Sprint(wantIDs) {
		t.Fatalf("ReadIDs = %v, want %v", ids, wantIDs)
	}
}

// Lines appended and not committed (the process died, or closed without a
// commit) are whole in the file: with an IDFunc the next Open adopts and
// commits them; a torn last line is cut.
func TestTornTailCutWholeLinesRecovered(t *testing.T) {
	path := filepath.Join(t.TempDir(), "data.jsonl")
	l := open(t, path, lineID)
	appendAll(t, l, "a", "b")
	if err := l.Commit(); err != nil {
		t.Fatal(err)
	}
	appendAll(t, l, "c", "d") // pending
	mustClose(t, l)
	torn := []byte(`{"id":"e","v":"half a li`)
	appendRaw(t, path, torn)

	l = openLookup(t, path, lineID)
	if l.Recovered() != 2 {
		t.Fatalf("Recovered = %d, want 2 (c and d)", l.Recovered())
	}
	if l.Truncated() != int64(len(torn)) {
		t.Fatalf("Truncated = %d, want %d (the torn line)", l.Truncated(), len(torn))
	}
	checkStats(t, l, 4, 0) // adopted lines are committed by Open
	if got := readFile(t, path); got != want("a", "b", "c", "d") {
		t.Fatalf("data after Open = %q", got)
	}
	if got, want := size(t, commitlog.IndexPath(path)), int64(headerSize+4*entrySize); got != want {
		t.Fatalf("index is %d bytes, want %d", got, want)
	}
	for _, id := range []string{"a", "b", "c", "d"} {
		if !l.Has(id) {
			t.Fatalf("Has(%q) false after recovery", id)
		}
	}
	if got, ok, err := l.Lookup("d"); err != nil || !ok || !bytes.Equal(got, line("d")) {
		t.Fatalf(`Lookup("d") = %q, %v, %v`, got, ok, err)
	}
	if l.Has("e") {
		t.Fatal("the torn line's id counts as held")
	}
	// Appends continue right after the last whole line.
	appendAll(t, l, "e")
	if err := l.Commit(); err != nil {
		t.Fatal(err)
	}
	mustClose(t, l)
	if got := readFile(t, path); got != want("a", "b", "c", "d", "e") {
		t.Fatalf("data = %q", got)
	}

	// Without an IDFunc nothing past the commit can be vouched for: all cut.
	appendRaw(t, path, append(line("f"), '\n'))
	l = open(t, path, nil)
	if l.Recovered() != 0 || l.Truncated() != int64(len(line("f"))+1) {
		t.Fatalf("nil IDFunc: Recovered %d, Truncated %d; want 0, %d", l.Recovered(), l.Truncated(), len(line("f"))+1)
	}
	checkStats(t, l, 5, 0)
	mustClose(t, l)
	if got := readFile(t, path); got != want("a", "b", "c", "d", "e") {
		t.Fatalf("data = %q", got)
	}
}

// Recovery stops at the first line the IDFunc refuses: it and everything
// after it are cut, even whole lines.
func TestRecoveryStopsAtUnreadableLine(t *testing.T) {
	path := filepath.Join(t.TempDir(), "data.jsonl")
	l := open(t, path, lineID)
	appendAll(t, l, "a")
	if err := l.Commit(); err != nil {
		t.Fatal(err)
	}
	mustClose(t, l)
	tail := string(line("b")) + "\n" + "not json\n" + string(line("c")) + "\n"
	appendRaw(t, path, []byte(tail))
	l = open(t, path, lineID)
	defer l.Close()
	if l.Recovered() != 1 {
		t.Fatalf("Recovered = %d, want 1 (b)", l.Recovered())
	}
	if cut := int64(len(tail) - len(line("b")) - 1); l.Truncated() != cut {
		t.Fatalf("Truncated = %d, want %d", l.Truncated(), cut)
	}
	if got := readFile(t, path); got != want("a", "b") {
		t.Fatalf("data = %q", got)
	}
	if l.Has("c") {
		t.Fatal("a line after the unreadable one was adopted")
	}
}

// A torn index entry (a commit killed while writing the index) was never
// committed: Open cuts it and the log goes on.
func TestTornIndexEntryCut(t *testing.T) {
	path := filepath.Join(t.TempDir(), "data.jsonl")
	l := open(t, path, lineID)
	appendAll(t, l, "a", "b")
	if err := l.Commit(); err != nil {
		t.Fatal(err)
	}
	mustClose(t, l)
	idx := commitlog.IndexPath(path)
	// Half of an entry for a third line whose data never made it.
	appendRaw(t, idx, []byte{1, 2, 3, 4, 5, 6, 7})

	l = open(t, path, nil)
	if got, want := size(t, idx), int64(headerSize+2*entrySize); got != want {
		t.Fatalf("index is %d bytes after Open, want %d (torn entry cut)", got, want)
	}
	checkStats(t, l, 2, 0)
	appendAll(t, l, "c")
	if err := l.Commit(); err != nil {
		t.Fatal(err)
	}
	mustClose(t, l)

	l = openLookup(t, path, nil)
	defer l.Close()
	checkStats(t, l, 3, 0)
	if got, ok, err := l.Lookup("c"); err != nil || !ok || !bytes.Equal(got, line("c")) {
		t.Fatalf(`Lookup("c") after a cut index entry = %q, %v, %v`, got, ok, err)
	}
	if got := readFile(t, path); got != want("a", "b", "c") {
		t.Fatalf("data = %q", got)
	}
}

// A torn index header (killed while creating the index) is started again.
func TestTornIndexHeader(t *testing.T) {
	path := filepath.Join(t.TempDir(), "data.jsonl")
	if err := os.WriteFile(commitlog.IndexPath(path), []byte("PIPE"), 0o644); err != nil {
		t.Fatal(err)
	}
	l := open(t, path, lineID)
	appendAll(t, l, "a")
	if err := l.Commit(); err != nil {
		t.Fatal(err)
	}
	mustClose(t, l)
	if got, want := size(t, commitlog.IndexPath(path)), int64(headerSize+entrySize); got != want {
		t.Fatalf("index is %d bytes, want %d", got, want)
	}
}

func TestNotALog(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "user.jsonl")
	content := want("x", "y")
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := commitlog.Open(path, lineID)
	if !errors.Is(err, commitlog.ErrNotALog) {
		t.Fatalf("Open of a data file without an index: err = %v, want ErrNotALog", err)
	}
	if !strings.Contains(err.Error(), path) {
		t.Fatalf("error %q does not name %s", err, path)
	}
	// Open changed nothing.
	if got := readFile(t, path); got != content {
		t.Fatalf("data changed to %q", got)
	}
	if _, err := os.Stat(commitlog.IndexPath(path)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("Open created an index beside a file that is not a log (stat: %v)", err)
	}

	// An existing empty file is simply a new log.
	empty := filepath.Join(dir, "empty.jsonl")
	if err := os.WriteFile(empty, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	l := open(t, empty, lineID)
	mustClose(t, l)
}

func TestBadIndexHeader(t *testing.T) {
	path := filepath.Join(t.TempDir(), "data.jsonl")
	if err := os.WriteFile(path, []byte(want("a")), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(commitlog.IndexPath(path), []byte("NOTANIDX________________"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := commitlog.Open(path, lineID)
	if err == nil || !strings.Contains(err.Error(), commitlog.IndexPath(path)) || !strings.Contains(err.Error(), "bad header") {
		t.Fatalf("err = %v, want a bad-header error naming the index", err)
	}
}

// An index that says more was committed than the data file holds means the
// data file was cut by something else: an error naming both files, and
// nothing is changed.
func TestIndexBeyondData(t *testing.T) {
	path := filepath.Join(t.TempDir(), "data.jsonl")
	l := open(t, path, lineID)
	appendAll(t, l, "a", "b", "c")
	if err := l.Commit(); err != nil {
		t.Fatal(err)
	}
	mustClose(t, l)
	short := want("a", "b")
	if err := os.Truncate(path, int64(len(short))); err != nil {
		t.Fatal(err)
	}
	idxBefore := readFile(t, commitlog.IndexPath(path))

	_, err := commitlog.Open(path, lineID)
	if err == nil {
		t.Fatal("Open succeeded on a data file shorter than its index says")
	}
	for _, p := range []string{path, commitlog.IndexPath(path)} {
		if !strings.Contains(err.Error(), p) {
			t.Errorf("error %q does not name %s", err, p)
		}
	}
	if got := readFile(t, path); got != short {
		t.Fatalf("data changed to %q", got)
	}
	if got := readFile(t, commitlog.IndexPath(path)); got != idxBefore {
		t.Fatal("index changed")
	}
}

// An index whose offsets go backwards is damaged: refused, not trusted.
func TestIndexOffsetsBackwards(t *testing.T) {
	path := filepath.Join(t.TempDir(), "data.jsonl")
	if err := os.WriteFile(path, []byte(want("a", "b")), 0o644); err != nil {
		t.Fatal(err)
	}
	idx := []byte("PIPEIDX1")
	for _, end := range []uint64{uint64(len(want("a", "b"))), uint64(len(want("a")))} {
		idx = binary.LittleEndian.AppendUint64(idx, commitlog.Hash("a"))
		idx = binary.LittleEndian.AppendUint64(idx, end)
	}
	if err := os.WriteFile(commitlog.IndexPath(path), idx, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := commitlog.Open(path, lineID); err == nil || !strings.Contains(err.Error(), "damaged") {
		t.Fatalf("err = %v, want the index reported damaged", err)
	}
}

// Has and Lookup answer for the lines the log held when it was opened
// (including lines Open adopted), not for lines appended since: the memory
// of a long run does not grow with its output. Callers that need "written
// in this run" keep their own set (write-jsonl skips only what an earlier
// run committed). Lookup needs OpenLookup; Has works either way.
func TestHasLookupSeeOnlyLinesHeldAtOpen(t *testing.T) {
	for _, mode := range []string{"Open", "OpenLookup"} {
		t.Run(mode, func(t *testing.T) {
			opener := open
			if mode == "OpenLookup" {
				opener = openLookup
			}
			path := filepath.Join(t.TempDir(), "data.jsonl")
			l := opener(t, path, lineID)
			appendAll(t, l, "a")
			if l.Has("a") {
				t.Fatal("Has sees a pending line appended after Open")
			}
			if err := l.Commit(); err != nil {
				t.Fatal(err)
			}
			if l.Has("a") {
				t.Fatal("Has sees a line committed after Open")
			}
			if _, ok, _ := l.Lookup("a"); ok {
				t.Fatal("Lookup sees a line committed after Open")
			}
			mustClose(t, l)

			l = opener(t, path, lineID)
			defer l.Close()
			if !l.Has("a") || l.Has("b") {
				t.Fatalf(`after reopening: Has("a") %v, Has("b") %v; want true, false`, l.Has("a"), l.Has("b"))
			}
			_, ok, err := l.Lookup("a")
			if mode == "Open" {
				if ok || err == nil {
					t.Fatalf("Lookup on a log opened with Open = %v, %v; want an error", ok, err)
				}
				return
			}
			if !ok || err != nil {
				t.Fatalf(`Lookup("a") = %v, %v`, ok, err)
			}
		})
	}
}

// Several lines with one id: Lookup returns the last one held at open.
func TestLookupRepeatedID(t *testing.T) {
	path := filepath.Join(t.TempDir(), "data.jsonl")
	l := openLookup(t, path, lineID)
	appendAll(t, l, "a", "b")
	if err := l.Commit(); err != nil {
		t.Fatal(err)
	}
	mustClose(t, l)
	l = openLookup(t, path, lineID)
	if err := l.Append("a", []byte(`{"id":"a","v":"second"}`)); err != nil {
		t.Fatal(err)
	}
	if got, _, _ := l.Lookup("a"); !bytes.Equal(got, line("a")) {
		t.Fatalf("Lookup after Append = %q, want the line held at open", got)
	}
	if err := l.Commit(); err != nil {
		t.Fatal(err)
	}
	mustClose(t, l)
	// One more, left uncommitted: adopted at open, and it is the last.
	appendRaw(t, path, []byte(`{"id":"a","v":"third"}`+"\n"))
	l = openLookup(t, path, lineID)
	defer l.Close()
	if l.Recovered() != 1 {
		t.Fatalf("Recovered = %d, want 1", l.Recovered())
	}
	if got, ok, err := l.Lookup("a"); err != nil || !ok || string(got) != `{"id":"a","v":"third"}` {
		t.Fatalf("Lookup of a repeated id = %q, %v, %v; want the last line", got, ok, err)
	}
	if got, ok, err := l.Lookup("b"); err != nil || !ok || !bytes.Equal(got, line("b")) {
		t.Fatalf(`Lookup("b") = %q, %v, %v`, got, ok, err)
	}
}

func TestReadIDs(t *testing.T) {
	dir := t.TempDir()
	ids, err := commitlog.ReadIDs(filepath.Join(dir, "missing.jsonl"))
	if err != nil || len(ids) != 0 {
		t.Fatalf("ReadIDs of a missing log = %v, %v; want none", ids, err)
	}
	path := filepath.Join(dir, "data.jsonl")
	l := open(t, path, lineID)
	appendAll(t, l, "a", "b")
	if err := l.Commit(); err != nil {
		t.Fatal(err)
	}
	appendAll(t, l, "pending")
	ids, err = commitlog.ReadIDs(path) // the log is open: only committed lines
	if err != nil || fmt.Sprint(ids) != fmt.Sprint([]uint64{commitlog.Hash("a"), commitlog.Hash("b")}) {
		t.Fatalf("ReadIDs = %v, %v", ids, err)
	}
	mustClose(t, l)
	appendRaw(t, commitlog.IndexPath(path), []byte{9, 9, 9}) // torn entry: ignored
	if ids, err = commitlog.ReadIDs(path); err != nil || len(ids) != 2 {
		t.Fatalf("ReadIDs with a torn index entry = %v, %v", ids, err)
	}
	if err := os.WriteFile(commitlog.IndexPath(path), []byte("garbage!"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := commitlog.ReadIDs(path); err == nil {
		t.Fatal("ReadIDs accepted an index with a bad header")
	}
}
