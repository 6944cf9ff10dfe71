// Package corpus builds the deterministic multi-megabyte text corpus the
// tokenizer is checked and benchmarked on: Go sources and docs from GOROOT,
// CJK prose from Python's test data when present, and generated strings that
// stress the pre-tokenizer (scripts, emoji, combining marks, whitespace runs,
// contractions, added-token strings, very long words). Same inputs, same
// corpus: no randomness without a fixed seed, no network.
package corpus

import (
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"unicode/utf8"
)

// GoRoot is the GOROOT of the go command on PATH (`go env GOROOT`), whose
// sources the corpus reads; runtime.GOROOT is deprecated, and says where
// the test binary was built, not where Go is.
func GoRoot() (string, error) {
	out, err := exec.Command("go", "env", "GOROOT").Output()
	if err != nil {
		return "", fmt.Errorf("corpus: go env GOROOT: %w", err)
	}
	return strings.TrimSpace(string(out)), nil
}

// Build returns the corpus. goroot is a Go installation (its src/ and doc/
// are read); cjkDir, if not empty, is a directory of *-utf8.txt files such as
// Python's Lib/test/cjkencodings. Every string is valid UTF-8.
func Build(goroot, cjkDir string) ([]string, error) {
	src, err := goSources(goroot)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, s := range slices.Concat(src, goDocs(goroot), cjkTexts(cjkDir)) {
		if s != "" && utf8.ValidString(s) {
			out = append(out, s)
		}
	}
	return append(out, Generated(1200)...), nil
}

