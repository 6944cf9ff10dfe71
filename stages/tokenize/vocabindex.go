package tokenize

import (
	"hash/maphash"
	"math/bits"
)

// vocabIndex maps a model token as written in tokenizer.json to its id:
// open addressing over ids, a token compared through tokens[id], so a slot
// is 4 bytes. The map[string]int it replaces held Qwen3's 151K tokens in
// 6.5 MB, which the collector's headroom doubles in RSS; the index takes
// 1 MB. A token whose id another token also has (tokenizer.json allows it)
// is in extra.
type vocabIndex struct {
	slots  []int32 // id+1; 0 marks an empty slot
	shift  uint8
	seed   maphash.Seed
	tokens stringTable // Tokenizer.tokens: id → token as written (shared, not copied)
	extra  map[string]int
}

// newVocabIndex indexes vocab, whose tokens tokens.at(id) holds (one of them
// for an id that several tokens share).
func newVocabIndex(vocab map[string]int, tokens stringTable) *vocabIndex {
	size := 1 << bits.Len(uint(len(vocab)+len(vocab)/2)) // load factor <= 2/3
	v := &vocabIndex{slots: make([]int32, size), shift: uint8(64 - bits.TrailingZeros(uint(size))), seed: maphash.MakeSeed(), tokens: tokens}
	mask := uint64(size - 1)
	for tok, id := range vocab {
		if tokens.at(id) != tok {
			if v.extra == nil {
				v.extra = map[string]int{}
			}
			v.extra[tok] = id
			continue
		}
		i := v.slot(tok)
		for v.slots[i] != 0 {
			i = (i + 1) & mask
		}
		v.slots[i] = int32(id) + 1
	}
	return v
}

func (v *vocabIndex) slot(tok string) uint64 {
	return maphash.String(v.seed, tok) >> v.shift
}

// get returns the id of tok.
func (v *vocabIndex) get(tok string) (int, bool) {
	mask := uint64(len(v.slots) - 1)
	for i := v.slot(tok); ; i = (i + 1) & mask {
		s := v.slots[i]
		if s == 0 {
			break
		}
		if id := int(s - 1); v.tokens.at(id) == tok {
			return id, true
		}
	}
	id, ok := v.extra[tok]
	return id, ok
}
