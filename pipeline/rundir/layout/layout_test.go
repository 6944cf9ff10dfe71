package layout

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// The run directory's names are spelled here only: no other Go source
// (tests aside) writes one as a literal, or joins a path with one of its
// folders' names.
func TestOneOwnerOfTheRunDirectory(t *testing.T) {
	names := regexp.MustCompile(`"(done\.ids|status\.json|run\.json|run\.log|detached\.log|timeline\.jsonl|report\.html)"`)
	joins := regexp.MustCompile(`Join\([^)]*"(journal|rejected|failed|uploads|out)"`)
	root, err := filepath.Abs("../../..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("not the repository root: %s", root)
	}
	own, _ := filepath.Abs(".")
	checked := 0
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if p == own || strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" || d.Name() == "bench" {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		checked++
		for i, line := range strings.Split(string(b), "\n") {
			if m := names.FindString(line); m != "" {
				t.Errorf("%s:%d: %s spelled outside package layout", p, i+1, m)
			}
			if m := joins.FindStringSubmatch(line); m != nil {
				t.Errorf("%s:%d: a path joined with %q outside package layout", p, i+1, m[1])
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked < 100 {
		t.Fatalf("only %d Go files checked: the walk missed the tree", checked)
	}
}