// goSources: every 6th file in lexical order, cut to at most 12 KB at a
// line boundary, so the corpus is a few MB of real code and comments.
func goSources(goroot string) ([]string, error) {
	var files []string
	err := filepath.WalkDir(filepath.Join(goroot, "src"), func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && strings.HasSuffix(p, ".go") {
			files = append(files, p)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("corpus: reading Go sources: %w", err)
	}
	sort.Strings(files)
	var out []string
	for i := 0; i < len(files); i += 6 {
		data, err := os.ReadFile(files[i])
		if err != nil {
			return nil, err
		}
		out = append(out, cut(string(data), 12<<10))
	}
	return out, nil
}

// goDocs: prose, the Go spec and memory model in ~6 KB chunks.
func goDocs(goroot string) []string {
	var out []string
	for _, name := range []string{"go_spec.html", "go_mem.html", "godebug.md", "asm.html"} {
		data, err := os.ReadFile(filepath.Join(goroot, "doc", name))
		if err != nil {
			continue
		}
		out = append(out, chunks(string(data), 6<<10)...)
	}
	return out
}

// cjkTexts: CJK prose, by paragraph and whole; none without a directory.
func cjkTexts(dir string) []string {
	if dir == "" {
		return nil
	}
	var out []string
	names, _ := filepath.Glob(filepath.Join(dir, "*-utf8.txt"))
	sort.Strings(names)
	for _, name := range names {
		data, err := os.ReadFile(name)
		if err != nil {
			continue
		}
		out = append(out, string(data))
		out = append(out, strings.Split(string(data), "\n\n")...)
	}
	return out
}

// cut returns s up to max bytes, ending at a newline when there is one.
func cut(s string, max int) string {
	if len(s) <= max {
		return s
	}
	s = s[:max]
	if i := strings.LastIndexByte(s, '\n'); i > 0 {
		return s[:i+1]
	}
	for !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s
}

func chunks(s string, size int) []string {
	var out []string
	for len(s) > 0 {
		c := cut(s, size)
		out = append(out, c)
		s = s[len(c):]
	}
	return out
}

// Runes of each family the generator draws from.
var families = [][]rune{
	runeRange(0x4E00, 0x9FFF),   // CJK ideographs
	runeRange(0x3040, 0x30FF),   // hiragana, katakana
	runeRange(0xAC00, 0xD7A3),   // hangul syllables
	runeRange(0x0400, 0x04FF),   // Cyrillic
	runeRange(0x0370, 0x03FF),   // Greek
	runeRange(0x0600, 0x06FF),   // Arabic (letters, digits, marks)
	runeRange(0x05D0, 0x05EA),   // Hebrew
	runeRange(0x0900, 0x097F),   // Devanagari (letters, vowel signs, digits)
	runeRange(0x0E00, 0x0E7F),   // Thai
	runeRange(0x1F300, 0x1FAFF), // emoji and pictographs
	runeRange(0x2000, 0x206F),   // general punctuation, odd spaces, ZWJ
	runeRange(0x0300, 0x036F),   // combining diacritics
	runeRange(0xFF00, 0xFFEF),   // fullwidth forms and digits
	runeRange(0x2100, 0x218F),   // letterlike (KELVIN SIGN, ANGSTROM SIGN), number forms
	runeRange(0x1D400, 0x1D7FF), // mathematical alphanumerics
	runeRange(0xE000, 0xE0FF),   // private use
	runeRange(0x00A0, 0x024F),   // Latin-1 supplement, Latin extended
	runeRange(0x20000, 0x2A6DF), // CJK extension B
	[]rune("\t\n\r \u000b\u000c\u0085\u00a0\u1680\u2000\u2007\u200b\u2028\u2029\u202f\u205f\u3000\u001c\u001d\u001e\u001f\ufeff"),
	[]rune("'sStTmMdDrReEvVlLſ"),
	[]rune("0123456789٠١٢٣٤٥६७৮๙①²½Ⅻ"),
	[]rune("!\"#$%&()*+,-./:;<=>?@[\\]^_`{|}~"),
}

func runeRange(lo, hi rune) []rune {
	var rs []rune
	for r := lo; r <= hi; r++ {
		if r >= 0xD800 && r <= 0xDFFF {
			continue
		}
		rs = append(rs, r)
	}
	return rs
}

// Fragments with a known story: each has tripped a tokenizer at some point.
var fragments = []string{
	"don't  stop", "DON'T", "I'M", "we'll've", "'s'S't", "'ſ", "'ſſ", "x'LL", "'re're",
	"<|im_start|>", "<|im_end|>", "<|endoftext|>", "<think>", "</think>", "<tool_call>",
	"<|im_start|>assistant\n", "<|im_start", "im_end|>", "<<|im_end|>>", "<think></think>",
	"<|im_start|><|im_end|>", "<|box_start|>", "<tool_response>",
	"\u212a", "\u212b", "e\u0301", "A\u030a", "\u1100\u1161\u11a8", "ﬁ", "Å", "\u0344",
	"👨‍👩‍👧‍👦", "👍🏽", "🇯🇵🇫🇷", "❤️", "1️⃣", "🏳️‍🌈",
	"    ", "\t\t", "\n\n\n", "\r\n\r\n", " \n ", "  \n\n  x", "\u3000\u3000", "\u00a0 ", " \u0085x",
	"12345678901234567890", "3.14159", "1,000,000", "０１２", "٣٤٥",
	"https://example.com/a?b=c&d=e#f", "foo_bar.baz(qux)", "if x := f(); x != nil {",
	"```go\nfunc main() {}\n```", "$$\\frac{a}{b}$$", "--==>>", "...", "?!", "¿Qué?",
}

// Generated returns n strings from a fixed seed: mixtures of families,
// fragments and runs, lengths from a few bytes to tens of KB.
func Generated(n int) []string {
	rng := rand.New(rand.NewPCG(5, 2026))
	out := make([]string, 0, n)
	for i := 0; i < n; i++ {
		var sb strings.Builder
		target := 1 + rng.IntN(400)
		switch {
		case i%50 == 0:
			target = 20000 + rng.IntN(20000)
		case i%7 == 0:
			target = 2000 + rng.IntN(4000)
		}
		for sb.Len() < target {
			switch k := rng.IntN(10); {
			case k < 5: // a run from one family
				fam := families[rng.IntN(len(families))]
				for j, m := 0, 1+rng.IntN(12); j < m; j++ {
					sb.WriteRune(fam[rng.IntN(len(fam))])
				}
			case k < 7:
				sb.WriteString(fragments[rng.IntN(len(fragments))])
			case k < 8: // whitespace run
				ws := []string{" ", "\t", "\n", "\r", "\u00a0", "\u3000"}
				for j, m := 0, 1+rng.IntN(9); j < m; j++ {
					sb.WriteString(ws[rng.IntN(len(ws))])
				}
			case k < 9: // ASCII words
				words := []string{"the", "The", "tokenizer", "is", "FAST", "a", "über", "naïve", "café", "x", "don't", "I'd", "you're"}
				for j, m := 0, 1+rng.IntN(8); j < m; j++ {
					sb.WriteString(words[rng.IntN(len(words))])
					sb.WriteByte(" \n."[rng.IntN(3)])
				}
			default: // a long run of one character
				r := []string{"a", " ", "=", "-", "\n", "9", "你", "😀", "é"}[rng.IntN(9)]
				sb.WriteString(strings.Repeat(r, 10+rng.IntN(300)))
			}
		}
		out = append(out, sb.String())
	}
	// A few pathological single strings.
	out = append(out,
		strings.Repeat("a", 100000),
		strings.Repeat("ab", 30000),
		strings.Repeat(" ", 5000)+"x",
		strings.Repeat("\n", 3000),
		strings.Repeat("1", 5000),
		strings.Repeat("🤖", 3000),
		strings.Repeat("<|im_end|>", 500),
	)
	return out
}
