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
	modelFn     func(piece) // e.model, bound once
}

func (e *encoder) run(text string) {
	e.sc = scratchPool.Get().(*bpeScratch)
	defer scratchPool.Put(e.sc)
	t := e.t
	if t.pipe != nil {
		e.general(text)
		return
	}
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
		var j int
		if t.tile != nil {
			j = t.tile(s, i)
		} else {
			j = pieceEnd(s, i, t.digitsMax)
		}
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
				end := k + t.tokenBytes.size(int(id))
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

// general encodes text through the general pipeline, in the order of
// Hugging Face's encode: added tokens written as such (normalized=false)
// out of the input first; each piece between them normalized; normalized
// added tokens out of that; the rest pre-tokenized, and each resulting
// piece encoded by the model.
func (e *encoder) general(text string) {
	p := e.t.pipe
	var outer, inner [][3]int
	if e.modelFn == nil {
		e.modelFn = e.model
	}
	outer = p.raw.addedSplits(text, outer)
	for _, o := range outer {
		if o[2] >= 0 {
			e.emit(o[2], o[0], o[1])
			continue
		}
		seg := piece{s: text[o[0]:o[1]], base: o[0], id: -1, track: e.wantOffsets || p.needOrigins}
		if p.normalizer != nil {
			seg = p.normalizer.normalize(seg)
		}
		inner = p.norm.addedSplits(seg.s, inner[:0])
		for _, in := range inner {
			if in[2] >= 0 {
				a, b := seg.spanOf(in[0], in[1])
				e.emit(in[2], a, b)
				continue
			}
			sub := seg.slice(in[0], in[1])
			if p.pre != nil {
				p.pre.split(sub, e.modelFn)
			} else if sub.s != "" {
				e.model(sub)
			}
		}
	}
}

func (e *encoder) emit(id, start, end int) {
	e.ids = append(e.ids, id)
	if e.wantOffsets {
		e.offsets = append(e.offsets, [2]int{start, end})
	}
}

// model encodes one pre-tokenized piece.
func (e *encoder) model(q piece) {
	t := e.t
	if !t.byteLevel {
		k := 0
		t.char.charWords(q.s, func(w string) {
			ids, lens := t.charBPE(w, e.sc)
			for i, id := range ids {
				end := min(k+int(lens[i]), len(q.s))
				if e.wantOffsets {
					a, b := q.spanOf(min(k, end-1), end)
					e.emit(int(id), a, b)
				} else {
					e.ids = append(e.ids, int(id))
				}
				k = end
			}
		})
		return
	}
	word := q.s
	ids, ok := []int32(nil), false
	cacheable := len(word) <= maxCachedWord && len(word) > 1
	if cacheable {
		ids, ok = t.cache.get(word)
	}
	if !ok {
		e.sc.out = t.bpe(word, e.sc.out[:0], e.sc)
		ids = e.sc.out
		if cacheable {
			t.cache.put(word, append([]int32(nil), ids...))
		}
	}
	k := 0
	for _, id := range ids {
		if e.wantOffsets {
			end := k + t.tokenBytes.size(int(id))
			a, b := q.spanOf(k, end)
			e.emit(int(id), a, b)
			k = end
		} else {
			e.ids = append(e.ids, int(id))
		}
	}
}
