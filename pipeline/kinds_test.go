package pipeline_test

import (
	"github.com/pipe-dev/pipe/pipeline"
	"github.com/pipe-dev/pipe/pipeline/internal/testkinds"
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
