package tokenize

import (
	"hash/maphash"
	"math/bits"
	"strings"
	"sync"
	"sync/atomic"
)

// mergeTable maps a pair of ids (left, right) to (rank, merged id) with open
// addressing: one multiply and usually one probe per lookup, key and value
// in the same cache line, no allocation.
type mergeTable struct {
	slots []mergeSlot
	shift uint8
}

type mergeSlot struct {
	key uint64 // left<<32 | right, +1 so that 0 marks an empty slot
	val uint64 // rank<<32 | merged id
}

func (m *mergeTable) init(n int) {
	size := 1 << bits.Len(uint(n+n/2)) // load factor <= 2/3
	m.slots = make([]mergeSlot, size)
	m.shift = uint8(64 - bits.TrailingZeros(uint(size)))
}

func (m *mergeTable) slot(k uint64) uint64 { return (k * 0x9E3779B97F4A7C15) >> m.shift }

func (m *mergeTable) put(a, b, rank, id int32) {
	k := uint64(uint32(a))<<32 | uint64(uint32(b)) + 1
	mask := uint64(len(m.slots) - 1)
	for i := m.slot(k); ; i = (i + 1) & mask {
		if s := &m.slots[i]; s.key == 0 || s.key == k {
			s.key = k
			s.val = uint64(uint32(rank))<<32 | uint64(uint32(id))
			return
		}
	}
}

// get returns the rank and merged id of the pair, if it merges.
func (m *mergeTable) get(a, b int32) (rank, id int32, ok bool) {
	k := uint64(uint32(a))<<32 | uint64(uint32(b)) + 1
	mask := uint64(len(m.slots) - 1)
	for i := m.slot(k); ; i = (i + 1) & mask {
		s := &m.slots[i]
		switch s.key {
		case k:
			return int32(s.val >> 32), int32(uint32(s.val)), true
		case 0:
			return 0, 0, false
		}
	}
}

const noMerge = int32(1<<31 - 1)

// bpeScratch is per-call working memory, pooled so that encoding a word does
// not allocate.
type bpeScratch struct {
	sym   []int32
	rank  []int32
	merge []int32
	prev  []int32
	next  []int32
	heap  []uint64
	out   []int32 // a word's ids, before they are cached and copied out
	// pairRank: pair ranks for the character-level scan (which keeps symbol
	// lengths in rank).
	pairRank []int32
}

var scratchPool = sync.Pool{New: func() any { return new(bpeScratch) }}

// longWord is the length from which merging uses a heap (O(n log n)) instead
// of rescanning the pairs after each merge (O(n²), faster for short words).
const longWord = 48

// bpe appends to out the ids of word (raw bytes, one pre-token) after
// applying merges lowest rank first, leftmost first among equal ranks —
// the order Hugging Face's BPE model uses.
func (t *Tokenizer) bpe(word string, out []int32, sc *bpeScratch) []int32 {
	if len(word) == 1 {
		return append(out, t.byteID[word[0]])
	}
	if t.ignoreMerges {
		if id, ok := t.vocab.get(byteLevelEncode(word)); ok {
			return append(out, int32(id))
		}
	}
	if len(word) >= longWord {
		return t.bpeHeap(word, out, sc)
	}
	return t.bpeScan(word, out, sc)
}

// bpeScan is bpe for short words: after each merge, rescan the pair ranks.
func (t *Tokenizer) bpeScan(word string, out []int32, sc *bpeScratch) []int32 {
	sym := sc.sym[:0]
	for i := 0; i < len(word); i++ {
		sym = append(sym, t.byteID[word[i]])
	}
	// rank[i], merge[i]: the merge of the pair (sym[i], sym[i+1]).
	rank := sc.rank[:0]
	merge := sc.merge[:0]
	for i := 0; i+1 < len(sym); i++ {
		r, id, ok := t.merges.get(sym[i], sym[i+1])
		if !ok {
			r = noMerge
		}
		rank = append(rank, r)
		merge = append(merge, id)
	}
	for len(sym) > 1 {
		best, bi := noMerge, -1
		for i, r := range rank {
			if r < best {
				best, bi = r, i
			}
		}
		if bi < 0 {
			break
		}
		sym[bi] = merge[bi]
		copy(sym[bi+1:], sym[bi+2:])
		sym = sym[:len(sym)-1]
		copy(rank[bi:], rank[bi+1:])
		rank = rank[:len(rank)-1]
		copy(merge[bi:], merge[bi+1:])
		merge = merge[:len(merge)-1]
		if bi > 0 {
			r, id, ok := t.merges.get(sym[bi-1], sym[bi])
			if !ok {
				r = noMerge
			}
			rank[bi-1], merge[bi-1] = r, id
		}
		if bi < len(rank) {
			r, id, ok := t.merges.get(sym[bi], sym[bi+1])
			if !ok {
				r = noMerge
			}
			rank[bi], merge[bi] = r, id
		}
	}
	sc.sym, sc.rank, sc.merge = sym, rank, merge
	return append(out, sym...)
}

