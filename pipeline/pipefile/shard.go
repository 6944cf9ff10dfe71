package pipefile

import (
	"fmt"
	"math/bits"
	"path/filepath"
	"strconv"
	"strings"
)

// Shard is one of Count deterministic parts of a run's input: the records
// whose stable id hashes to Index. Every source keeps only its shard's
// records (the engine drops the others as skipped "other_shard"), so N
// shards run as N ordinary runs, each with its own run directory and
// outputs, together take every input record exactly once.
type Shard struct {
	Index, Count int
}

// MaxShards bounds a shard count: far beyond any cluster a run spans, and
// small enough that a shard's name keeps its four digits.
const MaxShards = 9999

// ShardHash names the function that assigns ids to shards. It is recorded
// in run.json, so a future change of it cannot silently mix two layouts.
const ShardHash = "fnv1a64-splitmix64"

// ParseShard reads "I/N": shard I (0-based) of N.
func ParseShard(s string) (Shard, error) {
	is, ns, ok := strings.Cut(strings.TrimSpace(s), "/")
	i, ierr := strconv.Atoi(strings.TrimSpace(is))
	n, nerr := strconv.Atoi(strings.TrimSpace(ns))
	switch {
	case !ok || ierr != nil || nerr != nil:
		return Shard{}, fmt.Errorf("shard must be \"I/N\" (shard I of N, counted from 0, e.g. \"3/16\"), got %q", s)
	case n < 1 || n > MaxShards:
		return Shard{}, fmt.Errorf("shard count must be 1..%d, got %d in %q", MaxShards, n, s)
	case i < 0 || i >= n:
		return Shard{}, fmt.Errorf("shard index must be 0..%d (counted from 0) for %d shards, got %d in %q", n-1, n, i, s)
	}
	return Shard{Index: i, Count: n}, nil
}

// String is "I/N", as ParseShard reads it.
func (s Shard) String() string { return fmt.Sprintf("%d/%d", s.Index, s.Count) }

// Name is the shard's path element, "shard-0003-of-0016": what ${shard}
// expands to and what is put into run directories, outputs and S3 prefixes
// that do not already name the shard.
func (s Shard) Name() string { return fmt.Sprintf("shard-%04d-of-%04d", s.Index, s.Count) }

// Owns reports whether the record with this id belongs to the shard.
func (s Shard) Owns(id string) bool { return ShardOf(id, s.Count) == s.Index }

// ShardOf is the shard (0..n-1) of an id among n: the high bits of a
// well-mixed 64-bit hash of the id, scaled to n (Lemire's multiply-shift),
// so it depends only on the id and n — not on file order, not on the
// machine — and is balanced for any n. It is independent of done.ids'
// hash (plain FNV-1a), whose buckets would otherwise line up with shards.
func ShardOf(id string, n int) int {
	h := uint64(14695981039346656037) // FNV-1a 64 offset basis
	for i := 0; i < len(id); i++ {
		h ^= uint64(id[i])
		h *= 1099511628211
	}
	// splitmix64's finalizer: every input bit reaches every output bit.
	h ^= h >> 30
	h *= 0xbf58476d1ce4e5b9
	h ^= h >> 27
	h *= 0x94d049bb133111eb
	h ^= h >> 31
	hi, _ := bits.Mul64(h, uint64(n))
	return int(hi)
}

// ShardPath puts the shard's name into an output path that does not name it
// yet, just above the output's own name: out/train.jsonl becomes
// out/shard-0003-of-0016/train.jsonl, so two writers' outputs stay apart
// and keep their names within each shard.
func (s Shard) ShardPath(p string) string {
	if p == "" || strings.Contains(p, s.Name()) {
		return p
	}
	dir, base := filepath.Split(filepath.Clean(p))
	return filepath.Join(dir, s.Name(), base)
}

// ShardPrefix appends the shard's name to a prefix (a run directory, an
// s3://bucket/prefix) that does not name it yet.
func (s Shard) ShardPrefix(p string) string {
	if p == "" || strings.Contains(p, s.Name()) {
		return p
	}
	return strings.TrimRight(p, "/") + "/" + s.Name()
}
