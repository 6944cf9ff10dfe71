package textsim

import (
	"fmt"
	"math"
	"slices"
)

// MinHasher makes MinHash signatures: K hash functions over a text's
// shingles (word n-grams), the least value of each. Two texts' signatures
// agree in a position with probability equal to the Jaccard similarity of
// their shingle sets (Broder 1997). datatrove (minhash.py,
// MinhashDedupSignature.get_signature) permutes with (a·x+b) mod 2^61−1;
// here a is odd and the product is taken mod 2^64, its top 32 bits kept
// (multiply-shift hashing, Dietzfelbinger et al.), which needs no
// division. The a and b come from a fixed seed.
type MinHasher struct {
	a, b []uint64
}

// NewMinHasher returns a hasher of k functions.
func NewMinHasher(k int) *MinHasher {
	m := &MinHasher{a: make([]uint64, k), b: make([]uint64, k)}
	state := uint64(0x5eed_0f_7e57_5151) // fixed: signatures are the same in every process
	next := func() uint64 {
		state += 0x9e3779b97f4a7c15
		return mix(state)
	}
	for i := range k {
		m.a[i] = next() | 1
		m.b[i] = next()
	}
	return m
}

// K is the signature's length.
func (m *MinHasher) K() int { return len(m.a) }

// Signature sets sig (len K) to the signature of the shingles given by
// each (a function calling its argument once per shingle hash) and
// reports whether there was any shingle.
func (m *MinHasher) Signature(sig []uint32, each func(func(uint64))) bool {
	for i := range sig {
		sig[i] = math.MaxUint32
	}
	any := false
	a, b := m.a, m.b[:len(m.a)]
	each(func(x uint64) {
		any = true
		for i, ai := range a {
			if v := uint32((ai*x + b[i]) >> 32); v < sig[i] {
				sig[i] = v
			}
		}
	})
	return any
}

// LSH parameters: a signature of Bands×Rows values, cut into Bands bands
// of Rows; two signatures are candidates when any band agrees whole. A
// pair of Jaccard similarity s is a candidate with probability
// 1−(1−s^Rows)^Bands, an S curve whose steepest point is near
// (1/Bands)^(1/Rows) (Leskovec, Rajaraman, Ullman, Mining of Massive
// Datasets, §3.4).
type LSH struct {
	Bands, Rows int
}

// K is the signature length the bands need.
func (l LSH) K() int { return l.Bands * l.Rows }

// CandidateProbability is the chance a pair of similarity s is compared.
func (l LSH) CandidateProbability(s float64) float64 {
	return 1 - math.Pow(1-math.Pow(s, float64(l.Rows)), float64(l.Bands))
}

// Index holds the signatures of the texts kept so far and finds, for a new
// signature, the kept text most like it. Memory per kept text: one table
// slot a band (8 bytes, at a fill of 3/8 to 3/4), one byte a hash of the
// signature, and the text's id; the tables and signatures live outside
// the Go heap (offheap.go) until Close.
//
// A band's key is a 32-bit hash, so two different bands may share one;
// the candidate is then checked against its stored signature bytes, as it
// always is. A band whose key another text took first is not stored
// again: the first holder answers for it.
type Index struct {
	lsh       LSH
	threshold float64
	tables    []bandTable // a band's key → ordinal of the first kept text with it
	sigs      *arena      // K bytes a kept text: the low byte of each hash
	ids       []byte      // kept ids, end to end
	idEnds    []uint32    // ids[idEnds[i-1]:idEnds[i]] is kept text i's id
	keys      []uint32    // scratch: this query's band keys
	low       []byte      // scratch: this query's signature bytes
	seen      []uint32    // scratch: this query's candidates
	closed    int64       // Bytes when closed
}

