package tokenize

import (
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/dlclark/regexp2"
)

// A splitPattern finds the matches of a Split, Replace or added-token
// pattern: leftmost, non-overlapping, in order, as byte ranges of s.
type splitPattern interface {
	find(s string, dst [][2]int) [][2]int
}

// literal is a {"String": ...} pattern: every occurrence of the string.
type literal string

func (l literal) find(s string, dst [][2]int) [][2]int {
	if l == "" {
		return dst
	}
	for i := 0; ; {
		k := strings.Index(s[i:], string(l))
		if k < 0 {
			return dst
		}
		dst = append(dst, [2]int{i + k, i + k + len(l)})
		i += k + len(l)
	}
}

// runeClass matches every single character for which f is true, as Hugging
// Face's char-predicate patterns do (Digits, Punctuation, Metaspace's split).
type runeClass func(rune) bool

func (f runeClass) find(s string, dst [][2]int) [][2]int {
	for i, c := range s {
		if f(c) {
			dst = append(dst, [2]int{i, i + utf8.RuneLen(c)})
		}
	}
	return dst
}

// knownPattern is one of the split patterns pretokenize.go implements by
// hand (Qwen2/Qwen3, Llama-3): its pieces tile the text.
type knownPattern struct{ digitsMax int }

func (k knownPattern) find(s string, dst [][2]int) [][2]int {
	for i := 0; i < len(s); {
		j := pieceEnd(s, i, k.digitsMax)
		dst = append(dst, [2]int{i, j})
		i = j
	}
	return dst
}

// regexPattern is any other {"Regex": ...} pattern. Hugging Face compiles
// these with Oniguruma; Go's regexp (RE2) has no look-around, which
// `\s+(?!\S)` in every GPT-style pattern needs, so they run on
// github.com/dlclark/regexp2 — a maintained backtracking engine with
// look-ahead/behind, Unicode classes (\p{L}, \p{Lu}, \p{M}, \p{P}, \p{S}...)
// and the same leftmost-first alternation as Oniguruma. Where the two differ
// on what the files use, compileRegex rewrites the pattern (see foldCase).
// The hand-made Qwen/Llama-3 matchers are several times faster, so they stay
// for their exact patterns; the tests check regexp2 agrees with them.
type regexPattern struct{ re *regexp2.Regexp }

func compileRegex(pattern string) (regexPattern, error) {
	re, err := regexp2.Compile(onigPattern(foldCase(pattern)), regexp2.None)
	if err != nil {
		return regexPattern{}, err
	}
	return regexPattern{re}, nil
}

func (p regexPattern) find(s string, dst [][2]int) [][2]int {
	if s == "" {
		return dst
	}
	runes := make([]rune, 0, len(s))
	offs := make([]int, 0, len(s)+1) // offs[k] is the byte offset of rune k
	for i := 0; i < len(s); {
		c, size := utf8.DecodeRuneInString(s[i:])
		runes = append(runes, c)
		offs = append(offs, i)
		i += size
	}
	offs = append(offs, len(s))
	m, err := p.re.FindRunesMatch(runes)
	lastEnd := -1
	for err == nil && m != nil {
		a, b := offs[m.Index], offs[m.Index+m.Length]
		// Like Oniguruma's iterator in the onig crate, an empty match right
		// where the previous match ended is not reported.
		if a != b || a != lastEnd {
			dst = append(dst, [2]int{a, b})
			lastEnd = b
		}
		m, err = p.re.FindNextMatch(m)
	}
	return dst
}

// foldCase rewrites the letters inside (?i: ... ) groups into classes of
// their whole Unicode case-folding orbit (the group stays case-insensitive): Oniguruma matches `(?i:'s)`
// against "'ſ" (U+017F folds to s) and `(?i:k)` against U+212A KELVIN SIGN;
// regexp2 compares lower-cased runes only. Letters in classes and escapes
// are left as they are.
func foldCase(pattern string) string {
	if !strings.Contains(pattern, "(?i") {
		return pattern
	}
	var sb strings.Builder
	depth := 0     // group nesting
	foldFrom := -1 // depth at which the current (?i: group opened, or -1
	inClass := false
	rs := []rune(pattern)
	for i := 0; i < len(rs); i++ {
		c := rs[i]
		switch {
		case c == '\\' && i+1 < len(rs):
			sb.WriteRune(c)
			sb.WriteRune(rs[i+1])
			i++
			continue
		case inClass:
			if c == ']' {
				inClass = false
			}
		case c == '[':
			inClass = true
			n := classOpenLen(rs, i)
			sb.WriteString(string(rs[i : i+n]))
			i += n - 1
			continue
		case c == '(':
			depth++
			if foldFrom < 0 && opensFold(rs, i) {
				foldFrom = depth
				sb.WriteString("(?i:")
				i += 3
				continue
			}
		case c == ')':
			if depth == foldFrom {
				foldFrom = -1
			}
			depth--
		case foldFrom >= 0 && unicode.IsLetter(c):
			sb.WriteString(orbitClass(c))
			continue
		}
		sb.WriteRune(c)
	}
	return sb.String()
}

// classOpenLen is 2 for "[]...]" (a literal ] first), else 1.
func classOpenLen(rs []rune, i int) int {
	if i+1 < len(rs) && rs[i+1] == ']' {
		return 2
	}
	return 1
}

func opensFold(rs []rune, i int) bool { return strings.HasPrefix(string(rs[i:]), "(?i:") }

// orbitClass is "[...]" of every rune that case-folds together with c.
func orbitClass(c rune) string {
	var sb strings.Builder
	sb.WriteByte('[')
	r := c
	for {
		sb.WriteRune(r)
		r = unicode.SimpleFold(r)
		if r == c {
			break
		}
	}
	sb.WriteByte(']')
	return sb.String()
}
