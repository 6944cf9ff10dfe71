package tokenize

import (
	"strings"
	"unicode/utf8"
)

// charModel is the BPE model for tokenizers without a ByteLevel
// pre-tokenizer (SentencePiece-style files such as Llama 2 and Gemma):
// a word starts as one symbol per character, and characters outside the
// vocabulary become byte tokens (<0x41>, byte_fallback) or the unknown token.
// It follows BPE::merge_word in tokenizers/src/models/bpe/model.rs.
type charModel struct {
	charID       map[rune]int32 // the single-character tokens, when no prefix/suffix applies
	prefix       string         // continuing_subword_prefix for every character but the first
	suffix       string         // end_of_word_suffix for the last character
	byteFallback bool
	byteID       [256]int32 // <0xXX> tokens, -1 where missing
	unk          int32      // unk_token's id, or -1
	fuseUnk      bool
	cache        wordCache // ids followed by their lengths
	// splitAtMeta: a long word (Llama 2 and Gemma send whole paragraphs
	// to the model) is merged one "▁word" at a time, which gives the same
	// result wherever no merge can cross the boundary before a ▁: where no
	// merge result has the previous character followed by ▁ (unsafePrev
	// lists those that do: Gemma has ">▁</"). A character without a token
	// of its own stands as <0xXX> or the unknown token, so it counts as
	// their last character (fallbackSafe).
	splitAtMeta  bool
	unsafePrev   map[rune]bool
	fallbackSafe bool
}

const meta = '▁'

// noteMerge records the characters a merge result has right before a ▁.
func (m *charModel) noteMerge(merged string) {
	for k := 1; k < len(merged); k++ {
		if strings.HasPrefix(merged[k:], string(meta)) {
			if r, _ := utf8.DecodeLastRuneInString(merged[:k]); r != meta {
				m.unsafePrev[r] = true
			}
		}
	}
}

// charWords calls fn for word, or for each of its ▁words when splitAtMeta.
func (m *charModel) charWords(word string, fn func(w string)) {
	if !m.splitAtMeta {
		fn(word)
		return
	}
	start := 0
	prev := rune(-1)
	for i, r := range word {
		if r == meta && prev != meta && i > start {
			_, own := m.charID[prev]
			if (own && !m.unsafePrev[prev]) || (!own && m.fallbackSafe) {
				fn(word[start:i])
				start = i
			}
		}
		prev = r
	}
	fn(word[start:])
}

// symbols appends the initial symbols of word and their lengths in bytes of
// word. ok is false where Hugging Face fails the encoding (a character with
// no token, no byte fallback and no unknown token); Load refuses such files.
func (t *Tokenizer) charSymbols(word string, sym, lens []int32) ([]int32, []int32) {
	m := t.char
	unkID, unkLen := int32(-1), int32(0)
	affix := m.prefix != "" || m.suffix != ""
	var key []byte
	for i := 0; i < len(word); {
		c, size := utf8.DecodeRuneInString(word[i:])
		id, ok := int32(0), false
		var s string
		if !affix {
			if c != utf8.RuneError || size > 1 {
				id, ok = m.charID[c]
			}
			s = word[i : i+size]
		} else {
			key = m.affixed(key[:0], word, i, size)
			s = string(key)
			var v int
			v, ok = t.vocab.get(s)
			id = int32(v)
		}
		i += size
		if ok {
			if unkID >= 0 {
				sym, lens = append(sym, unkID), append(lens, unkLen)
				unkID = -1
			}
			sym, lens = append(sym, id), append(lens, int32(size))
			continue
		}
		if m.byteFallback && m.hasBytes(s) {
			// As in merge_word, a pending unknown token is not flushed
			// first: it lands after these bytes.
			for k := 0; k < len(s); k++ {
				sym, lens = append(sym, m.byteID[s[k]]), append(lens, 1)
			}
			continue
		}
		switch {
		case unkID >= 0 && m.fuseUnk:
			unkLen += int32(size)
		case unkID >= 0:
			sym, lens = append(sym, unkID), append(lens, unkLen)
			unkLen = int32(size)
		default:
			unkID, unkLen = m.unk, int32(size)
		}
	}
	if unkID >= 0 {
		sym, lens = append(sym, unkID), append(lens, unkLen)
	}
	return sym, lens
}

// affixed appends to key the character word[i:i+size] with the continuing
// prefix (not first) and the end-of-word suffix (last).
func (m *charModel) affixed(key []byte, word string, i, size int) []byte {
	if i > 0 {
		key = append(key, m.prefix...)
	}
	key = append(key, word[i:i+size]...)
	if i+size == len(word) {
		key = append(key, m.suffix...)
	}
	return key
}

