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

// Set is a fixed set of id hashes: a sorted slice (8 bytes an id) plus,
// for large sets, a 256 KiB table of where each top-16-bit bucket starts,
// so a look-up is a short search in one bucket. It never changes after
// NewSet, so any number of goroutines may read it.
type Set struct {
	sorted []uint64
	starts []int32 // bucket b is sorted[starts[b]:starts[b+1]]; nil for small sets
}

const bucketBits = 16

// NewSet returns a set holding hashes (which it takes and sorts).
func NewSet(hashes []uint64) *Set {
	slices.Sort(hashes)
	s := &Set{sorted: slices.Compact(hashes)}
	if len(s.sorted) > 1<<bucketBits {
		s.starts = make([]int32, 1<<bucketBits+1)
		b := 0
		for i, h := range s.sorted {
			for ; b <= int(h>>(64-bucketBits)); b++ {
				s.starts[b] = int32(i)
			}
		}
		for ; b <= 1<<bucketBits; b++ {
			s.starts[b] = int32(len(s.sorted))
		}
	}
	return s
}

// Has reports whether h is in the set.
func (s *Set) Has(h uint64) bool {
	sorted := s.sorted
	if s.starts != nil {
		b := h >> (64 - bucketBits)
		sorted = sorted[s.starts[b]:s.starts[b+1]]
	}
	_, ok := slices.BinarySearch(sorted, h)
	return ok
}

// Len is the number of hashes in the set.
func (s *Set) Len() int { return len(s.sorted) }