// bpeHeap is bpe for long words: symbols in a linked list, candidate merges
// in a min-heap keyed by (rank, position); stale entries are skipped on pop.
func (t *Tokenizer) bpeHeap(word string, out []int32, sc *bpeScratch) []int32 {
	n := len(word)
	sym, prev, next := grow(sc.sym, n), grow(sc.prev, n), grow(sc.next, n)
	h := sc.heap[:0]
	for i := 0; i < n; i++ {
		sym[i] = t.byteID[word[i]]
		prev[i] = int32(i - 1)
		next[i] = int32(i + 1)
	}
	next[n-1] = -1
	for i := 0; i+1 < n; i++ {
		if r, _, ok := t.merges.get(sym[i], sym[i+1]); ok {
			h = heapPush(h, uint64(r)<<32|uint64(i))
		}
	}
	for len(h) > 0 {
		var top uint64
		top, h = heapPop(h)
		r, pos := int32(top>>32), int32(uint32(top))
		if sym[pos] < 0 || next[pos] < 0 {
			continue // merged away, or now the last symbol
		}
		nx := next[pos]
		cr, id, ok := t.merges.get(sym[pos], sym[nx])
		if !ok || cr != r {
			continue // the pair changed since this entry was pushed
		}
		sym[pos] = id
		sym[nx] = -1
		next[pos] = next[nx]
		if next[nx] >= 0 {
			prev[next[nx]] = pos
		}
		if p := prev[pos]; p >= 0 {
			if r, _, ok := t.merges.get(sym[p], sym[pos]); ok {
				h = heapPush(h, uint64(r)<<32|uint64(p))
			}
		}
		if q := next[pos]; q >= 0 {
			if r, _, ok := t.merges.get(sym[pos], sym[q]); ok {
				h = heapPush(h, uint64(r)<<32|uint64(pos))
			}
		}
	}
	for i := int32(0); i >= 0; i = next[i] {
		out = append(out, sym[i])
	}
	sc.sym, sc.prev, sc.next, sc.heap = sym, prev, next, h
	return out
}

func grow(s []int32, n int) []int32 {
	if cap(s) < n {
		return make([]int32, n)
	}
	return s[:n]
}

func heapPush(h []uint64, v uint64) []uint64 {
	h = append(h, v)
	i := len(h) - 1
	for i > 0 {
		p := (i - 1) / 2
		if h[p] <= h[i] {
			break
		}
		h[p], h[i] = h[i], h[p]
		i = p
	}
	return h
}

func heapPop(h []uint64) (uint64, []uint64) {
	top := h[0]
	last := len(h) - 1
	h[0] = h[last]
	h = h[:last]
	i := 0
	for {
		l := 2*i + 1
		if l >= len(h) {
			break
		}
		m := l
		if r := l + 1; r < len(h) && h[r] < h[l] {
			m = r
		}
		if h[i] <= h[m] {
			break
		}
		h[i], h[m] = h[m], h[i]
		i = m
	}
	return top, h
}

func byteLevelEncode(word string) string {
	var sb strings.Builder
	for i := 0; i < len(word); i++ {
		sb.WriteRune(byteToRune[word[i]])
	}
	return sb.String()
}

// wordCache remembers the ids of recent words: a direct-mapped table of
// cacheSlots entries, each an atomic pointer, so lookups take no lock and
// goroutines never wait on each other; a new word replaces whatever shared
// its slot. Memory is bounded by cacheSlots words of at most maxCachedWord
// bytes.
type wordCache struct {
	seed  maphash.Seed
	slots []atomic.Pointer[cacheEntry]
}

type cacheEntry struct {
	word string
	ids  []int32
}

const (
	cacheSlots    = 1 << 16
	maxCachedWord = 64
)

func (c *wordCache) init() {
	c.seed = maphash.MakeSeed()
	c.slots = make([]atomic.Pointer[cacheEntry], cacheSlots)
}

func (c *wordCache) slot(word string) *atomic.Pointer[cacheEntry] {
	return &c.slots[maphash.String(c.seed, word)&(cacheSlots-1)]
}

func (c *wordCache) get(word string) ([]int32, bool) {
	if e := c.slot(word).Load(); e != nil && e.word == word {
		return e.ids, true
	}
	return nil, false
}

// put stores a copy of word (never a substring that would pin the caller's
// text); ids must not be modified afterwards.
func (c *wordCache) put(word string, ids []int32) {
	c.slot(word).Store(&cacheEntry{word: strings.Clone(word), ids: ids})
}
