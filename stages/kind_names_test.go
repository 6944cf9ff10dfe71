package stages

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/pipe-dev/pipe/pipeline"
)

// TestNoKindNameOutsideStages: no Go file outside stages/ (tests aside)
// holds a string that is a registered kind's name, or the start of one
// ("write-"): what a kind is, its Spec says (Output, Verify, Replay,
// Expensive, ...).
func TestNoKindNameOutsideStages(t *testing.T) {
	kinds := map[string]bool{}
	prefixes := map[string]bool{}
	for _, k := range pipeline.DefaultRegistry.Kinds() {
		kinds[k] = true
		if i := strings.Index(k, "-"); i > 0 {
			prefixes[k[:i+1]] = true
		}
	}
	root := filepath.Join("..")
	found := map[string][]string{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if d.IsDir() {
			if rel == "stages" || rel == ".cache" || strings.HasPrefix(d.Name(), ".") && rel != "." || d.Name() == "testdata" || d.Name() == "node_modules" {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			lit, ok := n.(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING {
				return true
			}
			if s, err := strconv.Unquote(lit.Value); err == nil && (kinds[s] || prefixes[s]) {
				found[filepath.ToSlash(rel)] = append(found[filepath.ToSlash(rel)], strconv.Quote(s))
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	files := make([]string, 0, len(found))
	for f := range found {
		files = append(files, f)
	}
	sort.Strings(files)
	for _, f := range files {
		t.Errorf("%s names the kind %s: ask its Spec instead (pipeline.OutputOf, HoldsRecords, Spec.Replay, Spec.Expensive)", f, strings.Join(found[f], ", "))
	}
	if len(kinds) == 0 {
		t.Fatal("no kind registered")
	}
}
