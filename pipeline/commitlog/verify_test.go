package commitlog

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// CheckLog: a log cut short is found by its size; a committed line
// changed in place (same length) by its id against the index.
func TestCheckLog(t *testing.T) {
	path := filepath.Join(t.TempDir(), "out.jsonl")
	idOf := func(line []byte) (string, error) { return string(line[:2]), nil }
	l, err := Open(path, idOf)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"a1", "b2", "c3"} {
		if err := l.Append(id, []byte(id+" some text")); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Commit(); err != nil {
		t.Fatal(err)
	}
	l.Close()
	if res, err := CheckLog(path, true, idOf); err != nil || len(res.Problems) > 0 || res.Rows != 3 {
		t.Fatalf("intact log: %+v, %v", res, err)
	}
	data, _ := os.ReadFile(path)
	os.WriteFile(path, []byte(strings.Replace(string(data), "b2", "x9", 1)), 0o644)
	if res, _ := CheckLog(path, false, idOf); len(res.Problems) > 0 {
		t.Fatalf("size check sees a same-size change: %v", res.Problems)
	}
	if res, _ := CheckLog(path, true, idOf); len(res.Problems) != 1 || !strings.Contains(res.Problems[0], "line 2") {
		t.Fatalf("changed line: %+v", res)
	}
	os.Truncate(path, 20)
	if res, _ := CheckLog(path, false, idOf); len(res.Problems) != 1 || !strings.Contains(res.Problems[0], "cut short") {
		t.Fatalf("cut log: %+v", res)
	}
}
