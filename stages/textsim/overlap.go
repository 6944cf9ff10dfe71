package textsim

import (
	"slices"
	"strings"
)

// Overlap is an index of reference texts' word n-grams (a benchmark's
// questions), for finding a text that shares any of them: the test of
// GPT-3's appendix C and lm-evaluation-harness
// (lm_eval/decontamination/janitor.py), of datatrove
// (pipeline/decont/n_grams.py, NGramsDecontFilter) and of open-r1's
// scripts/decontaminate.py (PR #416, find_contaminated): one shared
// n-gram marks the text. A reference shorter than n words is matched only
// by a text whose whole normalised form equals it, since a short phrase
// ("write a haiku about autumn") is shared by texts that are not the
// benchmark's.
//
// A run of BoilerplateWords words found in Boilerplate or more reference
// texts is the benchmark's boilerplate ("please reason step by step, and put your final
// answer within \boxed{}"), not its content: training prompts carry the
// same instructions. An n-gram with a word of boilerplate in it marks
// nothing. lm-evaluation-harness (too_dirty_cutoff) and NeMo Curator
// (TaskDecontamination, max_matches) make the same cut at 10, counted on
// the training side.
//
// Memory: two map entries (16 bytes, about 18 with the map's fill) an
// n-gram; Bytes says how much.
type Overlap struct {
	n      int
	grams  map[uint64]uint64 // n-gram hash → the first reference text with it, | sharedGram if others have it too
	common map[uint64]uint32 // BoilerplateWords-gram hash → how many reference texts have it
	wholes map[uint64]uint32 // a short reference's whole-text hash → ordinal
	refs   []Ref
	norm   []byte
	hashes []uint64
	mine   []uint64 // scratch: one text's runs of BoilerplateWords
	boiler []bool   // scratch: which of a text's words are boilerplate
}

// Boilerplate is the number of reference texts from which a run of
// BoilerplateWords words is boilerplate. The run is shorter than the
// n-grams, so an instruction shorter than them is found too.
const (
	Boilerplate      = 10
	BoilerplateWords = 6
)

// Ref is where a reference text came from.
type Ref struct {
	Set string // the reference set's name
	Row int    // its row, from 1
}

// NewOverlap returns an empty index of n-grams of n words.
func NewOverlap(n int) *Overlap {
	return &Overlap{n: n, grams: map[uint64]uint64{}, common: map[uint64]uint32{}, wholes: map[uint64]uint32{}}
}

// Add indexes text as ref; an n-gram already indexed keeps its first
// reference. It reports whether text had any word.
func (o *Overlap) Add(text string, ref Ref) bool {
	o.norm = Normalize(o.norm[:0], text, false)
	o.hashes = WordHashes(o.hashes[:0], o.norm)
	if len(o.hashes) == 0 {
		return false
	}
	ord := uint32(len(o.refs))
	o.refs = append(o.refs, ref)
	if len(o.hashes) < o.n {
		h := wholeHash(o.hashes)
		if _, ok := o.wholes[h]; !ok {
			o.wholes[h] = ord
		}
		return true
	}
	NGrams(o.hashes, o.n, func(_ int, h uint64) {
		switch g, ok := o.grams[h]; {
		case !ok:
			o.grams[h] = uint64(ord)
		case uint32(g) != ord:
			o.grams[h] = g | sharedGram
		}
	})
	o.mine = o.mine[:0]
	NGrams(o.hashes, min(o.n, BoilerplateWords), func(_ int, h uint64) { o.mine = append(o.mine, h) })
	slices.Sort(o.mine)
	for _, h := range slices.Compact(o.mine) {
		o.common[h]++
	}
	return true
}

// Hit is a text's overlap with a reference.
type Hit struct {
	Ref
	// Span is the text's longest run of words shared with the reference
	// (normalised: lowercase, no punctuation), from its first shared n-gram.
	Span string
}

// Find returns the first reference text shares an n-gram with, or ok false.
func (o *Overlap) Find(text string) (hit Hit, ok bool) {
	o.norm = Normalize(o.norm[:0], text, false)
	o.hashes = WordHashes(o.hashes[:0], o.norm)
	if len(o.hashes) == 0 {
		return Hit{}, false
	}
	if ord, found := o.wholes[wholeHash(o.hashes)]; found {
		return Hit{Ref: o.refs[ord], Span: strings.TrimSpace(string(o.norm))}, true
	}
	if len(o.hashes) < o.n {
		return Hit{}, false
	}
	o.markBoilerplate()
	// The hit is the longest run of shared n-grams that one reference
	// explains: an n-gram in several references fits any run.
	var best, cur run
	NGrams(o.hashes, o.n, func(i int, h uint64) {
		g, found := o.grams[h]
		if !found || slices.Contains(o.boiler[i:i+o.n], true) {
			return
		}
		ord, shared := uint32(g), g&sharedGram != 0
		if cur.len == 0 || i != cur.first+cur.len || !shared && cur.fixed && ord != cur.ord {
			cur = run{first: i, ord: ord}
		}
		if !shared && !cur.fixed {
			cur.ord, cur.fixed = ord, true
		}
		cur.len++
		if best.len == 0 || cur.fixed && !best.fixed || cur.fixed == best.fixed && cur.len > best.len {
			best = cur
		}
	})
	if best.len == 0 {
		return Hit{}, false
	}
	return Hit{Ref: o.refs[best.ord], Span: o.words(best.first, best.first+best.len-1+o.n)}, true
}

// markBoilerplate sets o.boiler to which words of the text last
// normalised are under boilerplate: an n-gram touching one marks nothing.
func (o *Overlap) markBoilerplate() {
	o.boiler = slices.Grow(o.boiler[:0], len(o.hashes))[:len(o.hashes)]
	clear(o.boiler)
	w := min(o.n, BoilerplateWords)
	NGrams(o.hashes, w, func(i int, h uint64) {
		if o.common[h] >= Boilerplate {
			for j := i; j < i+w; j++ {
				o.boiler[j] = true
			}
		}
	})
}

// sharedGram marks an n-gram more than one reference text has.
const sharedGram = 1 << 32

// run is consecutive shared n-grams of a text: from its first, len of
// them, all in reference ord (fixed: some n-gram is in ord alone).
type run struct {
	first, len int
	ord        uint32
	fixed      bool
}

// words is normalised words [from, to) of the last text found or added.
func (o *Overlap) words(from, to int) string {
	var b strings.Builder
	i := 0
	Words(o.norm, func(_ int, w []byte) {
		if i >= from && i < to {
			if b.Len() > 0 {
				b.WriteByte(' ')
			}
			b.Write(w)
		}
		i++
	})
	return b.String()
}

// NGrams is the number of distinct n-grams indexed (and short texts).
func (o *Overlap) NGrams() int { return len(o.grams) + len(o.wholes) }

// Texts is the number of reference texts indexed.
func (o *Overlap) Texts() int { return len(o.refs) }

// Bytes is the index's memory, about.
func (o *Overlap) Bytes() int64 {
	return int64(len(o.grams)+len(o.common))*16*8/7 + int64(len(o.wholes))*16*8/7 + int64(len(o.refs))*24
}

func wholeHash(hashes []uint64) uint64 {
	h := uint64(0xa11)
	for _, w := range hashes {
		h = mix(h ^ w)
	}
	return h
}
