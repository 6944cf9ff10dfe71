package commitlog

import (
	"hash/fnv"
	"slices"
)

// Hash is the 64-bit hash of a record id that the index files store: FNV-1a,
// stable across processes and machines. A million ids collide with
// probability about 3e-8.
func Hash(id string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(id))
	return h.Sum64()
}

// Set is a set of id hashes: a sorted slice for what was loaded (8 bytes an
// id) and a map for what was added since. It is not safe for concurrent
// writes; readers may share a Set nobody adds to.
type Set struct {
	sorted []uint64
	added  map[uint64]struct{}
}

// NewSet returns a set holding hashes (which it takes and sorts).
func NewSet(hashes []uint64) *Set {
	slices.Sort(hashes)
	return &Set{sorted: slices.Compact(hashes), added: map[uint64]struct{}{}}
}

// Has reports whether h is in the set.
func (s *Set) Has(h uint64) bool {
	if _, ok := s.added[h]; ok {
		return true
	}
	_, ok := slices.BinarySearch(s.sorted, h)
	return ok
}

// Add adds h; it reports whether h was new.
func (s *Set) Add(h uint64) bool {
	if s.Has(h) {
		return false
	}
	s.added[h] = struct{}{}
	return true
}

// Len is the number of hashes in the set.
func (s *Set) Len() int { return len(s.sorted) + len(s.added) }
