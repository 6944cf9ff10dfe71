package tokenize

import (
	"strings"
	"unicode"
)

// Hugging Face runs Split patterns on Oniguruma, whose Unicode tables are
// version 16.0; Go's are 15.0. These are the characters 16.0 added to each
// class the patterns use (none changed class), measured by splitting every
// code point with a \p{X} pattern in Hugging Face
// (TestOnigClassesMatchHuggingFace measures again). The hand-made matchers
// and, through onigPattern, regexp2 include them.
var (
	onigL = &unicode.RangeTable{
		R16: []unicode.Range16{{0x1C89, 0x1C8A, 1}, {0xA7CB, 0xA7CD, 1}, {0xA7DA, 0xA7DC, 1}},
		R32: []unicode.Range32{{0x105C0, 0x105F3, 1}, {0x10D4A, 0x10D65, 1}, {0x10D6F, 0x10D85, 1}, {0x10EC2, 0x10EC4, 1}, {0x11380, 0x11389, 1}, {0x1138B, 0x1138B, 1}, {0x1138E, 0x1138E, 1}, {0x11390, 0x113B5, 1}, {0x113B7, 0x113B7, 1}, {0x113D1, 0x113D1, 1}, {0x113D3, 0x113D3, 1}, {0x11BC0, 0x11BE0, 1}, {0x13460, 0x143FA, 1}, {0x16100, 0x1611D, 1}, {0x16D40, 0x16D6C, 1}, {0x18CFF, 0x18CFF, 1}, {0x1E5D0, 0x1E5ED, 1}, {0x1E5F0, 0x1E5F0, 1}, {0x2EBF0, 0x2EE5D, 1}},
	}
	onigLu = &unicode.RangeTable{
		R16: []unicode.Range16{{0x1C89, 0x1C89, 1}, {0xA7CB, 0xA7CC, 1}, {0xA7DA, 0xA7DA, 1}, {0xA7DC, 0xA7DC, 1}},
		R32: []unicode.Range32{{0x10D50, 0x10D65, 1}},
	}
	onigLl = &unicode.RangeTable{
		R16: []unicode.Range16{{0x1C8A, 0x1C8A, 1}, {0xA7CD, 0xA7CD, 1}, {0xA7DB, 0xA7DB, 1}},
		R32: []unicode.Range32{{0x10D70, 0x10D85, 1}},
	}
	onigLm = &unicode.RangeTable{
		R32: []unicode.Range32{{0x10D4E, 0x10D4E, 1}, {0x10D6F, 0x10D6F, 1}, {0x16D40, 0x16D42, 1}, {0x16D6B, 0x16D6C, 1}},
	}
	onigLo = &unicode.RangeTable{
		R32: []unicode.Range32{{0x105C0, 0x105F3, 1}, {0x10D4A, 0x10D4D, 1}, {0x10D4F, 0x10D4F, 1}, {0x10EC2, 0x10EC4, 1}, {0x11380, 0x11389, 1}, {0x1138B, 0x1138B, 1}, {0x1138E, 0x1138E, 1}, {0x11390, 0x113B5, 1}, {0x113B7, 0x113B7, 1}, {0x113D1, 0x113D1, 1}, {0x113D3, 0x113D3, 1}, {0x11BC0, 0x11BE0, 1}, {0x13460, 0x143FA, 1}, {0x16100, 0x1611D, 1}, {0x16D43, 0x16D6A, 1}, {0x18CFF, 0x18CFF, 1}, {0x1E5D0, 0x1E5ED, 1}, {0x1E5F0, 0x1E5F0, 1}, {0x2EBF0, 0x2EE5D, 1}},
	}
	onigM = &unicode.RangeTable{
		R16: []unicode.Range16{{0x0897, 0x0897, 1}},
		R32: []unicode.Range32{{0x10D69, 0x10D6D, 1}, {0x10EFC, 0x10EFC, 1}, {0x113B8, 0x113C0, 1}, {0x113C2, 0x113C2, 1}, {0x113C5, 0x113C5, 1}, {0x113C7, 0x113CA, 1}, {0x113CC, 0x113D0, 1}, {0x113D2, 0x113D2, 1}, {0x113E1, 0x113E2, 1}, {0x11F5A, 0x11F5A, 1}, {0x1611E, 0x1612F, 1}, {0x1E5EE, 0x1E5EF, 1}},
	}
	onigN = &unicode.RangeTable{
		R32: []unicode.Range32{{0x10D40, 0x10D49, 1}, {0x116D0, 0x116E3, 1}, {0x11BF0, 0x11BF9, 1}, {0x16130, 0x16139, 1}, {0x16D70, 0x16D79, 1}, {0x1CCF0, 0x1CCF9, 1}, {0x1E5F1, 0x1E5FA, 1}},
	}
	onigP = &unicode.RangeTable{
		R16: []unicode.Range16{{0x1B4E, 0x1B4F, 1}, {0x1B7F, 0x1B7F, 1}},
		R32: []unicode.Range32{{0x10D6E, 0x10D6E, 1}, {0x113D4, 0x113D5, 1}, {0x113D7, 0x113D8, 1}, {0x11BE1, 0x11BE1, 1}, {0x16D6D, 0x16D6F, 1}, {0x1E5FF, 0x1E5FF, 1}},
	}
	onigS = &unicode.RangeTable{
		R16: []unicode.Range16{{0x2427, 0x2429, 1}, {0x2FFC, 0x2FFF, 1}, {0x31E4, 0x31E5, 1}, {0x31EF, 0x31EF, 1}},
		R32: []unicode.Range32{{0x10D8E, 0x10D8F, 1}, {0x1CC00, 0x1CCEF, 1}, {0x1CD00, 0x1CEB3, 1}, {0x1F8B2, 0x1F8BB, 1}, {0x1F8C0, 0x1F8C1, 1}, {0x1FA89, 0x1FA89, 1}, {0x1FA8F, 0x1FA8F, 1}, {0x1FABE, 0x1FABE, 1}, {0x1FAC6, 0x1FAC6, 1}, {0x1FADC, 0x1FADC, 1}, {0x1FADF, 0x1FADF, 1}, {0x1FAE9, 0x1FAE9, 1}, {0x1FBCB, 0x1FBEF, 1}},
	}
)

