package tokenize

import (
	"testing"
	"unicode/utf8"
)

func equalSpans(a, b [][2]int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// FuzzHandMatchers: on any valid UTF-8 text, each hand-made matcher finds
// exactly what regexp2 finds with the pattern it stands for; on any text at
// all, the tiling ones tile it. `go test -fuzz FuzzHandMatchers` explores.
func FuzzHandMatchers(f *testing.F) {
	for _, s := range []string{"", "don't  stop", "ǅungla'S 'll", "Ab\u0301c\u0301D", "x\u02b0y", " \u0301a", "12345", "a//\n\n/", "!abc +x", "日本語カタカナ漢字ひらがな", "\xff\xfeA", "\u3000\u3000x"} {
		f.Add(s)
	}
	initUni()
	initClasses()
	type pair struct {
		hand splitPattern
		re   regexPattern
	}
	var pats []pair
	for p, h := range handPatterns {
		re, err := compileRegex(p)
		if err != nil {
			f.Fatal(err)
		}
		pats = append(pats, pair{h, re})
	}
	f.Fuzz(func(t *testing.T, s string) {
		for _, p := range pats {
			got := p.hand.find(s, nil)
			if tl, ok := p.hand.(tiling); ok {
				for i := 0; i < len(s); {
					j := tl(s, i)
					if j <= i || j > len(s) {
						t.Fatalf("%q: piece at %d ends at %d", s, i, j)
					}
					i = j
				}
			}
			if !utf8.ValidString(s) {
				continue
			}
			if want := p.re.find(s, nil); !equalSpans(got, want) {
				t.Fatalf("%q: hand-made %v, regexp2 %v", s, got, want)
			}
		}
	})
}
