package tokenize

import (
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"
)

// A preTokenizer splits a piece into the pieces the model encodes one by
// one (tokenizer.json "pre_tokenizer"), passing each, in order, to emit;
// empty pieces are dropped.
type preTokenizer interface {
	split(p piece, emit func(piece))
}

// preSequence applies its steps depth first: each piece of one step goes
// through the rest before the next piece (the same order as step by step,
// without the lists in between).
type preSequence []preTokenizer

func (s preSequence) split(p piece, emit func(piece)) {
	if len(s) == 0 {
		if p.s != "" {
			emit(p)
		}
		return
	}
	rest := s[1:]
	s[0].split(p, func(q piece) { rest.split(q, emit) })
}

// behavior is Hugging Face's SplitDelimiterBehavior: what becomes of the
// matched delimiters.
type behavior int

const (
	removed behavior = iota
	isolated
	mergedWithPrevious
	mergedWithNext
	contiguous
)

var behaviors = map[string]behavior{
	"Removed": removed, "Isolated": isolated, "MergedWithPrevious": mergedWithPrevious,
	"MergedWithNext": mergedWithNext, "Contiguous": contiguous,
}

type span struct {
	a, b  int
	match bool // a match of the pattern; for the result: to be removed
}

// splitBy is NormalizedString::split: the text is cut into the pattern's
// matches and the runs between them (find_matches), which behavior then
// keeps, drops or glues to a neighbour.
func splitBy(p piece, pat splitPattern, b behavior, invert bool, emit func(piece)) {
	if p.s == "" {
		return
	}
	for _, s := range applyBehavior(findSpans(p.s, pat, invert), b) {
		if !s.match && s.b > s.a {
			emit(p.slice(s.a, s.b))
		}
	}
}

// findSpans cuts s into the pattern's matches and the runs between them
// (find_matches); match is flipped with invert.
func findSpans(s string, pat splitPattern, invert bool) []span {
	var spans []span
	prev := 0
	for _, m := range pat.find(s, nil) {
		if prev != m[0] {
			spans = append(spans, span{prev, m[0], invert})
		}
		spans = append(spans, span{m[0], m[1], !invert})
		prev = m[1]
	}
	if prev != len(s) {
		spans = append(spans, span{prev, len(s), invert})
	}
	return spans
}

// applyBehavior keeps, drops (match left true) or glues spans to a
// neighbour as b says.
func applyBehavior(spans []span, b behavior) []span {
	switch b {
	case isolated:
		for i := range spans {
			spans[i].match = false
		}
	case contiguous:
		return mergeContiguous(spans)
	case mergedWithPrevious:
		return mergeWithPrevious(spans)
	case mergedWithNext:
		return mergeWithNext(spans)
	}
	return spans // removed
}

func mergeContiguous(spans []span) []span {
	var out []span
	previous := false
	for _, s := range spans {
		if s.match == previous && len(out) > 0 {
			out[len(out)-1].b = s.b
		} else {
			out = append(out, span{s.a, s.b, false})
		}
		previous = s.match
	}
	return out
}

func mergeWithPrevious(spans []span) []span {
	var out []span
	previous := false
	for _, s := range spans {
		if s.match && !previous && len(out) > 0 {
			out[len(out)-1].b = s.b
		} else {
			out = append(out, span{s.a, s.b, false})
		}
		previous = s.match
	}
	return out
}

func mergeWithNext(spans []span) []span {
	var out []span
	previous := false
	for i := len(spans) - 1; i >= 0; i-- {
		s := spans[i]
		if s.match && !previous && len(out) > 0 {
			out[len(out)-1].a = s.a
		} else {
			out = append(out, span{s.a, s.b, false})
		}
		previous = s.match
	}
	slices.Reverse(out)
	return out
}

// splitPre is the Split pre-tokenizer.
type splitPre struct {
	pattern  splitPattern
	behavior behavior
	invert   bool
}

