//go:build e2e

package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/pipe-dev/pipe/internal/testrig/testenv"
)

// docs/stages.md is what pipe stages --markdown prints: the stage
// reference is made from the kinds' Specs, never written by hand. The
// binary prints it (this test process also holds kinds that tests
// register).
func TestStagesDocIsCurrent(t *testing.T) {
	out, err := exec.Command(testenv.PipeBinary(t), "stages", "--markdown").Output()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(testenv.RepoRoot(t), "docs", "stages.md")
	have, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(have, out) {
		t.Errorf("%s is not what pipe stages --markdown prints: run go run ./cmd/pipe stages --markdown > docs/stages.md", path)
	}
	for _, k := range []string{"generate", "validate-thinking", "tokenize-and-mask", "write-jsonl", "write-arrow"} {
		if !bytes.Contains(have, []byte("\n## "+k+"\n")) {
			t.Errorf("docs/stages.md has no section for %s", k)
		}
	}
}
