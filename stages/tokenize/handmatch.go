package tokenize

import (
	"sync"
	"unicode"
	"unicode/utf8"
)

// Hand-made matchers for the split patterns of gpt-oss (o200k) and
// DeepSeek-V3, chosen by exact pattern string like the Qwen/Llama-3 ones.
// regexp2 gets them right but spends ~3 µs a piece; these are what make the
// byte-level families several times faster than Hugging Face. They follow
// Oniguruma's leftmost-first, greedy-with-backtracking semantics alternative
// by alternative; TestHandMatchersAgreeWithRegexp2 checks them against
// regexp2 on the corpus and on every code point, and the family oracle
// tests against Hugging Face.
var handPatterns = map[string]splitPattern{
	// gpt-oss: tiktoken's o200k_base.
	"[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+": tiling(o200kEnd),
	// DeepSeek-V3's three splits.
	"\\p{N}{1,3}":  matcher(digitsUpTo3),
	"[一-龥぀-ゟ゠-ヿ]+": matcher(kanaHanRun),
	"[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+": matcher(deepseekAt),
}

// Unicode properties the patterns test, one bit each.
const (
	uLu  = 1 << iota // Lu or Lt
	uLl              // Ll
	uLmo             // Lm or Lo
	uM               // mark
	uN               // number
	uP               // punctuation
	uS               // symbol
	uWS              // White_Space (\s)
	uNL              // \r or \n
	uL   = uLu | uLl | uLmo
	uUp  = uLu | uLmo | uM // [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]
	uLow = uLl | uLmo | uM // [\p{Ll}\p{Lm}\p{Lo}\p{M}]
)

var (
	uniBMP     []uint16
	uniBMPOnce sync.Once
)

func slowUni(r rune) uint16 {
	c := categoryBits(r)
	if c == 0 && r >= 0x800 { // Unicode 16.0 additions (unicode_onig.go)
		c = onigCategoryBits(r)
	}
	if unicode.Is(unicode.White_Space, r) {
		c |= uWS
	}
	if r == '\r' || r == '\n' {
		c |= uNL
	}
	return c
}

// categoryBits is the bit of r's general category by Go's tables, 0 for
// the categories the patterns do not test.
func categoryBits(r rune) uint16 {
	switch {
	case unicode.In(r, unicode.Lu, unicode.Lt):
		return uLu
	case unicode.Is(unicode.Ll, r):
		return uLl
	case unicode.In(r, unicode.Lm, unicode.Lo):
		return uLmo
	case unicode.IsMark(r):
		return uM
	case unicode.IsNumber(r):
		return uN
	case unicode.IsPunct(r):
		return uP
	case unicode.IsSymbol(r):
		return uS
	}
	return 0
}

// onigCategoryBits is categoryBits for the runes Unicode 16.0 added,
// which Go's tables do not have yet and Oniguruma's do.
func onigCategoryBits(r rune) uint16 {
	switch {
	case unicode.In(r, onigLu):
		return uLu
	case unicode.In(r, onigLl):
		return uLl
	case unicode.In(r, onigLm, onigLo):
		return uLmo
	case unicode.In(r, onigM):
		return uM
	case unicode.In(r, onigN):
		return uN
	case unicode.In(r, onigP):
		return uP
	case unicode.In(r, onigS):
		return uS
	}
	return 0
}

// uni returns the properties of the rune at s[i:] and its size; invalid
// UTF-8 is one byte with none.
func uni(s string, i int) (uint16, int) {
	b := s[i]
	if b < utf8.RuneSelf {
		return uniBMP[b], 1
	}
	r, n := utf8.DecodeRuneInString(s[i:])
	if r == utf8.RuneError && n == 1 {
		return 0, 1
	}
	if r < 0x10000 {
		return uniBMP[r], n
	}
	return slowUni(r), n
}

