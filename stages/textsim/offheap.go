package textsim

import (
	"fmt"
	"syscall"
	"unsafe"
)

// The near-duplicate index is large and holds no pointers: a few hundred
// bytes a kept prompt, hundreds of MB at a million. On the Go heap it
// would count in the collector's goal, which lets the heap grow to twice
// what is live before it collects, so the index would cost twice its size
// in RSS. It lives in anonymous mappings instead, outside the heap, freed
// by Close. (bench/hygiene.sh: 539 MB peak RSS with the index on the
// heap, see docs/prompt-hygiene.md for the figure now.)

// mapping is memory outside the Go heap, zeroed.
type mapping []byte

func newMapping(size int) (mapping, error) {
	b, err := syscall.Mmap(-1, 0, size, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE|syscall.MAP_ANON)
	if err != nil {
		return nil, fmt.Errorf("near-duplicate index: mapping %d bytes: %w", size, err)
	}
	return b, nil
}

func (m mapping) free() {
	if len(m) > 0 {
		syscall.Munmap(m)
	}
}

// words is m as 64-bit words.
func (m mapping) words() []uint64 {
	return unsafe.Slice((*uint64)(unsafe.Pointer(unsafe.SliceData(m))), len(m)/8)
}

// bandTable is one band's open-addressing hash table: a slot is a 32-bit
// key (the band's hash) above the kept text's ordinal + 1; 0 is empty.
// The key is its own position hash, so growing needs nothing but the
// slots. At most 3/4 full: a probe compares whole slots, never the texts.
type bandTable struct {
	m     mapping
	slots []uint64
	n     int
}

const minTableSlots = 1 << 12

// find returns the ordinal stored under key.
func (t *bandTable) find(key uint32) (ord uint32, ok bool) {
	if len(t.slots) == 0 {
		return 0, false
	}
	mask := uint32(len(t.slots) - 1)
	for i := key & mask; ; i = (i + 1) & mask {
		s := t.slots[i]
		switch {
		case s == 0:
			return 0, false
		case uint32(s>>32) == key:
			return uint32(s) - 1, true
		}
	}
}

// add stores ord under key unless key is taken (the first holder answers).
func (t *bandTable) add(key, ord uint32) error {
	if (t.n+1)*4 > len(t.slots)*3 {
		if err := t.grow(); err != nil {
			return err
		}
	}
	if t.put(uint64(key)<<32 | uint64(ord+1)) {
		t.n++
	}
	return nil
}

// put places slot s at its key's place, or reports false if the key is
// there already.
func (t *bandTable) put(s uint64) bool {
	key := uint32(s >> 32)
	mask := uint32(len(t.slots) - 1)
	for i := key & mask; ; i = (i + 1) & mask {
		switch {
		case t.slots[i] == 0:
			t.slots[i] = s
			return true
		case uint32(t.slots[i]>>32) == key:
			return false
		}
	}
}

func (t *bandTable) grow() error {
	size := max(minTableSlots, 2*len(t.slots))
	m, err := newMapping(size * 8)
	if err != nil {
		return err
	}
	old, oldMapping := t.slots, t.m
	t.m, t.slots = m, m.words()
	for _, s := range old {
		if s != 0 {
			t.put(s)
		}
	}
	oldMapping.free()
	return nil
}

func (t *bandTable) bytes() int64 { return int64(len(t.m)) }

func (t *bandTable) free() {
	t.m.free()
	*t = bandTable{}
}

// arena is fixed-size records appended end to end in chunks outside the
// heap (a chunk is never moved, so appending copies nothing).
type arena struct {
	size   int // bytes a record
	per    int // records a chunk
	chunks []mapping
	n      int
}

const arenaChunk = 16 << 20

func newArena(size int) *arena { return &arena{size: size, per: max(1, arenaChunk/size)} }

// add appends rec (len size).
func (a *arena) add(rec []byte) error {
	c, i := a.n/a.per, a.n%a.per
	if c == len(a.chunks) {
		m, err := newMapping(a.per * a.size)
		if err != nil {
			return err
		}
		a.chunks = append(a.chunks, m)
	}
	copy(a.chunks[c][i*a.size:], rec)
	a.n++
	return nil
}

// at is record i.
func (a *arena) at(i int) []byte {
	c, j := i/a.per, i%a.per
	return a.chunks[c][j*a.size : (j+1)*a.size]
}

func (a *arena) bytes() int64 { return int64(len(a.chunks)) * int64(a.per*a.size) }

func (a *arena) free() {
	for _, c := range a.chunks {
		c.free()
	}
	a.chunks, a.n = nil, 0
}
