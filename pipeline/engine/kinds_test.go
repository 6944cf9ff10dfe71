package engine_test

import (
	"strings"
	"testing"

	"github.com/pipe-dev/pipe/pipeline"
	"github.com/pipe-dev/pipe/pipeline/internal/testkinds"
	"github.com/pipe-dev/pipe/pipeline/pipefile"
	_ "github.com/pipe-dev/pipe/stages" // the real kinds; tests reuse some
)

// testRegistry is a registry of the test's own: the test kinds
// (pipeline/internal/testkinds) with the real read-prompts and write-jsonl.
func testRegistry() *pipeline.Registry {
	reg := pipeline.NewRegistry()
	reg.Register(*pipeline.DefaultRegistry.Lookup("read-prompts"))
	reg.Register(*pipeline.DefaultRegistry.Lookup("write-jsonl"))
	testkinds.Register(reg)
	return reg
}

// plan builds a plan from TOML text in dir; it fails the test on any problem.
func plan(t testing.TB, dir, src string) *pipeline.Plan {
	t.Helper()
	return planWith(t, dir, src, testRegistry())
}

// planWith is plan with the kinds of reg.
func planWith(t testing.TB, dir, src string, reg *pipeline.Registry) *pipeline.Plan {
	t.Helper()
	if !strings.Contains(src, "[pipeline]") {
		src = "[pipeline]\nrun_dir = \"run\"\n" + src
	}
	f, probs := pipefile.Parse(dir+"/test.toml", []byte(src), pipefile.Options{})
	if len(probs) > 0 {
		t.Fatal(probs)
	}
	p, probs := pipeline.Build(f, reg)
	if len(probs) > 0 {
		t.Fatal(probs)
	}
	return p
}

// sink is the collect stage of that id; the test fails if it never opened.
func sink(t testing.TB, id string) *testkinds.Collect {
	t.Helper()
	c, ok := testkinds.Sink(id)
	if !ok {
		t.Fatalf("sink %q never opened", id)
	}
	return c
}
