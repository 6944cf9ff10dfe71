package runreport

import (
	"slices"

	"github.com/pipe-dev/pipe/pipeline"
	"github.com/pipe-dev/pipe/pipeline/record"
)

// What the report needs to know of a stage kind, from its registered Spec
// (pipeline.DefaultRegistry), never from its name. A kind this binary does
// not register is unknown (known false).

// writesRows reports whether kind keeps an output of its own (it has a
// Verify) of the records it is fed: not one that copies other writers'
// shards elsewhere (it needs their shard field).
func writesRows(kind string) (rows, known bool) {
	s := pipeline.DefaultRegistry.Lookup(kind)
	if s == nil {
		return false, false
	}
	return s.Verify != nil && !s.Source && !slices.Contains(s.Needs, record.FieldShard), true
}

// generates reports whether kind makes completions at a cost (Spec.Expensive).
func generates(kind string) bool {
	s := pipeline.DefaultRegistry.Lookup(kind)
	return s != nil && s.Expensive
}

func writesRowsOf(kind string) bool {
	rows, _ := writesRows(kind)
	return rows
}
