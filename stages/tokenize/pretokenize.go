package tokenize

import (
	"sync"
	"unicode"
	"unicode/utf8"
)

// Character classes of the split pattern. Every rune is exactly one of
// letter (\p{L}), number (\p{N}), space (\s, Unicode White_Space as
// Oniguruma defines it) or other; newline marks \r and \n among the spaces.
const (
	clsOther  = 0
	clsLetter = 1
	clsNumber = 2
	clsSpace  = 4
	clsNL     = 8 | clsSpace
)

// bmpClass holds the class of every rune below 0x10000, built on first use
// (about a millisecond) so that classifying a rune is one load.
var (
	bmpClass     []uint8
	bmpClassOnce sync.Once
)

func initClasses() {
	bmpClassOnce.Do(func() {
		c := make([]uint8, 0x10000)
		for r := rune(0); r < 0x10000; r++ {
			c[r] = slowClass(r)
		}
		bmpClass = c
	})
}

func slowClass(r rune) uint8 {
	switch {
	case r == '\r' || r == '\n':
		return clsNL
	case unicode.IsLetter(r) || unicode.Is(onigL, r):
		return clsLetter
	case unicode.IsNumber(r) || unicode.Is(onigN, r):
		return clsNumber
	case unicode.Is(unicode.White_Space, r):
		return clsSpace
	}
	return clsOther
}

// next decodes the rune at s[i:], returning its class and byte length.
// Invalid UTF-8 is one byte of class other.
func next(s string, i int) (cls uint8, size int) {
	b := s[i]
	if b < utf8.RuneSelf {
		return bmpClass[b], 1
	}
	r, n := utf8.DecodeRuneInString(s[i:])
	if r < 0x10000 {
		if r == utf8.RuneError && n == 1 {
			return clsOther, 1
		}
		return bmpClass[r], n
	}
	return slowClass(r), n
}

// pieceEnd returns the end of the pre-token starting at s[i], implementing
// the pattern (leftmost-first alternation, as Oniguruma matches it):
//
//	(?i:'s|'t|'re|'ve|'m|'ll|'d) | [^\r\n\p{L}\p{N}]?\p{L}+ | \p{N}{1,digitsMax} |
//	 ?[^\s\p{L}\p{N}]+[\r\n]* | \s*[\r\n]+ | \s+(?!\S) | \s+
//
// Every rune is matched by some alternative, so pieces tile s.
func pieceEnd(s string, i int, digitsMax int) int {
	if s[i] == '\'' {
		if e := contraction(s, i); e > i {
			return e
		}
	}
	n := len(s)
	c0, n0 := next(s, i)
	// [^\r\n\p{L}\p{N}]?\p{L}+: j is where its letters begin after the
	// first, if there is one. Inline, not a call: most pieces are words.
	j := -1
	if c0 == clsLetter {
		j = i + n0
	} else if (c0 == clsOther || c0 == clsSpace) && i+n0 < n {
		if c1, n1 := next(s, i+n0); c1 == clsLetter {
			j = i + n0 + n1
		}
	}
	if j >= 0 {
		for j < n {
			c, sz := next(s, j)
			if c != clsLetter {
				break
			}
			j += sz
		}
		return j
	}
	switch c0 {
	case clsNumber: // \p{N}{1,digitsMax}
		return numberRunEnd(s, i+n0, digitsMax)
	case clsOther: // [^\s\p{L}\p{N}]+[\r\n]*
		return otherRunEnd(s, i+n0)
	}
	return spaceEnd(s, i)
}

// contraction returns the end of (?i:'s|'t|'re|'ve|'m|'ll|'d) at i, or i.
// U+017F (ſ) folds to s.
func contraction(s string, i int) int {
	n := len(s)
	if i+1 >= n || s[i] != '\'' {
		return i
	}
	switch s[i+1] | 0x20 {
	case 's', 't', 'm', 'd':
		return i + 2
	case 'r', 'v':
		if i+2 < n && s[i+2]|0x20 == 'e' {
			return i + 3
		}
	case 'l':
		if i+2 < n && s[i+2]|0x20 == 'l' {
			return i + 3
		}
	}
	if i+2 < n && s[i+1] == 0xC5 && s[i+2] == 0xBF {
		return i + 3
	}
	return i
}

// numberRunEnd is the end of \p{N}{1,digitsMax} whose first number ends
// at j.
func numberRunEnd(s string, j int, digitsMax int) int {
	for k := 1; k < digitsMax && j < len(s); k++ {
		c, sz := next(s, j)
		if c != clsNumber {
			break
		}
		j += sz
	}
	return j
}

// otherRunEnd is the end of [^\s\p{L}\p{N}]*[\r\n]* at j: the rest of
// ` ?[^\s\p{L}\p{N}]+[\r\n]*` after its first other.
func otherRunEnd(s string, j int) int {
	for j < len(s) {
		c, sz := next(s, j)
		if c != clsOther {
			break
		}
		j += sz
	}
	for j < len(s) && (s[j] == '\r' || s[j] == '\n') {
		j++
	}
	return j
}

// spaceEnd is the end of the piece at the whitespace rune at i: `
// [^\s\p{L}\p{N}]+[\r\n]*` if it is a space before an other, else
// `\s*[\r\n]+|\s+(?!\S)|\s+`, whichever matches first.
func spaceEnd(s string, i int) int {
	n := len(s)
	if s[i] == ' ' && i+1 < n {
		if c1, n1 := next(s, i+1); c1 == clsOther {
			return otherRunEnd(s, i+1+n1)
		}
	}
	// s[i] starts a whitespace run W = s[i:j].
	lastNL := -1 // end of the last \r or \n in W
	lastStart := i
	j := i
	for j < n {
		c, sz := next(s, j)
		if c&clsSpace == 0 {
			break
		}
		if c == clsNL {
			lastNL = j + sz
		}
		lastStart = j
		j += sz
	}
	switch {
	case lastNL >= 0: // \s*[\r\n]+ ends at the last newline of the run
		return lastNL
	case j == n: // \s+(?!\S) at the end of the text takes the whole run
		return j
	case lastStart > i: // \s+(?!\S) leaves the last space to the next piece
		return lastStart
	default: // \s+: a single space before a non-space
		return j
	}
}
