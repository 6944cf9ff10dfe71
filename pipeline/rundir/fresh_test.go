package rundir_test

import (
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/pipe-dev/pipe/pipeline/rundir"
)

func TestMoveAside(t *testing.T) {
	tests := []struct {
		name    string
		files   []string // created before (a trailing / makes a directory)
		outputs []string
		locked  bool     // the run directory is held by a Lock
		moved   []string // FROM of each "FROM → TO", in order
		left    []string // names that must still exist after
		wantErr bool
	}{
		{name: "nothing there", outputs: []string{"out.jsonl"}},
		{name: "run directory and outputs",
			files:   []string{"run/run.json", "run/rejected/gen.jsonl", "out.jsonl", ".out.jsonl.idx", "bad.jsonl", "other.jsonl"},
			outputs: []string{"out.jsonl", "bad.jsonl", "missing.jsonl", ""},
			moved:   []string{"run", "out.jsonl", ".out.jsonl.idx", "bad.jsonl"},
			left:    []string{"other.jsonl"}},
		{name: "output inside the run directory moves with it",
			files:   []string{"run/run.json", "run/out.jsonl"},
			outputs: []string{"run/out.jsonl"},
			moved:   []string{"run"}},
		{name: "an output that is a directory of parts",
			files:   []string{"parts/part-0001.jsonl"},
			outputs: []string{"parts", "parts"},
			moved:   []string{"parts"}},
		{name: "refused while a run holds the directory",
			files:   []string{"run/run.json", "out.jsonl"},
			outputs: []string{"out.jsonl"},
			locked:  true, wantErr: true,
			left: []string{"run/run.json", "out.jsonl"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			abs := func(name string) string { return filepath.Join(dir, name) }
			for _, f := range tt.files {
				if strings.HasSuffix(f, "/") {
					os.MkdirAll(abs(f), 0o755)
					continue
				}
				os.MkdirAll(filepath.Dir(abs(f)), 0o755)
				if err := os.WriteFile(abs(f), []byte(f), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			if tt.locked {
				l, err := rundir.Lock(abs("run"))
				if err != nil {
					t.Fatal(err)
				}
				defer l.Release()
			}
			var outputs []string
			for _, o := range tt.outputs {
				if o != "" {
					o = abs(o)
				}
				outputs = append(outputs, o)
			}

			moved, err := rundir.MoveAside(abs("run"), outputs)
			var busy *rundir.BusyError
			if tt.wantErr != errors.As(err, &busy) || (!tt.wantErr && err != nil) {
				t.Fatalf("err = %v, want a BusyError: %v", err, tt.wantErr)
			}
			if len(moved) != len(tt.moved) {
				t.Fatalf("moved %q, want %d moves of %q", moved, len(tt.moved), tt.moved)
			}
			re := regexp.MustCompile(`^(.*) → (.*)\.prev-(\d{8}T\d{6})$`)
			// An index follows its data file: .out.jsonl.idx → .out.jsonl.prev-TIME.idx.
			idxRe := regexp.MustCompile(`^(.*)\.idx → (.*)\.prev-(\d{8}T\d{6})\.idx$`)
			stamp := ""
			for i, m := range moved {
				sm := re.FindStringSubmatch(m)
				if ism := idxRe.FindStringSubmatch(m); ism != nil {
					sm = []string{m, ism[1] + ".idx", ism[2] + ".idx", ism[3]}
					if _, err := os.Lstat(ism[2] + ".prev-" + ism[3] + ".idx"); err != nil {
						t.Errorf("moved-aside index: %v", err)
					}
					if sm[1] == abs(tt.moved[i]) && sm[2] == sm[1] {
						stamp = ism[3]
						continue
					}
				}
				if sm == nil || sm[1] != abs(tt.moved[i]) || sm[2] != sm[1] {
					t.Errorf("move %q, want %s → %s.prev-TIME", m, abs(tt.moved[i]), abs(tt.moved[i]))
					continue
				}
				if stamp != "" && sm[3] != stamp {
					t.Errorf("moves use different times: %q", moved)
				}
				stamp = sm[3]
				if _, err := os.Lstat(sm[1]); err == nil {
					t.Errorf("%s still exists", sm[1])
				}
				if _, err := os.Lstat(sm[2] + ".prev-" + sm[3]); err != nil {
					t.Errorf("moved-aside copy: %v", err)
				}
			}
			for _, f := range tt.left {
				if _, err := os.Stat(abs(f)); err != nil {
					t.Errorf("%s: %v", f, err)
				}
			}
			// Nothing deleted: every file made is somewhere under dir.
			var all []string
			filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
				if err == nil && !d.IsDir() && filepath.Base(p) != rundir.LockFile {
					b, _ := os.ReadFile(p)
					all = append(all, string(b))
				}
				return nil
			})
			var want []string
			for _, f := range tt.files {
				if !strings.HasSuffix(f, "/") {
					want = append(want, f)
				}
			}
			sort.Strings(all)
			sort.Strings(want)
			if strings.Join(all, ",") != strings.Join(want, ",") {
				t.Errorf("files after: %q, want %q", all, want)
			}
		})
	}
}

// TestMoveAsideTwice: a second --fresh within the same second does not
// collide with the first.
func TestMoveAsideTwice(t *testing.T) {
	dir := t.TempDir()
	run, out := filepath.Join(dir, "run"), filepath.Join(dir, "out.jsonl")
	var tos []string
	for i := 0; i < 3; i++ {
		os.MkdirAll(run, 0o755)
		os.WriteFile(out, []byte("x"), 0o644)
		moved, err := rundir.MoveAside(run, []string{out})
		if err != nil || len(moved) != 2 {
			t.Fatalf("round %d: %q, %v", i, moved, err)
		}
		for _, m := range moved {
			_, to, _ := strings.Cut(m, " → ")
			tos = append(tos, to)
		}
	}
	seen := map[string]bool{}
	for _, to := range tos {
		if seen[to] {
			t.Errorf("two moves to %s", to)
		}
		seen[to] = true
		if _, err := os.Stat(to); err != nil {
			t.Error(err)
		}
	}
}
