package tokenize

import (
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// Encode returns the ids of text as Hugging Face's tokenizer.encode(text,
// add_special_tokens=False) does: added tokens written in the text
// ("<|im_start|>", "<think>") become their ids, longest match first; the rest
// is NFC-normalized, pre-tokenized and BPE-encoded. No special tokens are added.
func (t *Tokenizer) Encode(text string) []int {
	e := encoder{t: t, ids: make([]int, 0, len(text)/3+4)}
	e.run(text)
	return e.ids
}

// EncodeOffsets is Encode that also returns, for each id, the byte range
// [start, end) of text it came from. A token holding part of a multi-byte
// character covers just those bytes. Where NFC changed the text (a
// character and its combining marks), each token from the changed part
// covers all of that part, so two tokens may have the same range; elsewhere
// ranges tile text in order.
func (t *Tokenizer) EncodeOffsets(text string) (ids []int, offsets [][2]int) {
	e := encoder{t: t, ids: make([]int, 0, len(text)/3+4), offsets: make([][2]int, 0, len(text)/3+4), wantOffsets: true}
	e.run(text)
	return e.ids, e.offsets
}

type encoder struct {
	t           *Tokenizer
	ids         []int
	offsets     [][2]int
	wantOffsets bool
	sc          *bpeScratch
}

func (e *encoder) run(text string) {
	e.sc = scratchPool.Get().(*bpeScratch)
	defer scratchPool.Put(e.sc)
	t := e.t
	pos := 0
	for pos < len(text) {
		start, end, id := t.added.find(text, pos)
		if start < 0 {
			e.segment(text, pos, len(text))
			return
		}
		if start > pos {
			e.segment(text, pos, start)
		}
		e.ids = append(e.ids, id)
		if e.wantOffsets {
			e.offsets = append(e.offsets, [2]int{start, end})
		}
		pos = end
	}
}

// segment encodes text[from:to], which holds no added token.
func (e *encoder) segment(text string, from, to int) {
	seg := text[from:to]
	if !e.t.nfc || isNFC(seg) {
		e.pieces(seg, from, nil)
		return
	}
	normalized, origin := nfcWithOrigin(seg)
	e.pieces(normalized, from, origin)
}

// pieces pre-tokenizes s and BPE-encodes each piece. Offsets are s's byte
// positions plus base; with origin, normalized byte k came from
// seg[origin[k][0]:origin[k][1]] instead.
func (e *encoder) pieces(s string, base int, origin [][2]int32) {
	t := e.t
	for i := 0; i < len(s); {
		j := pieceEnd(s, i, t.digitsMax)
		word := s[i:j]
		var ids []int32
		cached := false
		if len(word) <= maxCachedWord && len(word) > 1 {
			ids, cached = t.cache.get(word)
		}
		if !cached {
			e.sc.out = t.bpe(word, e.sc.out[:0], e.sc)
			ids = e.sc.out
			if len(word) <= maxCachedWord && len(word) > 1 {
				t.cache.put(word, append([]int32(nil), ids...))
			}
		}
		k := i
		for _, id := range ids {
			e.ids = append(e.ids, int(id))
			if e.wantOffsets {
				end := k + len(t.tokenBytes[id])
				if origin == nil {
					e.offsets = append(e.offsets, [2]int{base + k, base + end})
				} else {
					e.offsets = append(e.offsets, [2]int{base + int(origin[k][0]), base + int(origin[end-1][1])})
				}
				k = end
			}
		}
		i = j
	}
}

// isNFC reports whether s is already NFC; pure ASCII is, cheaply.
func isNFC(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return norm.NFC.IsNormalString(s)
		}
	}
	return true
}

// nfcWithOrigin returns NFC(s) and, for each of its bytes, the byte range of
// s it came from: itself up to where normalization changed a segment (a
// character and its combining marks), the rest of the segment after that.
func nfcWithOrigin(s string) (string, [][2]int32) {
	var it norm.Iter
	it.InitString(norm.NFC, s)
	out := make([]byte, 0, len(s)+8)
	origin := make([][2]int32, 0, len(s)+8)
	for !it.Done() {
		start := it.Pos()
		seg := it.Next()
		end := it.Pos()
		out = append(out, seg...)
		// Bytes up to where the segment changed map to themselves; the rest
		// to the rest of the input segment (a starter followed by reordered
		// marks keeps the starter's own position).
		orig := s[start:end]
		p := 0
		for p < len(seg) && p < len(orig) && seg[p] == orig[p] {
			p++
		}
		for p > 0 && p < len(seg) && !utf8.RuneStart(seg[p]) {
			p--
		}
		for k := 0; k < p; k++ {
			origin = append(origin, [2]int32{int32(start + k), int32(start + k + 1)})
		}
		for k := p; k < len(seg); k++ {
			origin = append(origin, [2]int32{int32(start + p), int32(end)})
		}
	}
	return string(out), origin
}
