package commitlog

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func addCommit(t *testing.T, l *IDLog, from, to int) {
	t.Helper()
	for i := from; i < to; i++ {
		l.Add(uint64(1000 + i))
	}
	if err := l.Commit(); err != nil {
		t.Fatal(err)
	}
}

// done.ids damaged while pipe is stopped: random bytes that still read as
// ids, and a torn page, are caught by the checksums. Only the damaged
// blocks' ids are dropped (done again); the rest stay finished, the log is
// rewritten, and the next open is clean. An earlier pipe's log without
// checksums is taken as it is and gets them.
func TestCheckedIDLogCatchesDamage(t *testing.T) {
	for _, c := range []struct {
		name string
		at   int64
		data []byte
	}{
		{"a flipped byte", 8 + 8*100 + 3, []byte{0x5a}},
		{"a torn page", 8 + 8*300, make([]byte, 512)},
		{"a torn first page", 0, make([]byte, 100)},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "done.ids")
			l, _, w, err := OpenCheckedIDLog(path)
			if err != nil || w != "" {
				t.Fatal(err, w)
			}
			// Commits of odd sizes, so blocks fill across commits.
			for _, n := range [][2]int{{0, 10}, {10, 75}, {75, 200}, {200, 201}, {201, 500}} {
				addCommit(t, l, n[0], n[1])
			}
			l.Close()
			f, _ := os.OpenFile(path, os.O_WRONLY, 0)
			f.WriteAt(c.data, c.at)
			f.Close()

			l, hashes, w, err := OpenCheckedIDLog(path)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(w, path+" is damaged") || !strings.Contains(w, "done again") {
				t.Errorf("warning %q", w)
			}
			lost := 500 - len(hashes)
			if lost == 0 || lost > 2*sumBlock {
				t.Errorf("%d ids dropped for %d damaged bytes; want the blocks it touched", lost, len(c.data))
			}
			have := map[uint64]bool{}
			for _, h := range hashes {
				have[h] = true
			}
			for i := range 500 {
				if b := i / sumBlock; !have[uint64(1000+i)] && (int64(8+8*b*sumBlock) > c.at+int64(len(c.data)) || int64(8+8*(b+1)*sumBlock) <= c.at) {
					t.Errorf("id %d, in a block the damage did not touch, was dropped", i)
				}
			}
			addCommit(t, l, 500, 530)
			l.Close()
			if _, hashes2, w, err := OpenCheckedIDLog(path); err != nil || w != "" || len(hashes2) != len(hashes)+30 {
				t.Fatalf("reopened: %d ids, warning %q, %v", len(hashes2), w, err)
			}
		})
	}

	// An earlier pipe's log: no checksums yet.
	path := filepath.Join(t.TempDir(), "done.ids")
	l, _, err := OpenIDLog(path)
	if err != nil {
		t.Fatal(err)
	}
	addCommit(t, l, 0, 100)
	l.Close()
	l, hashes, w, err := OpenCheckedIDLog(path)
	if err != nil || w != "" || len(hashes) != 100 {
		t.Fatalf("an old log: %d ids, %q, %v", len(hashes), w, err)
	}
	l.Close()
	f, _ := os.OpenFile(path, os.O_WRONLY, 0)
	f.WriteAt([]byte{1}, 8+8*50)
	f.Close()
	if _, _, w, _ := OpenCheckedIDLog(path); !strings.Contains(w, "is damaged") {
		t.Errorf("the old log, checksummed at its first checked open, let damage pass: %q", w)
	}
}
