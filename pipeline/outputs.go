package pipeline

import (
	"context"
	"fmt"

	"github.com/pipe-dev/pipe/pipeline/record"
)

// OutputSpec is how a writer kind reads back what it committed, given the
// path run.json records for the output (the stage's `path:"out"` or
// `path:"dir"` key, or an upload's prefix). Every command that looks at a
// run's outputs — pipe inspect, merge, export, verify, report and a replay
// (--from) — goes through it, so none of them knows a kind by name: a new
// writer kind is its own file (and its test).
type OutputSpec struct {
	// Committed lists what the output at path committed, from the
	// writer's own record of it (a manifest, a commit index), without
	// reading the data. It returns nil, nil when nothing is committed yet.
	Committed func(path string) (*Committed, error)
	// IDs returns the hashes (commitlog.Hash) of the ids of the committed
	// rows, in commit order: what pipe merge checks for an id in two
	// shards. Its memory is 8 bytes a row.
	IDs func(path string) ([]uint64, error)
	// Each calls fn with every committed record, in order, holding a
	// bounded part of the output at a time (a line, a row group), never
	// the whole of it. It stops at fn's first error and returns it.
	Each func(ctx context.Context, path string, fn func(*record.Record) error) error
	// Claims reports whether path, named alone (pipe export PATH, pipe
	// inspect PATH), is an output of this kind. Optional.
	Claims func(path string) bool
	// CopyOf is set by a kind that copies other writers' committed files
	// elsewhere (upload-s3) instead of writing rows of its own: where the
	// file at file, of the output in the directory fromDir, is put, under
	// dest (this output's recorded path). Such a kind has no Committed.
	CopyOf func(dest, fromDir, file string) string
}

// Committed is what one output holds, as its writer recorded it.
type Committed struct {
	// Format is what the files are ("jsonl", "parquet", "arrow"), as a
	// reader of another program needs to know it.
	Format string
	// Unit is what a file holds ("shards", "lines"), for display.
	Unit  string
	Files []CommittedFile
	// Rows, Tokens and Bytes are over every file.
	Rows, Tokens, Bytes int64
}

// CommittedFile is one committed file of an output. A file that is
// appended to (JSONL) is committed up to its first Bytes bytes: a live run
// may have written an uncommitted tail past them.
type CommittedFile struct {
	Path   string
	Rows   int64
	Tokens int64
	Bytes  int64
	SHA256 string // "" when the writer keeps none
}

// Output returns how kind reads back its committed output, or nil: kind
// keeps no output of its own (or is not registered).
func (r *Registry) Output(kind string) *OutputSpec {
	if s := r.Lookup(kind); s != nil {
		return s.Output
	}
	return nil
}

// OutputOf is DefaultRegistry.Output(kind).
func OutputOf(kind string) *OutputSpec { return DefaultRegistry.Output(kind) }

// HoldsRecords reports whether kind is a writer whose output holds records
// that Each reads back (completions, training rows): what pipe export
// exports and the run report reads rows from. An upload holds copies of
// another output's files, not records of its own.
func HoldsRecords(kind string) bool {
	o := OutputOf(kind)
	return o != nil && o.Each != nil
}

// OutputAt returns the kind whose output path is, of those in r that say
// (OutputSpec.Claims), in kind order; "" and nil when none does.
func (r *Registry) OutputAt(path string) (string, *OutputSpec) {
	for _, k := range r.Kinds() {
		if o := r.Output(k); o != nil && o.Claims != nil && o.Claims(path) {
			return k, o
		}
	}
	return "", nil
}

// EachCommitted calls fn with every committed record of the output of
// kind at path (OutputSpec.Each); an error when kind holds no records.
func (r *Registry) EachCommitted(ctx context.Context, kind, path string, fn func(*record.Record) error) error {
	o := r.Output(kind)
	if o == nil || o.Each == nil {
		return fmt.Errorf("%s: a %s output holds no records to read", DisplayPath(path), kind)
	}
	return o.Each(ctx, path, fn)
}
