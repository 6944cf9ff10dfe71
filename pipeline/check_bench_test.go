package pipeline_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/pipe-dev/pipe/pipeline"
	"github.com/pipe-dev/pipe/pipeline/pipefile"
)

// hundredStages is a 100-stage pipeline: a source, 98 pass-throughs in a
// chain with fan-outs, and a sink merging the last ones.
func hundredStages() string {
	var b strings.Builder
	b.WriteString("[pipeline]\nname = \"big\"\n\n[[stage]]\nid = \"s0\"\nkind = \"count\"\nn = 10\n\n")
	for i := 1; i <= 98; i++ {
		fmt.Fprintf(&b, "[[stage]]\nid = \"s%d\"\nkind = \"pass\"\ninput = \"s%d\"\nworkers = %d\n\n", i, i-1, 1+i%4)
	}
	b.WriteString("[[stage]]\nid = \"sink\"\nkind = \"collect\"\ninput = [\"s98\"]\n")
	return b.String()
}

// BenchmarkCheck100Stages measures what `pipe check` does on a 100-stage
// file: parse with positions, decode every config, wire, sort, check fields.
func BenchmarkCheck100Stages(b *testing.B) {
	src := []byte(hundredStages())
	reg := testRegistry()
	for i := 0; i < b.N; i++ {
		f, probs := pipefile.Parse("big.toml", src, pipefile.Options{})
		if len(probs) > 0 {
			b.Fatal(probs)
		}
		if _, probs := pipeline.Build(f, reg); len(probs) > 0 {
			b.Fatal(probs)
		}
	}
}

func TestHundredStagesCheckClean(t *testing.T) {
	f, probs := pipefile.Parse("big.toml", []byte(hundredStages()), pipefile.Options{})
	if len(probs) > 0 {
		t.Fatal(probs)
	}
	p, probs := pipeline.Build(f, testRegistry())
	if len(probs) > 0 || len(p.Stages) != 100 {
		t.Fatalf("%d stages, problems: %v", len(p.Stages), probs)
	}
}
