package pipefile

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A pipeline file beyond the size, nesting or dotted-key limits is refused
// before the TOML decoder sees it (BurntSushi/toml is quadratic in both),
// with the position of the first place it goes beyond.
func TestTOMLLimits(t *testing.T) {
	deep := "[pipeline]\nname = \"x\"\n\n[vars]\nv = " + strings.Repeat("{a=", 100_000) + "1" + strings.Repeat("}", 100_000) + "\n"
	dotted := "[" + strings.Repeat("a.", 100_000) + "b]\n"
	for _, tc := range []struct {
		name, src, want string
	}{
		{"100K nested inline tables", deep, "p.toml:5:101: nested more than 32 levels deep"},
		{"100K nested arrays", "[vars]\nv = " + strings.Repeat("[", 100_000), "p.toml:2:37: nested more than 32 levels deep"},
		{"100K-part dotted header", dotted, "p.toml:1:65: a dotted key of more than 32 parts"},
		{"100K-part dotted key", "[vars]\n" + strings.Repeat("a.", 100_000) + "b = 1\n", "p.toml:2:64: a dotted key of more than 32 parts"},
		{"too many values", "[vars]\nv = [" + strings.Repeat("1,", MaxElements) + "1]\n", "p.toml:2:40001: more than 20000 keys, tables and values"},
		{"too large", "# " + strings.Repeat("x", MaxFileBytes) + "\n", "p.toml: larger than 1048576 bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "p.toml")
			if err := os.WriteFile(path, []byte(tc.src), 0o644); err != nil {
				t.Fatal(err)
			}
			_, probs := Load(path, Options{})
			if len(probs) != 1 || !strings.Contains(strings.ReplaceAll(probs.Error(), path, "p.toml"), tc.want) {
				t.Fatalf("got %v, want %q", probs, tc.want)
			}
		})
	}
}

// Brackets, braces and dots inside strings and comments do not count, and
// numbers' dots are not key parts: a legitimate file with deep-looking
// strings, floats, times and comments passes the limits.
func TestTOMLLimitsIgnoreStringsAndNumbers(t *testing.T) {
	src := "# [[[[ {{{{ a.b.c.d " + strings.Repeat(".", 100) + "\n" +
		"[vars]\n" +
		"s1 = \"" + strings.Repeat("[{.", 50) + "\\\" [[[ \"\n" +
		"s2 = '" + strings.Repeat("{", 50) + "'\n" +
		"s3 = \"\"\"\n" + strings.Repeat("[.", 50) + "\n\"\"\"\n" +
		"s4 = '''" + strings.Repeat("{.", 50) + "'''\n" +
		"f = [" + strings.Repeat("1.5, ", 60) + "2.25]\n" +
		"\"q.u.o.t.e.d\" = 1\n"
	if line, col, msg, ok := checkTOMLShape([]byte(src)); !ok {
		t.Fatalf("%d:%d: %s", line, col, msg)
	}
}

// Every pipeline file the project ships is well within the limits.
func TestShippedPipelinesWithinTOMLLimits(t *testing.T) {
	files, _ := filepath.Glob("../../pipelines/*.toml")
	if len(files) == 0 {
		t.Fatal("no pipelines/*.toml")
	}
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if line, col, msg, ok := checkTOMLShape(src); !ok {
			t.Errorf("%s:%d:%d: %s", f, line, col, msg)
		}
	}
}
