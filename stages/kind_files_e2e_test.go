//go:build e2e

package stages

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pipe-dev/pipe/pipeline"
)

// A kind is its own files: KIND.go (its Spec, config and stage) and
// KIND_*.go (its parts). Deleting them leaves every other kind compiling:
// what two kinds share lives in files named for what it does (text.go,
// prompt_lines.go, request_settings.go, early_checks.go, ...), never in
// one kind's file. Each kind's files are left out of a build of this
// package in turn (go build -overlay): 13 builds, so it is in the e2e
// layer.
func TestEachKindIsItsOwnFiles(t *testing.T) {
	dir, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	kinds := pipeline.DefaultRegistry.Kinds()
	if len(kinds) < 10 {
		t.Fatalf("%d kinds registered: %v", len(kinds), kinds)
	}
	for _, kind := range kinds {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			base := strings.ReplaceAll(kind, "-", "_")
			own, _ := filepath.Glob(filepath.Join(dir, base+"_*.go"))
			own = append(own, filepath.Join(dir, base+".go"))
			if _, err := os.Stat(own[len(own)-1]); err != nil {
				t.Fatalf("kind %s has no file %s.go", kind, base)
			}
			gone := map[string]string{}
			for _, f := range own {
				if !strings.HasSuffix(f, "_test.go") {
					gone[f] = ""
				}
			}
			b, _ := json.Marshal(map[string]any{"Replace": gone})
			overlay := filepath.Join(t.TempDir(), "overlay.json")
			if err := os.WriteFile(overlay, b, 0o644); err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command("go", "build", "-overlay="+overlay, ".")
			cmd.Dir = dir
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Errorf("without %s's %d files the package does not build: %v\n%s", kind, len(gone), err, out)
			}
		})
	}
}
