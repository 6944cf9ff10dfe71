package textsim

import (
	"fmt"
	"math"
	"testing"
)

func TestNormalize(t *testing.T) {
	for _, tt := range []struct {
		in, want, wantZero string
	}{
		{"Hello,   World!\n", "hello world ", "hello world "},
		{"Pi is 3.14; a million is 1,000,000.", "pi is 3 14 a million is 1 000 000 ", "pi is 0 a million is 0 "},
		{"Café  naïve RÉSUMÉ", "cafe naive resume ", "cafe naive resume "},
		{"请解释量子力学。", "请 解 释 量 子 力 学 ", "请 解 释 量 子 力 学 "},
		{"x-ray\tand\u00a0e-mail", "x ray and e mail ", "x ray and e mail "},
		{"", "", ""},
		{"  ...  ", "", ""},
	} {
		if got := string(Normalize(nil, tt.in, false)); got != tt.want {
			t.Errorf("Normalize(%q) = %q, want %q", tt.in, got, tt.want)
		}
		if got := string(Normalize(nil, tt.in, true)); got != tt.wantZero {
			t.Errorf("Normalize(%q, zero numbers) = %q, want %q", tt.in, got, tt.wantZero)
		}
	}
}

func TestNGramsOfAShortText(t *testing.T) {
	words := WordHashes(nil, Normalize(nil, "one two", false))
	var n int
	NGrams(words, 5, func(first int, _ uint64) { n++ })
	if n != 1 {
		t.Fatalf("a text shorter than n is %d n-grams, want 1", n)
	}
	words = WordHashes(nil, Normalize(nil, "one two three four five six", false))
	n = 0
	NGrams(words, 5, func(int, uint64) { n++ })
	if n != 2 {
		t.Fatalf("%d 5-grams of 6 words, want 2", n)
	}
}

func signature(m *MinHasher, text string, n int) []uint32 {
	words := WordHashes(nil, Normalize(nil, text, false))
	sig := make([]uint32, m.K())
	m.Signature(sig, func(add func(uint64)) { NGrams(words, n, func(_ int, h uint64) { add(h) }) })
	return sig
}

// The estimate follows the Jaccard similarity of the shingle sets: two
// texts sharing 3 of 5 distinct bigrams (0.6) and 9 of 10 (0.9) against
// 8 of 10 words changed (about 0.1).
func TestIndexEstimatesSimilarity(t *testing.T) {
	lsh := LSH{Bands: 64, Rows: 4} // many hashes: a tight estimate
	m := NewMinHasher(lsh.K())
	x, err := NewIndex(lsh, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	base := "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda"
	if err := x.Add(signature(m, base, 2), "base"); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		text string
		want float64
	}{
		{base, 1},
		{"ALPHA beta, gamma delta epsilon zeta eta theta iota kappa lambda!", 1},
		{"alpha beta gamma delta epsilon zeta eta theta iota kappa mu", 9.0 / 11},
		{"alpha beta gamma delta epsilon one two three four five six", 4.0 / 16},
	} {
		mt, ok := x.Find(signature(m, tt.text, 2))
		if tt.want > 0.5 && (!ok || mt.ID != "base" || math.Abs(mt.Similarity-tt.want) > 0.12) {
			t.Errorf("%q: %+v %v, want base at %.2f", tt.text, mt, ok, tt.want)
		}
		if ok && math.Abs(mt.Similarity-tt.want) > 0.12 {
			t.Errorf("%q: similarity %.2f, want %.2f", tt.text, mt.Similarity, tt.want)
		}
	}
}

// The band tables grow past their first size and keep every key; the
// signatures cross arena chunks.
func TestIndexGrows(t *testing.T) {
	lsh := LSH{Bands: 4, Rows: 3}
	x, err := NewIndex(lsh, 0.99)
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	m := NewMinHasher(lsh.K())
	const n = 20000
	for i := range n {
		if err := x.Add(signature(m, fmt.Sprintf("text number %d about topic %d", i, i*7), 1), fmt.Sprintf("t%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	for _, i := range []int{0, 4095, 4096, 12345, n - 1} {
		mt, ok := x.Find(signature(m, fmt.Sprintf("text number %d about topic %d", i, i*7), 1))
		if !ok || mt.ID != fmt.Sprintf("t%d", i) || mt.Similarity != 1 {
			t.Errorf("text %d: %+v %v", i, mt, ok)
		}
	}
	if x.Len() != n || x.Bytes() <= 0 {
		t.Fatalf("len %d bytes %d", x.Len(), x.Bytes())
	}
	x.Close()
	if x.Len() != n || x.Bytes() <= 0 {
		t.Fatalf("after Close: len %d bytes %d", x.Len(), x.Bytes())
	}
}

func TestOverlap(t *testing.T) {
	o := NewOverlap(4)
	farmers := []string{"Alice", "Bob", "Chen", "Dana", "Emil", "Fay", "Gus", "Hana", "Ivo", "Jun"}
	o.Add("The quick brown fox jumps over the lazy dog.", Ref{Set: "animals", Row: 1})
	o.Add("Two words", Ref{Set: "short", Row: 7})
	for i := range Boilerplate {
		o.Add(fmt.Sprintf("Farmer %s picked %d apples before the rain came. Put your final answer in a box.", farmers[i], i), Ref{Set: "boxed", Row: i + 1})
	}
	for _, tt := range []struct {
		text, want string
	}{
		{"I saw that the QUICK brown fox jumps, over a fence.", "animals 1: the quick brown fox jumps over"},
		{"two   words!", "short 7: two words"},
		{"say two words please", ""},                                                                     // a short reference matches a whole text only
		{"Tell me a joke. Put your final answer in a box.", ""},                                          // the benchmark's boilerplate
		{"Farmer Dana picked 3 apples before the rain came, and then?", "boxed 4: farmer dana picked 3"}, // its content, up to the boilerplate
		{"nothing alike at all", ""},
	} {
		h, ok := o.Find(tt.text)
		got := ""
		if ok {
			got = fmt.Sprintf("%s %d: %s", h.Set, h.Row, h.Span)
		}
		if got != tt.want {
			t.Errorf("%q: %q, want %q", tt.text, got, tt.want)
		}
	}
	if o.Texts() != 2+Boilerplate || o.NGrams() == 0 || o.Bytes() <= 0 {
		t.Fatalf("texts %d n-grams %d bytes %d", o.Texts(), o.NGrams(), o.Bytes())
	}
}

func TestLSHCandidateProbability(t *testing.T) {
	l := LSH{Bands: 12, Rows: 6}
	for s, want := range map[float64]float64{0.75: 0.905, 0.8: 0.974, 0.5: 0.172} {
		if got := l.CandidateProbability(s); math.Abs(got-want) > 0.001 {
			t.Errorf("P(candidate | %.2f) = %.3f, want %.3f", s, got, want)
		}
	}
}