func initUni() {
	uniBMPOnce.Do(func() {
		t := make([]uint16, 0x10000)
		for r := rune(0); r < 0x10000; r++ {
			t[r] = slowUni(r)
		}
		uniBMP = t
	})
}

// run returns the end of the longest run from i of runes with any of bits.
func run(s string, i int, bits uint16) int {
	for i < len(s) {
		c, n := uni(s, i)
		if c&bits == 0 {
			break
		}
		i += n
	}
	return i
}

// whitespaceEnd is `\s*[\r\n]+|\s+(?!\S)|\s+` at a White_Space rune at i.
func whitespaceEnd(s string, i int) int {
	lastNL, lastStart, j := -1, i, i
	for j < len(s) {
		c, n := uni(s, j)
		if c&uWS == 0 {
			break
		}
		if c&uNL != 0 {
			lastNL = j + n
		}
		lastStart = j
		j += n
	}
	switch {
	case lastNL >= 0:
		return lastNL
	case j == len(s):
		return j
	case lastStart > i:
		return lastStart
	}
	return j
}

// o200kEnd is the end of the o200k piece at s[i] (every rune starts one).
func o200kEnd(s string, i int) int {
	c0, n0 := uni(s, i)
	prefix := c0&(uL|uN|uNL) == 0 && i+n0 < len(s) // [^\r\n\p{L}\p{N}] before a rune
	// Alternative 1: X? [Up]* [Low]+ contraction?, with the prefix, then without.
	if prefix {
		if e := upLowEnd(s, i+n0); e >= 0 {
			return e
		}
	}
	if e := upLowEnd(s, i); e >= 0 {
		return e
	}
	// Alternative 2: X? [Up]+ [Low]* contraction?.
	if prefix {
		if e := upThenLowEnd(s, i+n0); e >= 0 {
			return e
		}
	}
	if e := upThenLowEnd(s, i); e >= 0 {
		return e
	}
	// \p{N}{1,3}
	if c0&uN != 0 {
		return digitsEnd(s, i, 3)
	}
	if e := o200kPunctEnd(s, i); e >= 0 {
		return e
	}
	return whitespaceEnd(s, i)
}

// upLowEnd is the end of [Up]* [Low]+ contraction? at k, or -1.
func upLowEnd(s string, k int) int {
	a := run(s, k, uUp)
	if a < len(s) {
		if c, _ := uni(s, a); c&uLow != 0 {
			e := run(s, a, uLow)
			return contraction(s, e)
		}
	}
	// Back off [Up]* to the last rune of it that is also in [Low].
	last := -1
	for p := k; p < a; {
		c, n := uni(s, p)
		if c&uLow != 0 {
			last = p + n
		}
		p += n
	}
	if last < 0 {
		return -1
	}
	return contraction(s, last)
}

// upThenLowEnd is the end of [Up]+ [Low]* contraction? at k, or -1.
func upThenLowEnd(s string, k int) int {
	a := run(s, k, uUp)
	if a == k {
		return -1
	}
	return contraction(s, run(s, a, uLow))
}

// o200kPunctEnd is the end of ` ?[^\s\p{L}\p{N}]+[\r\n/]*` at i, or -1.
func o200kPunctEnd(s string, i int) int {
	j := i
	if s[i] == ' ' && i+1 < len(s) {
		if c, _ := uni(s, i+1); c&(uWS|uL|uN) == 0 {
			j = i + 1
		}
	}
	if c, _ := uni(s, j); c&(uWS|uL|uN) != 0 {
		return -1
	}
	for j < len(s) {
		c, n := uni(s, j)
		if c&(uWS|uL|uN) != 0 {
			break
		}
		j += n
	}
	for j < len(s) && (s[j] == '\r' || s[j] == '\n' || s[j] == '/') {
		j++
	}
	return j
}

func digitsEnd(s string, i, max int) int {
	j := i
	for k := 0; k < max && j < len(s); k++ {
		c, n := uni(s, j)
		if c&uN == 0 {
			break
		}
		j += n
	}
	return j
}

