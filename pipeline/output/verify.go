package output

import (
	"context"
	"io"
)

// A writer owns its outputs: its Spec's Verify answers "what did I commit,
// and is it intact", for the check at the end of a run and for pipe verify,
// so neither knows a kind by name.
type VerifyFunc func(ctx context.Context, config any, env *VerifyEnv) (*Verified, error)

// VerifyEnv is what a Verify is given.
type VerifyEnv struct {
	StageID string
	RunDir  string // absolute; it may not exist (nothing ran yet)
	// Hash checks content (SHA-256 of local files, the server's checksum
	// or a download of remote ones), not only presence and size.
	Hash bool
	// Repair mends what can be mended from a good copy (an object missing
	// from a bucket is uploaded again from the local shard).
	Repair bool
	Log    io.Writer
	// Inputs are the results of the stages feeding this one, verified
	// first (an upload's writer: its shard directory).
	Inputs []*Verified
}

// Verified is what one output holds, as checked.
type Verified struct {
	Stage string
	Where string // the path or URL
	// Dir is a local shard directory (what an upload of it reads).
	Dir string
	// Items are the files or objects checked, Bytes their size; How what
	// was checked of each ("size, sha256").
	Items int
	Bytes int64
	How   string
	// Unit is what Items counts ("" is shards; "lines").
	Unit string
	// Problems each name a file or object and what is wrong with it;
	// Repaired what was mended (no longer a problem).
	Problems []string
	Repaired []string
	// Lost are the rows whose data is gone everywhere, by id (or id
	// hash): never written again after their shard was found damaged.
	Lost []string
	// Gone are local files (paths) that are missing but not damaged: the
	// output is whole if a copy elsewhere (Covers of another output) is.
	Gone []string
	// Covers are local files (paths) of which this output verified a
	// good copy (an upload's objects).
	Covers map[string]bool
}

// OK reports whether the output checked out.
func (v *Verified) OK() bool { return len(v.Problems) == 0 && len(v.Lost) == 0 }