// hasBytes reports whether every byte of s has a byte-fallback token.
func (m *charModel) hasBytes(s string) bool {
	for k := 0; k < len(s); k++ {
		if m.byteID[s[k]] < 0 {
			return false
		}
	}
	return true
}

// charBPE returns the ids of word and their lengths in bytes of word,
// cached; the slices must not be modified.
func (t *Tokenizer) charBPE(word string, sc *bpeScratch) (ids, lens []int32) {
	cacheable := len(word) <= maxCachedWord
	if cacheable {
		if v, ok := t.char.cache.get(word); ok {
			return v[:len(v)/2], v[len(v)/2:]
		}
	}
	if t.ignoreMerges {
		if id, ok := t.vocab.get(word); ok {
			ids, lens = []int32{int32(id)}, []int32{int32(len(word))}
			if cacheable {
				t.char.cache.put(word, append(ids, lens...))
			}
			return ids, lens
		}
	}
	sym, ln := t.charSymbols(word, sc.sym[:0], sc.rank[:0])
	sym, ln = t.mergeWithLens(sym, ln, sc)
	sc.sym, sc.rank = sym, ln
	v := make([]int32, 0, 2*len(sym))
	v = append(append(v, sym...), ln...)
	if cacheable {
		t.char.cache.put(word, v)
	}
	return v[:len(sym)], v[len(sym):]
}

// mergeWithLens applies the merges to symbols with lengths, lowest rank
// first and leftmost first among equal ranks (Word::merge_all), with the
// symbols in a linked list and candidate merges in a min-heap.
func (t *Tokenizer) mergeWithLens(sym, lens []int32, sc *bpeScratch) ([]int32, []int32) {
	n := len(sym)
	if n < 2 {
		return sym, lens
	}
	if n < longWord {
		return t.mergeScanWithLens(sym, lens, sc)
	}
	prev, next := grow(sc.prev, n), grow(sc.next, n)
	h := sc.heap[:0]
	for i := 0; i < n; i++ {
		prev[i] = int32(i - 1)
		next[i] = int32(i + 1)
	}
	next[n-1] = -1
	for i := 0; i+1 < n; i++ {
		h = t.pushMerge(h, sym, int32(i), int32(i+1))
	}
	for len(h) > 0 {
		var top uint64
		top, h = heapPop(h)
		r, pos := int32(top>>32), int32(uint32(top))
		if lens[pos] == 0 || next[pos] < 0 {
			continue
		}
		nx := next[pos]
		cr, id, ok := t.merges.get(sym[pos], sym[nx])
		if !ok || cr != r {
			continue
		}
		sym[pos] = id
		lens[pos] += lens[nx]
		lens[nx] = 0
		next[pos] = next[nx]
		if next[nx] >= 0 {
			prev[next[nx]] = pos
		}
		if p := prev[pos]; p >= 0 {
			h = t.pushMerge(h, sym, p, pos)
		}
		if q := next[pos]; q >= 0 {
			h = t.pushMerge(h, sym, pos, q)
		}
	}
	sc.prev, sc.next, sc.heap = prev, next, h
	k := 0
	for i := int32(0); i >= 0; i = next[i] {
		sym[k], lens[k] = sym[i], lens[i]
		k++
	}
	return sym[:k], lens[:k]
}

// pushMerge pushes the merge of symbols a and b (its right neighbour), if
// there is one, by rank then position.
func (t *Tokenizer) pushMerge(h []uint64, sym []int32, a, b int32) []uint64 {
	if r, _, ok := t.merges.get(sym[a], sym[b]); ok {
		h = heapPush(h, uint64(r)<<32|uint64(a))
	}
	return h
}

// mergeScanWithLens is mergeWithLens for short words: after each merge,
// rescan the pair ranks (the same order: lowest rank, then leftmost).
func (t *Tokenizer) mergeScanWithLens(sym, lens []int32, sc *bpeScratch) ([]int32, []int32) {
	rank := sc.pairRank[:0]
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
		lens[bi] += lens[bi+1]
		copy(sym[bi+1:], sym[bi+2:])
		sym = sym[:len(sym)-1]
		copy(lens[bi+1:], lens[bi+2:])
		lens = lens[:len(lens)-1]
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
	sc.pairRank, sc.merge = rank, merge
	return sym, lens
}