func (s splitPre) split(p piece, emit func(piece)) {
	if s.behavior != isolated || s.invert {
		splitBy(p, s.pattern, s.behavior, s.invert, emit)
		return
	}
	// Isolated with a hand-made matcher: the matches and the runs between
	// them are the pieces, straight away.
	switch pat := s.pattern.(type) {
	case knownPattern:
		for i := 0; i < len(p.s); {
			j := pieceEnd(p.s, i, pat.digitsMax)
			emit(p.slice(i, j))
			i = j
		}
	case tiling:
		for i := 0; i < len(p.s); {
			j := pat(p.s, i)
			emit(p.slice(i, j))
			i = j
		}
	case matcher:
		gap := 0
		for i := 0; i < len(p.s); {
			if j := pat(p.s, i); j > i {
				if gap < i {
					emit(p.slice(gap, i))
				}
				emit(p.slice(i, j))
				i, gap = j, j
				continue
			}
			_, n := utf8.DecodeRuneInString(p.s[i:])
			i += n
		}
		if gap < len(p.s) {
			emit(p.slice(gap, len(p.s)))
		}
	default:
		splitBy(p, s.pattern, s.behavior, s.invert, emit)
	}
}

// gpt2Pattern is the ByteLevel pre-tokenizer's own split (use_regex), from
// tokenizers/src/pre_tokenizers/byte_level.rs.
const gpt2Pattern = `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+`

// byteLevelPre is the ByteLevel pre-tokenizer. Its byte-to-character
// mapping is not done here: a tokenizer with it encodes pieces as bytes
// (byteLevel in the model), which is the same thing.
type byteLevelPre struct {
	addPrefixSpace bool
	regex          *regexPattern // the GPT-2 split, with use_regex
}

func (bl byteLevelPre) split(p piece, emit func(piece)) {
	if bl.addPrefixSpace && !strings.HasPrefix(p.s, " ") {
		p = prepend{" "}.normalize(p)
	}
	if bl.regex == nil {
		if p.s != "" {
			emit(p)
		}
		return
	}
	splitBy(p, *bl.regex, isolated, false, emit)
}

// metaspace is the Metaspace pre-tokenizer: spaces become the replacement
// character (▁), one is prepended as prepend_scheme says, and with split the
// text is cut before each replacement character.
type metaspace struct {
	replacement rune
	scheme      string // "always", "first" or "never"
	splitOn     bool
}

func (m metaspace) split(p piece, emit func(piece)) {
	rep := string(m.replacement)
	p = replaceChar(p, ' ', rep)
	switch m.scheme {
	case "always":
		if !strings.HasPrefix(p.s, rep) {
			p = prepend{rep}.normalize(p)
		}
	case "first":
		if !strings.HasPrefix(p.s, rep) && p.origStart() == 0 {
			p = prepend{rep}.normalize(p)
		}
	}
	if !m.splitOn {
		if p.s != "" {
			emit(p)
		}
		return
	}
	splitBy(p, runeClass(func(c rune) bool { return c == m.replacement }), mergedWithNext, false, emit)
}

// digits is the Digits pre-tokenizer (char::is_numeric: Nd, Nl, No, by
// Rust's Unicode tables).
type digits struct{ individual bool }

func (d digits) split(p piece, emit func(piece)) {
	b := contiguous
	if d.individual {
		b = isolated
	}
	splitBy(p, runeClass(isNumericRust), b, false, emit)
}

// punctuation is the Punctuation pre-tokenizer: ASCII punctuation (which
// includes symbols such as $ + < = > ^ ` | ~) or Unicode category P as the
// unicode_categories crate has it (see unicode_rust.go).
type punctuation struct{ behavior behavior }

func isPunctuation(c rune) bool {
	if c < 0x80 {
		return c > ' ' && c < 0x7f && !(c >= '0' && c <= '9') && !(c >= 'a' && c <= 'z') && !(c >= 'A' && c <= 'Z')
	}
	return (unicode.IsPunct(c) && !unicode.Is(hfNotPunct, c)) || unicode.Is(hfPunctExtra, c)
}

func (pu punctuation) split(p piece, emit func(piece)) {
	splitBy(p, runeClass(isPunctuation), pu.behavior, false, emit)
}

// whitespaceSplit is the WhitespaceSplit pre-tokenizer: White_Space removed.
type whitespaceSplit struct{}

func (whitespaceSplit) split(p piece, emit func(piece)) {
	splitBy(p, runeClass(unicode.IsSpace), removed, false, emit)
}
