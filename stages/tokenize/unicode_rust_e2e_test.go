//go:build e2e

package tokenize

import (
	"encoding/json"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// TestUnicodeTablesMatchHuggingFace runs Hugging Face's Punctuation,
// Digits, Lowercase and NFC/NFD/NFKC/NFKD over every code point
// (testdata/hf_unicode.js) and compares each with ours, character by
// character: where Go's Unicode tables and Rust's (or the crates Hugging
// Face uses) disagree, unicode_rust.go must say so.
func TestUnicodeTablesMatchHuggingFace(t *testing.T) {
	skipShortOracle(t)
	t.Parallel()
	nm := nodeModules(t)
	cmd := exec.Command("node", "testdata/hf_unicode.js", nm)
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("reference: %v", err)
	}
	var ref struct {
		Punct, Digits               []rune
		Lower, NFC, NFD, NFKC, NFKD map[string]string
		Onig                        map[string][]rune
	}
	if err := json.Unmarshal(out, &ref); err != nil {
		t.Fatal(err)
	}
	isSet := func(rs []rune) map[rune]bool {
		m := map[rune]bool{}
		for _, r := range rs {
			m[r] = true
		}
		return m
	}
	punct, digit := isSet(ref.Punct), isSet(ref.Digits)
	forms := []struct {
		name string
		ref  map[string]string
		n    normalizer
	}{
		{"Lowercase", ref.Lower, lowercase{}}, {"NFC", ref.NFC, unicodeForm{norm.NFC}}, {"NFD", ref.NFD, unicodeForm{norm.NFD}},
		{"NFKC", ref.NFKC, unicodeForm{norm.NFKC}}, {"NFKD", ref.NFKD, unicodeForm{norm.NFKD}},
	}
	bad := 0
	report := func(format string, args ...any) {
		bad++
		if bad <= 20 || os.Getenv("PIPE_SHOW_ALL") != "" {
			t.Errorf(format, args...)
		}
	}
	for r := rune(0); r <= utf8.MaxRune; r++ {
		if !utf8.ValidRune(r) {
			continue
		}
		if got := isPunctuation(r); got != punct[r] {
			report("U+%04X: Punctuation: ours %v, Hugging Face %v", r, got, punct[r])
		}
		if got := isNumericRust(r); got != digit[r] {
			report("U+%04X: Digits: ours %v, Hugging Face %v", r, got, digit[r])
		}
		key := strconv.Itoa(int(r))
		for _, f := range forms {
			want, ok := f.ref[key]
			if !ok {
				want = string(r)
			}
			if got := f.n.normalize(textPiece(string(r))).s; got != want {
				report("U+%04X: %s: ours %q, Hugging Face %q", r, f.name, got, want)
			}
		}
	}
	// Oniguruma's classes, as the hand-made matchers see them (one bit may
	// stand for two classes) and as regexp2 compiles them (onigPattern).
	initUni()
	union := func(names ...string) map[rune]bool {
		m := map[rune]bool{}
		for _, n := range names {
			for _, r := range ref.Onig[n] {
				m[r] = true
			}
		}
		return m
	}
	bits := []struct {
		bit uint16
		in  map[rune]bool
		as  string
	}{
		{uL, union("L"), "L"}, {uLu, union("Lu", "Lt"), "Lu|Lt"}, {uLl, union("Ll"), "Ll"}, {uLmo, union("Lm", "Lo"), "Lm|Lo"},
		{uM, union("M"), "M"}, {uN, union("N"), "N"}, {uP, union("P"), "P"}, {uS, union("S"), "S"},
	}
	var res []regexPattern
	var names []string
	for name := range ref.Onig {
		re, err := compileRegex(`\p{` + name + `}`)
		if err != nil {
			t.Fatal(err)
		}
		res, names = append(res, re), append(names, name)
	}
	for r := rune(0); r <= utf8.MaxRune; r++ {
		if !utf8.ValidRune(r) {
			continue
		}
		c, _ := uni(string(r), 0)
		for _, b := range bits {
			if got := c&b.bit != 0; got != b.in[r] {
				report("U+%04X: %s: hand-made matchers %v, Oniguruma %v", r, b.as, got, b.in[r])
			}
		}
	}
	for k, re := range res {
		in := union(names[k])
		for r := rune(0); r <= utf8.MaxRune; r++ {
			if !utf8.ValidRune(r) {
				continue
			}
			if got := len(re.find(string(r), nil)) == 1; got != in[r] {
				report("U+%04X: \\p{%s}: regexp2 %v, Oniguruma %v", r, names[k], got, in[r])
			}
		}
	}
	if bad > 0 {
		t.Fatalf("%d differences from Hugging Face", bad)
	}
}
