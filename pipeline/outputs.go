package pipeline

import (
	"context"
	"fmt"

	"github.com/pipe-dev/pipe/pipeline/output"
	"github.com/pipe-dev/pipe/pipeline/record"
)

// Output returns how kind reads back its committed output, or nil: kind
// keeps no output of its own (or is not registered).
func (r *Registry) Output(kind string) *output.Spec {
	if s := r.Lookup(kind); s != nil {
		return s.Output
	}
	return nil
}

// OutputOf is DefaultRegistry.Output(kind).
func OutputOf(kind string) *output.Spec { return DefaultRegistry.Output(kind) }

// HoldsRecords reports whether kind is a writer whose output holds records
// that Each reads back (completions, training rows): what pipe export
// exports and the run report reads rows from. An upload holds copies of
// another output's files, not records of its own.
func HoldsRecords(kind string) bool {
	o := OutputOf(kind)
	return o != nil && o.Each != nil
}

// OutputAt returns the kind whose output path is, of those in r that say
// (output.Spec.Claims), in kind order; "" and nil when none does.
func (r *Registry) OutputAt(path string) (string, *output.Spec) {
	for _, k := range r.Kinds() {
		if o := r.Output(k); o != nil && o.Claims != nil && o.Claims(path) {
			return k, o
		}
	}
	return "", nil
}

// EachCommitted calls fn with every committed record of the output of
// kind at path (output.Spec.Each); an error when kind holds no records.
func (r *Registry) EachCommitted(ctx context.Context, kind, path string, fn func(*record.Record) error) error {
	o := r.Output(kind)
	if o == nil || o.Each == nil {
		return fmt.Errorf("%s: a %s output holds no records to read", DisplayPath(path), kind)
	}
	return o.Each(ctx, path, fn)
}
