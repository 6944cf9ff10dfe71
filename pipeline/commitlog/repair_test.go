package commitlog_test

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/pipe-dev/pipe/pipeline/commitlog"
)

// An output a restart builds on, damaged while pipe was stopped: its index
// (a bad header, entries out of order) or its data (cut in the middle, a
// torn page). OpenRepaired rewrites it from its readable lines, keeps the
// damaged file aside, names the ids it lost, and the log goes on.
func TestOpenRepairedMendsADamagedLog(t *testing.T) {
	ids := make([]string, 40)
	for i := range ids {
		ids[i] = fmt.Sprintf("r%02d", i)
	}
	cases := []struct {
		name     string
		damage   func(path string)
		check    bool // the damage shows only when the lines are read
		wantLost int
	}{
		{"index header", func(p string) { overwrite(p, 0, "XXXXXXXX") }, false, 0},
		{"index entries out of order", func(p string) { overwrite(p, 8+16*5+8, "\x01\x00\x00\x00\x00\x00\x00\x00") }, false, 0},
		{"data cut in the middle", func(p string) {
			data, _ := os.ReadFile(p)
			os.WriteFile(p, append(data[:300:300], data[400:]...), 0o644)
		}, false, 3},
		{"a torn page in the data", func(p string) { overwrite(p, 500, strings.Repeat("\x00", 100)) }, true, 3},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "out.jsonl")
			l := open(t, path, lineID)
			appendAll(t, l, ids...)
			if err := l.Commit(); err != nil {
				t.Fatal(err)
			}
			mustClose(t, l)
			if strings.HasPrefix(c.name, "index") {
				c.damage(commitlog.IndexPath(path))
			} else {
				c.damage(path)
			}
			if !c.check {
				if _, err := commitlog.Open(path, lineID); err == nil {
					t.Fatal("Open did not notice the damage")
				}
			}
			l, rep, err := commitlog.OpenRepaired(path, lineID, false, c.check)
			if err != nil {
				t.Fatalf("OpenRepaired: %v", err)
			}
			if rep == nil {
				t.Fatal("OpenRepaired says nothing was wrong")
			}
			if len(rep.Lost) < c.wantLost || len(rep.Lost) > c.wantLost+1 || rep.Kept+len(rep.Lost) != len(ids) {
				t.Errorf("kept %d, lost %d of %d; want about %d lost", rep.Kept, len(rep.Lost), len(ids), c.wantLost)
			}
			msg := rep.String(path)
			for _, want := range []string{path + " was damaged", "set aside as " + path + ".damaged-"} {
				if !strings.Contains(msg, want) {
					t.Errorf("%q lacks %q", msg, want)
				}
			}
			for _, id := range ids {
				if !l.Has(id) && !slices.Contains(rep.Lost, commitlog.Hash(id)) {
					t.Errorf("%s is neither in the log nor named lost", id)
				}
			}
			appendAll(t, l, "new")
			if err := l.Commit(); err != nil {
				t.Fatal(err)
			}
			mustClose(t, l)
			res, err := commitlog.CheckLog(path, true, lineID)
			if err != nil || len(res.Problems) > 0 || res.Rows != rep.Kept+1 {
				t.Fatalf("the mended log checks as %+v, %v", res, err)
			}
			if _, rep, err := commitlog.OpenRepaired(path, lineID, false, true); err != nil || rep != nil {
				t.Fatalf("the mended log is damaged again: %+v %v", rep, err)
			}
		})
	}
}

func overwrite(path string, at int64, s string) {
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		panic(err)
	}
	defer f.Close()
	f.WriteAt([]byte(s), at)
}
