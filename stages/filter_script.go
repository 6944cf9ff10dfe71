package stages

import "unicode"

// scriptsChecked are the scripts dominantScript tells apart, the most
// common first; a letter of another script counts as "Other".
var scriptsChecked = []string{"Latin", "Han", "Cyrillic", "Arabic", "Hiragana", "Katakana", "Hangul", "Devanagari", "Greek", "Hebrew", "Thai", "Other"}

// dominantScript is the Unicode script most of s's letters are in, ""
// when s has none (digits, punctuation and spaces count for no script);
// a tie goes to the script listed first.
func dominantScript(s string) string {
	var counts [12]int
	any := false
	for _, r := range s {
		if i := scriptOf(r); i >= 0 {
			counts[i]++
			any = true
		}
	}
	if !any {
		return ""
	}
	best := 0
	for i, n := range counts {
		if n > counts[best] {
			best = i
		}
	}
	return scriptsChecked[best]
}

// scriptOf is the index in scriptsChecked of a letter's script, -1 for
// what is not a letter.
func scriptOf(r rune) int {
	if r < 0x80 { // ASCII: the common case, without the tables
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' {
			return 0
		}
		return -1
	}
	if !unicode.IsLetter(r) {
		return -1
	}
	for i, name := range scriptsChecked[:len(scriptsChecked)-1] {
		if unicode.Is(unicode.Scripts[name], r) {
			return i
		}
	}
	return len(scriptsChecked) - 1
}
