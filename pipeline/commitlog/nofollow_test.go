package commitlog

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A symbolic link planted where a commit log (a journal) or its index goes
// makes Open fail, naming the path, and leaves the link's target as it was.
func TestOpenRefusesSymlinks(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "target")
	if err := os.WriteFile(target, []byte("precious\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "gen.jsonl")
	idOf := func(line []byte) (string, error) { return string(line), nil }
	for _, link := range []string{path, IndexPath(path)} {
		if err := os.Symlink(target, link); err != nil {
			t.Fatal(err)
		}
		_, err := openLookup(path, idOf)
		if !errors.Is(err, errSymlink) || !strings.Contains(err.Error(), link) {
			t.Errorf("Open with a link at %s: %v", link, err)
		}
		if data, _ := os.ReadFile(target); string(data) != "precious\n" {
			t.Fatalf("the target was written: %q", data)
		}
		os.Remove(link)
		os.Remove(path)
	}
	if _, _, err := OpenIDLog(filepath.Join(dir, "done.ids")); err != nil {
		t.Fatal(err)
	}
	os.Symlink(target, filepath.Join(dir, "done2.ids"))
	if _, _, err := OpenIDLog(filepath.Join(dir, "done2.ids")); !errors.Is(err, errSymlink) {
		t.Errorf("OpenIDLog through a link: %v", err)
	}
}
