package commitlog_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/pipe-dev/pipe/pipeline/commitlog"
)

const idsHeader = 8 // "PIPEIDS1"

func openIDs(t *testing.T, path string) (*commitlog.IDLog, []uint64) {
	t.Helper()
	l, hashes, err := commitlog.OpenIDLog(path)
	if err != nil {
		t.Fatalf("OpenIDLog(%s): %v", path, err)
	}
	return l, hashes
}

func TestIDLogAddCommitReopen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "done.ids")
	l, hashes := openIDs(t, path)
	if len(hashes) != 0 || l.Len() != 0 {
		t.Fatalf("new log holds %v (Len %d)", hashes, l.Len())
	}
	if got := size(t, path); got != idsHeader {
		t.Fatalf("new log is %d bytes, want the %d-byte header", got, idsHeader)
	}
	if n := l.Add(3); n != 1 {
		t.Fatalf("Add returned %d pending, want 1", n)
	}
	if n := l.Add(1); n != 2 {
		t.Fatalf("Add returned %d pending, want 2", n)
	}
	if l.Len() != 0 {
		t.Fatalf("Len = %d before Commit, want 0 (Len counts committed hashes)", l.Len())
	}
	if got := size(t, path); got != idsHeader {
		t.Fatalf("Add wrote to the file before Commit (%d bytes)", got)
	}
	if err := l.Commit(); err != nil {
		t.Fatal(err)
	}
	if l.Len() != 2 || size(t, path) != idsHeader+16 {
		t.Fatalf("after Commit: Len %d, %d bytes", l.Len(), size(t, path))
	}
	if err := l.Commit(); err != nil { // nothing pending
		t.Fatal(err)
	}
	l.Add(2) // dropped by Close
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}

	l, hashes = openIDs(t, path)
	if fmt.Sprint(hashes) != "[3 1]" || l.Len() != 2 {
		t.Fatalf("reopened: %v (Len %d), want [3 1] in the order added, without the uncommitted 2", hashes, l.Len())
	}
	l.Add(7)
	if err := l.Commit(); err != nil {
		t.Fatal(err)
	}
	l.Close()
	_, hashes = openIDs(t, path)
	if fmt.Sprint(hashes) != "[3 1 7]" {
		t.Fatalf("after a second run: %v, want [3 1 7]", hashes)
	}
}

// A torn last hash (killed while appending) is cut on open.
func TestIDLogTornTailCut(t *testing.T) {
	path := filepath.Join(t.TempDir(), "done.ids")
	l, _ := openIDs(t, path)
	l.Add(10)
	l.Add(20)
	if err := l.Commit(); err != nil {
		t.Fatal(err)
	}
	l.Close()
	appendRaw(t, path, []byte{1, 2, 3, 4, 5})

	l, hashes := openIDs(t, path)
	if fmt.Sprint(hashes) != "[10 20]" {
		t.Fatalf("hashes = %v, want [10 20]", hashes)
	}
	if got := size(t, path); got != idsHeader+16 {
		t.Fatalf("file is %d bytes after open, want %d (torn hash cut)", got, idsHeader+16)
	}
	// Appends continue at the cut, aligned.
	l.Add(30)
	if err := l.Commit(); err != nil {
		t.Fatal(err)
	}
	l.Close()
	_, hashes = openIDs(t, path)
	if fmt.Sprint(hashes) != "[10 20 30]" {
		t.Fatalf("hashes = %v, want [10 20 30]", hashes)
	}
}

