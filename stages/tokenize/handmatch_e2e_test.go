//go:build e2e

package tokenize

import (
	"os"
	"strings"
	"testing"
	"unicode/utf8"
)

// handMatcherTexts is the corpus plus Unicode scalar values in the contexts
// the patterns branch on: after a letter, doubled, after a space, before a
// digit, after an apostrophe, before a newline and a slash. regexp2 takes
// minutes on all of it, so by default it is a sixth of the corpus and every
// 7th code point; PIPE_CI=1 or PIPE_TOKENIZE_EXHAUSTIVE=1 takes every code
// point (the family oracle tests cover the whole corpus).
func handMatcherTexts(t *testing.T) []string {
	step := 7
	var texts []string
	for i, s := range testCorpus(t) {
		if i%6 == 0 {
			texts = append(texts, s)
		}
	}
	if os.Getenv("PIPE_CI") == "1" || os.Getenv("PIPE_TOKENIZE_EXHAUSTIVE") == "1" {
		step = 1
	}
	var sb strings.Builder
	for r := rune(0); r <= utf8.MaxRune; r++ {
		if utf8.ValidRune(r) && int(r)%step == 0 {
			c := string(r)
			sb.WriteString("x" + c + c + " " + c + "1 '" + c + "\n" + c + "/A" + c + "a\t" + c)
		}
		if r%1024 == 1023 {
			texts = append(texts, sb.String())
			sb.Reset()
		}
	}
	return texts
}

// TestHandMatchersAgreeWithRegexp2 compares each hand-made matcher (and the
// Qwen/Llama-3 ones) with regexp2 running the pattern it stands for: same
// matches on the corpus and on every code point in context. Together with
// the family oracle tests (regexp2's own agreement with Oniguruma is what
// TestFamiliesMatchHuggingFace shows for the patterns without a hand-made
// matcher) this is what lets the hand-made ones be chosen by pattern.
func TestHandMatchersAgreeWithRegexp2(t *testing.T) {
	skipShortOracle(t)
	initUni()
	initClasses()
	texts := handMatcherTexts(t)
	pats := map[string]splitPattern{}
	for p, h := range handPatterns {
		pats[p] = h
	}
	for p, d := range knownPatterns {
		pats[p] = knownPattern{d}
	}
	for p, hand := range pats {
		re, err := compileRegex(p)
		if err != nil {
			t.Fatal(err)
		}
		name := p
		if len(name) > 40 {
			name = name[:40] + "…"
		}
		bad := 0
		for i, s := range texts {
			got, want := hand.find(s, nil), re.find(s, nil)
			if equalSpans(got, want) {
				continue
			}
			bad++
			if bad <= 3 {
				k := 0
				for k < len(got) && k < len(want) && got[k] == want[k] {
					k++
				}
				var g, w [2]int
				if k < len(got) {
					g = got[k]
				}
				if k < len(want) {
					w = want[k]
				}
				lo := max(0, min(g[0], w[0])-10)
				hi := min(len(s), max(g[1], w[1])+10)
				t.Errorf("%s: text %d: match %d: hand %v %q, regexp2 %v %q (around %q)", name, i, k, g, s[g[0]:g[1]], w, s[w[0]:w[1]], s[lo:hi])
			}
		}
		if bad > 0 {
			t.Errorf("%s: %d of %d texts differ", name, bad, len(texts))
		}
	}
}
