// Package output is what a writer kind declares about its outputs
// (pipeline.Spec's Output, Verify and Replay): how to read back what it
// committed, how to verify it, and what a replay (pipe run --from) reads of
// an earlier run. Every command that looks at outputs goes through these,
// so none names a kind.
package output

import (
	"context"

	"github.com/pipe-dev/pipe/pipeline/record"
)

// Spec is how a writer kind reads back what it committed, given the
// path run.json records for the output (the stage's `path:"out"` or
// `path:"dir"` key, or an upload's prefix). Every command that looks at a
// run's outputs — pipe inspect, merge, export, verify, report and a replay
// (--from) — goes through it, so none of them knows a kind by name: a new
// writer kind is its own file (and its test).
type Spec struct {
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
	Files []File
	// Rows, Tokens and Bytes are over every file.
	Rows, Tokens, Bytes int64
}

// File is one committed file of an output. A file that is
// appended to (JSONL) is committed up to its first Bytes bytes: a live run
// may have written an uncommitted tail past them.
type File struct {
	Path   string
	Rows   int64
	Tokens int64
	Bytes  int64
	SHA256 string // "" when the writer keeps none
}