// NewIndex returns an empty index: a text is judged a near duplicate of a
// kept one when their estimated similarity reaches threshold.
func NewIndex(lsh LSH, threshold float64) (*Index, error) {
	if lsh.Bands < 1 || lsh.Rows < 1 {
		return nil, fmt.Errorf("bands and rows must be at least 1 (got %d and %d)", lsh.Bands, lsh.Rows)
	}
	return &Index{lsh: lsh, threshold: threshold, tables: make([]bandTable, lsh.Bands), sigs: newArena(lsh.K()),
		keys: make([]uint32, lsh.Bands), low: make([]byte, lsh.K())}, nil
}

// Match is a kept text a query resembles.
type Match struct {
	ID         string
	Similarity float64 // estimated Jaccard similarity of the shingle sets
}

// Find returns the kept text most like sig (estimated similarity at least
// the threshold), or ok false.
func (x *Index) Find(sig []uint32) (m Match, ok bool) {
	x.prepare(sig)
	x.seen = x.seen[:0]
	best, bestSim := -1, -1.0
	for band, key := range x.keys {
		ord, hit := x.tables[band].find(key)
		if !hit || slices.Contains(x.seen, ord) {
			continue
		}
		x.seen = append(x.seen, ord)
		if s := similarity(x.low, x.sigs.at(int(ord))); s > bestSim {
			best, bestSim = int(ord), s
		}
	}
	if best < 0 || bestSim < x.threshold {
		return Match{}, false
	}
	return Match{ID: x.id(best), Similarity: bestSim}, true
}

// Add keeps sig under id: later texts are compared with it. An error is
// memory the system would not map.
func (x *Index) Add(sig []uint32, id string) error {
	ord := uint32(len(x.idEnds))
	x.prepare(sig)
	for band, key := range x.keys {
		if err := x.tables[band].add(key, ord); err != nil {
			return err
		}
	}
	if err := x.sigs.add(x.low); err != nil {
		return err
	}
	x.ids = append(x.ids, id...)
	x.idEnds = append(x.idEnds, uint32(len(x.ids)))
	return nil
}

// Len is the number of kept texts.
func (x *Index) Len() int { return len(x.idEnds) }

// Bytes is the index's memory: the tables and signatures as mapped, the
// ids as held.
func (x *Index) Bytes() int64 {
	if x.closed > 0 {
		return x.closed
	}
	n := x.sigs.bytes() + int64(cap(x.ids)+4*cap(x.idEnds))
	for i := range x.tables {
		n += x.tables[i].bytes()
	}
	return n
}

// Close frees the memory outside the heap: Find and Add may not be
// called after; Len and Bytes say what the index held.
func (x *Index) Close() {
	if x.closed == 0 {
		x.closed = x.Bytes()
	}
	for i := range x.tables {
		x.tables[i].free()
	}
	x.sigs.free()
}

func (x *Index) id(ord int) string {
	start := uint32(0)
	if ord > 0 {
		start = x.idEnds[ord-1]
	}
	return string(x.ids[start:x.idEnds[ord]])
}

// similarity estimates the Jaccard similarity of two signatures from the
// share of equal low bytes (b-bit minwise hashing, Li and König 2010):
// two unequal hashes still share a byte one time in 256, which the
// estimate takes out.
func similarity(a, b []byte) float64 {
	same := 0
	for i, v := range a {
		if v == b[i] {
			same++
		}
	}
	const chance = 1.0 / 256
	s := (float64(same)/float64(len(a)) - chance) / (1 - chance)
	return max(0, min(1, s))
}

// prepare sets x.keys to sig's band keys (each band's values and its
// place, hashed to 32 bits) and x.low to its low bytes.
func (x *Index) prepare(sig []uint32) {
	r := x.lsh.Rows
	for band := range x.lsh.Bands {
		h := uint64(band) + 1
		for _, v := range sig[band*r : band*r+r] {
			h = mix(h ^ uint64(v))
		}
		x.keys[band] = uint32(h ^ h>>32)
	}
	for i, v := range sig {
		x.low[i] = byte(v)
	}
}