// A header torn before it was whole is written again; a wrong one refuses.
func TestIDLogHeader(t *testing.T) {
	dir := t.TempDir()
	torn := filepath.Join(dir, "torn.ids")
	if err := os.WriteFile(torn, []byte("PIPE"), 0o644); err != nil {
		t.Fatal(err)
	}
	l, hashes := openIDs(t, torn)
	l.Close()
	if len(hashes) != 0 || size(t, torn) != idsHeader {
		t.Fatalf("torn header: %v, %d bytes", hashes, size(t, torn))
	}

	bad := filepath.Join(dir, "bad.ids")
	if err := os.WriteFile(bad, []byte("something else entirely"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := commitlog.OpenIDLog(bad); err == nil || !strings.Contains(err.Error(), bad) {
		t.Fatalf("err = %v, want a bad-header error naming %s", err, bad)
	}
	if got := readFile(t, bad); got != "something else entirely" {
		t.Fatalf("a file that is not an id log was changed to %q", got)
	}
}

func TestSet(t *testing.T) {
	s := commitlog.NewSet([]uint64{5, 1, 3, 3, 9})
	if s.Len() != 4 {
		t.Fatalf("Len = %d, want 4 (duplicates loaded once)", s.Len())
	}
	for _, h := range []uint64{1, 3, 5, 9} {
		if !s.Has(h) {
			t.Errorf("Has(%d) = false", h)
		}
	}
	for _, h := range []uint64{0, 2, 4, 10} {
		if s.Has(h) {
			t.Errorf("Has(%d) = true", h)
		}
	}
	if s.Len() != 4 {
		t.Errorf("Len = %d, want 4", s.Len())
	}

	empty := commitlog.NewSet(nil)
	if empty.Len() != 0 || empty.Has(0) {
		t.Fatalf("empty set: Len %d, Has(0) %v", empty.Len(), empty.Has(0))
	}

	// A large set looks up through its bucket table, including hashes at
	// the very ends of the range.
	var hashes, absent []uint64
	x := uint64(0x9e3779b97f4a7c15)
	for i := range 200_000 {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		if i%2 == 0 {
			hashes = append(hashes, x)
		} else {
			absent = append(absent, x)
		}
	}
	hashes = append(hashes, 0, ^uint64(0))
	big := commitlog.NewSet(append([]uint64(nil), hashes...))
	for _, h := range hashes {
		if !big.Has(h) {
			t.Fatalf("large set: Has(%#x) = false", h)
		}
	}
	for _, h := range absent {
		if big.Has(h) {
			t.Fatalf("large set: Has(%#x) = true for a hash not in it", h)
		}
	}
}

func TestHashStable(t *testing.T) {
	// FNV-1a 64 of "a": the value files written by other processes and
	// machines hold, so it must never change.
	if got := commitlog.Hash("a"); got != 0xaf63dc4c8601ec8c {
		t.Fatalf("Hash(\"a\") = %#x, want 0xaf63dc4c8601ec8c (FNV-1a)", got)
	}
	if commitlog.Hash("p1") == commitlog.Hash("p2") {
		t.Fatal("distinct ids hash alike")
	}
}

// TestSeenSet checks the growing set against a map over a million hashes,
// a quarter of them repeats (a repeat of a hash still in the recent map and
// of one long merged), and the ends of the range.
func TestSeenSet(t *testing.T) {
	var s commitlog.SeenSet
	oracle := map[uint64]bool{}
	x := uint64(0x9e3779b97f4a7c15)
	var added []uint64
	check := func(h uint64) {
		t.Helper()
		want := !oracle[h]
		oracle[h] = true
		if got := s.Add(h); got != want {
			t.Fatalf("Add(%#x) after %d hashes = %v, want %v", h, len(oracle), got, want)
		}
	}
	check(0)
	check(^uint64(0))
	for i := range 1_000_000 {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		switch {
		case i%4 == 3 && i%8 == 3:
			check(added[len(added)-1-i%min(100, len(added))]) // recent
		case i%4 == 3:
			check(added[(i*7919)%len(added)]) // anywhere before
		default:
			check(x)
			added = append(added, x)
		}
	}
	check(0)
	check(^uint64(0))
	if s.Len() != len(oracle) {
		t.Fatalf("Len = %d, want %d", s.Len(), len(oracle))
	}
}

// BenchmarkSeenSet reports the bytes a million ids keep, against a map.
func BenchmarkSeenSet(b *testing.B) {
	const n = 1_000_000
	hashes := make([]uint64, n)
	x := uint64(0x9e3779b97f4a7c15)
	for i := range hashes {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		hashes[i] = x
	}
	live := func(f func() any) float64 {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		keep := f()
		runtime.GC()
		runtime.ReadMemStats(&after)
		runtime.KeepAlive(keep)
		return float64(after.HeapAlloc-before.HeapAlloc) / n
	}
	b.Run("SeenSet", func(b *testing.B) {
		for b.Loop() {
			b.ReportMetric(live(func() any {
				var s commitlog.SeenSet
				for _, h := range hashes {
					s.Add(h)
				}
				return &s
			}), "B/id")
		}
	})
	b.Run("map", func(b *testing.B) {
		for b.Loop() {
			b.ReportMetric(live(func() any {
				m := map[uint64]struct{}{}
				for _, h := range hashes {
					if _, ok := m[h]; !ok {
						m[h] = struct{}{}
					}
				}
				return m
			}), "B/id")
		}
	})
}

// Truncate keeps the first n ids, drops what is pending, and appends after
// the cut (not where the file ended).
func TestIDLogTruncate(t *testing.T) {
	path := filepath.Join(t.TempDir(), "done.ids")
	l, _ := openIDs(t, path)
	for _, h := range []uint64{1, 2, 3, 4} {
		l.Add(h)
	}
	if err := l.Commit(); err != nil {
		t.Fatal(err)
	}
	l.Add(9) // pending: dropped
	if err := l.Truncate(2); err != nil {
		t.Fatal(err)
	}
	if l.Len() != 2 || size(t, path) != idsHeader+16 {
		t.Fatalf("after Truncate(2): Len %d, %d bytes", l.Len(), size(t, path))
	}
	l.Add(5)
	if err := errors.Join(l.Commit(), l.Close()); err != nil {
		t.Fatal(err)
	}
	l, hashes := openIDs(t, path)
	defer l.Close()
	if fmt.Sprint(hashes) != "[1 2 5]" {
		t.Fatalf("reopened: %v, want [1 2 5]", hashes)
	}
}
