package tokenize

import (
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// piece is a part of the input on its way through the general pipeline
// (normalizers, added tokens, pre-tokenizers), like Hugging Face's
// NormalizedString: its current text and, for each of its bytes, the byte
// range of the input it came from, so token offsets point into the input.
type piece struct {
	s string
	// orig[k] is the input range byte k of s came from; nil means s is
	// input[base:base+len(s)] unchanged.
	orig [][2]int32
	base int
	id   int // the added token this piece is, or -1
	// track: keep orig exact through transformations. Off (Encode without
	// offsets), a transformed piece's orig stays nil and base is where it
	// started: spans are then meaningless, which nothing reads.
	track bool
}

func textPiece(s string) piece { return piece{s: s, id: -1} }

// span is the input range byte k of p came from.
func (p *piece) span(k int) (int, int) {
	if p.orig == nil {
		return p.base + k, p.base + k + 1
	}
	return int(p.orig[k][0]), int(p.orig[k][1])
}

// spanOf is the input range bytes [i, j) of p came from; j > i.
func (p *piece) spanOf(i, j int) (int, int) {
	a, _ := p.span(i)
	_, b := p.span(j - 1)
	return a, b
}

// origStart is where p starts in the input (offsets_original().0).
func (p *piece) origStart() int {
	if len(p.s) == 0 {
		return p.base
	}
	a, _ := p.span(0)
	return a
}

func (p *piece) slice(i, j int) piece {
	q := piece{s: p.s[i:j], id: -1, track: p.track}
	if p.orig == nil {
		q.base = p.base + i
	} else {
		q.orig = p.orig[i:j]
		q.base = p.origStart()
	}
	return q
}

// rebuild accumulates a transformed piece; every byte appended carries the
// input range it stands for.
type rebuild struct {
	b     []byte
	orig  [][2]int32
	track bool
}

func newRebuild(p *piece) rebuild { return rebuild{b: make([]byte, 0, len(p.s)+8), track: p.track} }

func (r *rebuild) add(s string, from, to int) {
	r.b = append(r.b, s...)
	if !r.track {
		return
	}
	for range len(s) {
		r.orig = append(r.orig, [2]int32{int32(from), int32(to)})
	}
}

// addFrom appends p.s[i:j] unchanged, keeping each byte's own range.
func (r *rebuild) addFrom(p *piece, i, j int) {
	r.b = append(r.b, p.s[i:j]...)
	if !r.track {
		return
	}
	for k := i; k < j; k++ {
		a, b := p.span(k)
		r.orig = append(r.orig, [2]int32{int32(a), int32(b)})
	}
}

func (r *rebuild) piece(base int) piece {
	return piece{s: string(r.b), orig: r.orig, base: base, id: -1, track: r.track}
}

// A normalizer rewrites a piece's text (tokenizer.json "normalizer").
type normalizer interface {
	normalize(p piece) piece
}

type normSequence []normalizer

func (n normSequence) normalize(p piece) piece {
	for _, x := range n {
		p = x.normalize(p)
	}
	return p
}

// unicodeForm is NFC, NFD, NFKC or NFKD (golang.org/x/text/unicode/norm).
// Each normalization segment (a starter and its marks) that changes maps to
// the input range of the whole segment.
type unicodeForm struct{ form norm.Form }

func (n unicodeForm) normalize(p piece) piece {
	if n.form.IsNormalString(p.s) {
		return p
	}
	r := newRebuild(&p)
	// Characters Hugging Face does not decompose (hfNoDecomposition) are
	// kept, and the text between them normalized on its own.
	from := 0
	for i, c := range p.s {
		if c >= 0x32FF && unicode.Is(hfNoDecomposition, c) {
			n.normalizeRun(&p, from, i, &r)
			size := utf8.RuneLen(c)
			r.addFrom(&p, i, i+size)
			from = i + size
		}
	}
	n.normalizeRun(&p, from, len(p.s), &r)
	return r.piece(p.origStart())
}

func (n unicodeForm) normalizeRun(p *piece, from, to int, r *rebuild) {
	var it norm.Iter
	it.InitString(n.form, p.s[from:to])
	for !it.Done() {
		start := from + it.Pos()
		seg := it.Next()
		end := from + it.Pos()
		if string(seg) == p.s[start:end] {
			r.addFrom(p, start, end)
			continue
		}
		a, b := p.spanOf(start, end)
		r.add(string(seg), a, b)
	}
}

// lowercase is Rust's char::to_lowercase per character, as Hugging Face's
// Lowercase does: Unicode's simple mapping (Go's unicode.ToLower, plus the
// pairs newer than Go's tables) and the one unconditional special casing,
// U+0130 → "i̇"; no final-sigma rule.
type lowercase struct{}

func (lowercase) normalize(p piece) piece {
	changed := false
	for _, c := range p.s {
		if c == 0x130 || toLowerRust(c) != c {
			changed = true
			break
		}
	}
	if !changed {
		return p
	}
	r := newRebuild(&p)
	for i, c := range p.s {
		size := utf8.RuneLen(c)
		if c == utf8.RuneError {
			_, size = utf8.DecodeRuneInString(p.s[i:])
		}
		a, b := p.spanOf(i, i+size)
		switch l := toLowerRust(c); {
		case c == 0x130:
			r.add("i\u0307", a, b)
		case l != c:
			r.add(string(l), a, b)
		default:
			r.addFrom(&p, i, i+size)
		}
	}
	return r.piece(p.origStart())
}

// strip removes leading and/or trailing White_Space characters.
type strip struct{ left, right bool }

func (n strip) normalize(p piece) piece {
	i, j := 0, len(p.s)
	if n.left {
		for i < j {
			c, size := utf8.DecodeRuneInString(p.s[i:])
			if !unicode.IsSpace(c) {
				break
			}
			i += size
		}
	}
	if n.right {
		for j > i {
			c, size := utf8.DecodeLastRuneInString(p.s[i:j])
			if !unicode.IsSpace(c) {
				break
			}
			j -= size
		}
	}
	if i == 0 && j == len(p.s) {
		return p
	}
	return p.slice(i, j)
}

// replace replaces every match of a pattern (leftmost, non-overlapping) with
// content; the replacement stands for the matched input range.
type replace struct {
	pattern splitPattern
	content string
}

func (n replace) normalize(p piece) piece {
	matches := n.pattern.find(p.s, nil)
	if len(matches) == 0 {
		return p
	}
	r := newRebuild(&p)
	prev := 0
	for _, m := range matches {
		r.addFrom(&p, prev, m[0])
		if m[1] > m[0] {
			a, b := p.spanOf(m[0], m[1])
			r.add(n.content, a, b)
		}
		prev = m[1]
	}
	r.addFrom(&p, prev, len(p.s))
	return r.piece(p.origStart())
}

// prepend puts a string in front of a non-empty piece; it stands for the
// first character's input range.
type prepend struct{ s string }

func (n prepend) normalize(p piece) piece {
	if p.s == "" {
		return p
	}
	_, size := utf8.DecodeRuneInString(p.s)
	r := newRebuild(&p)
	a, b := p.spanOf(0, size)
	r.add(n.s, a, b)
	r.addFrom(&p, 0, len(p.s))
	return r.piece(p.origStart())
}

// replaceChar is Metaspace's space replacement: every old rune becomes new.
func replaceChar(p piece, old rune, new string) piece {
	if !strings.ContainsRune(p.s, old) {
		return p
	}
	r := newRebuild(&p)
	prev := 0
	for i, c := range p.s {
		if c != old {
			continue
		}
		size := utf8.RuneLen(c)
		r.addFrom(&p, prev, i)
		a, b := p.spanOf(i, i+size)
		r.add(new, a, b)
		prev = i + size
	}
	r.addFrom(&p, prev, len(p.s))
	return r.piece(p.origStart())
}
