package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/pipe-dev/pipe/internal/testenv"
	"github.com/pipe-dev/pipe/pipeline"
)

// docs/stages.md is what pipe stages --markdown prints: the stage
// reference is made from the kinds' Specs, never written by hand.
func TestStagesDocIsCurrent(t *testing.T) {
	var b bytes.Buffer
	if err := writeStagesMarkdown(&b, pipeline.DefaultRegistry, nil); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(testenv.RepoRoot(t), "docs", "stages.md")
	have, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(have, b.Bytes()) {
		t.Errorf("%s is not what pipe stages --markdown prints: run go run ./cmd/pipe stages --markdown > docs/stages.md", path)
	}
	for _, k := range pipeline.DefaultRegistry.Kinds() {
		if !bytes.Contains(have, []byte("\n## "+k+"\n")) {
			t.Errorf("docs/stages.md has no section for %s", k)
		}
	}
}