// digitsUpTo3 is \p{N}{1,3} at i, or -1.
func digitsUpTo3(s string, i int) int {
	if j := digitsEnd(s, i, 3); j > i {
		return j
	}
	return -1
}

func isKanaHan(r rune) bool {
	return (r >= 0x4E00 && r <= 0x9FA5) || (r >= 0x3040 && r <= 0x30FF)
}

// kanaHanRun is [一-龥぀-ゟ゠-ヿ]+ at i, or -1.
func kanaHanRun(s string, i int) int {
	j := i
	for j < len(s) {
		r, n := utf8.DecodeRuneInString(s[j:])
		if !isKanaHan(r) {
			break
		}
		j += n
	}
	if j == i {
		return -1
	}
	return j
}

func asciiLetter(b byte) bool { return b|0x20 >= 'a' && b|0x20 <= 'z' }

// deepseekAt is DeepSeek-V3's third pattern at i, or -1:
//
//	[!-/:-@[-`{-~][A-Za-z]+ | [^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+ |
//	 ?[\p{P}\p{S}]+[\r\n]* | \s*[\r\n]+ | \s+(?!\S) | \s+
func deepseekAt(s string, i int) int {
	b := s[i]
	if b < utf8.RuneSelf && isPunctuation(rune(b)) && i+1 < len(s) && asciiLetter(s[i+1]) {
		j := i + 1
		for j < len(s) && asciiLetter(s[j]) {
			j++
		}
		return j
	}
	c0, n0 := uni(s, i)
	if c0&(uNL|uL|uP|uS) == 0 && i+n0 < len(s) { // the optional prefix
		if c, _ := uni(s, i+n0); c&(uL|uM) != 0 {
			return run(s, i+n0, uL|uM)
		}
	}
	if c0&(uL|uM) != 0 {
		return run(s, i, uL|uM)
	}
	if c0&(uP|uS) != 0 { // [\p{P}\p{S}]+[\r\n]*
		return punctRunEnd(s, i+n0)
	}
	if c0&uWS != 0 {
		return deepseekSpaceEnd(s, i)
	}
	return -1
}

// deepseekSpaceEnd is the end of DeepSeek-V3's piece at the White_Space
// rune at i: ` [\p{P}\p{S}]+[\r\n]*` if it is a space before
// punctuation or a symbol, else whitespaceEnd's.
func deepseekSpaceEnd(s string, i int) int {
	if s[i] == ' ' && i+1 < len(s) {
		if c, n := uni(s, i+1); c&(uP|uS) != 0 {
			return punctRunEnd(s, i+1+n)
		}
	}
	return whitespaceEnd(s, i)
}

// punctRunEnd is the end of [\p{P}\p{S}]*[\r\n]* at j: the rest of
// ` ?[\p{P}\p{S}]+[\r\n]*` after its first rune.
func punctRunEnd(s string, j int) int {
	j = run(s, j, uP|uS)
	for j < len(s) && (s[j] == '\r' || s[j] == '\n') {
		j++
	}
	return j
}

// tiling is a pattern whose pieces cover the text: end(s, i) > i always.
type tiling func(s string, i int) int

func (f tiling) find(s string, dst [][2]int) [][2]int {
	for i := 0; i < len(s); {
		j := f(s, i)
		dst = append(dst, [2]int{i, j})
		i = j
	}
	return dst
}

// matcher is a pattern given by its match at a position (-1: none there);
// find is leftmost-first: the first position with a match, then on from
// its end.
type matcher func(s string, i int) int

func (f matcher) find(s string, dst [][2]int) [][2]int {
	for i := 0; i < len(s); {
		if j := f(s, i); j > i {
			dst = append(dst, [2]int{i, j})
			i = j
			continue
		}
		_, n := utf8.DecodeRuneInString(s[i:])
		i += n
	}
	return dst
}
