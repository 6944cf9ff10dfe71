package tokenize

import (
	"fmt"
	"math"
)

// stringTable is a read-only []string kept as one string and offsets: an
// entry costs 4 bytes instead of a 16-byte header and a heap object of its
// own. A tokenizer has two, of every id (151,669 for Qwen3): 4.9 MB of
// headers as []string.
type stringTable struct {
	blob string
	off  []uint32 // entry i is blob[off[i]:off[i+1]]
}

// packStrings packs ss, which it leaves as it is. Offsets are 4 bytes, so
// the strings may hold 4 GiB in all (a vocabulary holds a few MB).
func packStrings(ss []string) (stringTable, error) {
	n := 0
	for _, s := range ss {
		n += len(s)
	}
	if n > math.MaxUint32 {
		return stringTable{}, fmt.Errorf("%d bytes of tokens; at most %d", n, math.MaxUint32)
	}
	blob := make([]byte, 0, n)
	off := make([]uint32, 1, len(ss)+1)
	for _, s := range ss {
		blob = append(blob, s...)
		off = append(off, uint32(len(blob)))
	}
	return stringTable{blob: string(blob), off: off}, nil
}

// len is the number of entries.
func (t *stringTable) len() int { return len(t.off) - 1 }

// at is entry i.
func (t *stringTable) at(i int) string { return t.blob[t.off[i]:t.off[i+1]] }

// size is the length of entry i.
func (t *stringTable) size(i int) int { return int(t.off[i+1] - t.off[i]) }