// onigExtra is the additions for each \p{X} class name.
var onigExtra = map[string]*unicode.RangeTable{
	"L": onigL, "Lu": onigLu, "Ll": onigLl, "Lm": onigLm, "Lo": onigLo, "M": onigM, "N": onigN, "P": onigP, "S": onigS,
}

// onigPattern rewrites each \p{X} in a pattern with additions into \p{X}
// plus their ranges, as literal characters (inside a class) or a class of
// its own (outside one).
func onigPattern(pattern string) string {
	if !strings.Contains(pattern, `\p{`) {
		return pattern
	}
	var sb strings.Builder
	inClass := false
	for i := 0; i < len(pattern); i++ {
		c := pattern[i]
		switch {
		case c == '\\' && i+1 < len(pattern):
			if n := writeOnigClass(&sb, pattern[i:], inClass); n > 0 {
				i += n - 1
				continue
			}
			sb.WriteByte(c)
			sb.WriteByte(pattern[i+1])
			i++
			continue
		case inClass && c == ']':
			inClass = false
		case !inClass && c == '[':
			inClass = true
			i += writeClassOpen(&sb, pattern[i:]) - 1
			continue
		}
		sb.WriteByte(c)
	}
	return sb.String()
}

// writeOnigClass writes s's leading \p{X}, when X has additions, with
// them, and returns its length; 0 (nothing written) for any other escape.
func writeOnigClass(sb *strings.Builder, s string, inClass bool) int {
	if !strings.HasPrefix(s, `\p{`) {
		return 0
	}
	end := strings.IndexByte(s, '}')
	if end <= 0 {
		return 0
	}
	t, ok := onigExtra[s[3:end]]
	if !ok {
		return 0
	}
	if !inClass {
		sb.WriteByte('[')
	}
	sb.WriteString(s[:end+1])
	writeRanges(sb, t)
	if !inClass {
		sb.WriteByte(']')
	}
	return end + 1
}

// writeClassOpen writes the start of the class s begins with: "[", "[^",
// with a literal "]" first if there is one; it returns the bytes written.
func writeClassOpen(sb *strings.Builder, s string) int {
	n := 1
	if n < len(s) && s[n] == '^' {
		n++
	}
	if n < len(s) && s[n] == ']' {
		n++
	}
	sb.WriteString(s[:n])
	return n
}

func writeRanges(sb *strings.Builder, t *unicode.RangeTable) {
	for _, r := range t.R16 {
		sb.WriteRune(rune(r.Lo))
		if r.Hi > r.Lo {
			sb.WriteByte('-')
			sb.WriteRune(rune(r.Hi))
		}
	}
	for _, r := range t.R32 {
		sb.WriteRune(rune(r.Lo))
		if r.Hi > r.Lo {
			sb.WriteByte('-')
			sb.WriteRune(rune(r.Hi))
		}
	}
}
