package stages

import (
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/pipe-dev/pipe/pipeline"
)

// The reference (pipe stages, docs/stages.md) is generated from each kind's
// Summary, Description and `doc` tags, so its prose is checked here, at the
// source. The limits, which today's text meets:
//
//   - no sentence over maxSentenceWords words, except those listed in
//     longSentences;
//   - on average at most maxAverageWords words a sentence;
//   - no doc tag over maxDocChars characters.
//
// Code spans (`...`) are left out before counting. An indented line of a
// Description is an item of a listing (a table of codes, a layout): it is
// counted on its own, with the deeper-indented lines that continue it, and
// held to maxSentenceWords but left out of the average.
const (
	maxSentenceWords = 30
	maxAverageWords  = 20
	maxDocChars      = 300
)

// longSentences are sentences allowed over maxSentenceWords, by where they
// are ("KIND" or "KIND.key") and how they begin. The list may only shrink:
// an entry whose sentence is gone, or no longer long, fails the test.
var longSentences = map[string]string{}

func TestReferenceProseIsShort(t *testing.T) {
	type long struct{ where, text string }
	var (
		sentences, words, over40 int
		longs                    []long
	)
	count := func(where, text string) {
		for _, s := range proseSentences(text) {
			n := proseWords(s.text)
			if !s.item {
				sentences++
				words += n
			}
			if n > 40 {
				over40++
			}
			if n > maxSentenceWords {
				longs = append(longs, long{where, s.text})
			}
		}
	}
	longestDoc, longestDocKey := 0, ""
	reg := pipeline.DefaultRegistry
	for _, kind := range reg.Kinds() {
		spec := reg.Lookup(kind)
		count(kind, spec.Summary)
		count(kind, spec.Description)
		for _, f := range spec.FieldDocs() {
			where := kind + "." + f.Key
			count(where, f.Doc)
			if len(f.Doc) > longestDoc {
				longestDoc, longestDocKey = len(f.Doc), where
			}
			if len(f.Doc) > maxDocChars {
				t.Errorf("%s: doc tag of %d characters (at most %d): split its facts into short sentences", where, len(f.Doc), maxDocChars)
			}
		}
	}
	excepted := map[string]bool{}
	for _, l := range longs {
		if start, ok := longSentences[l.where]; ok && strings.HasPrefix(l.text, start) {
			excepted[l.where] = true
			continue
		}
		t.Errorf("%s: sentence of %d words (at most %d): %q", l.where, proseWords(l.text), maxSentenceWords, l.text)
	}
	for where, start := range longSentences {
		if !excepted[where] {
			t.Errorf("longSentences: %s %q is no longer a long sentence: remove it from the list", where, start)
		}
	}
	avg := float64(words) / float64(max(sentences, 1))
	t.Logf("%d sentences, %.1f words a sentence, %d over %d words, %d over 40, longest doc tag %d characters (%s)",
		sentences, avg, len(longs), maxSentenceWords, over40, longestDoc, longestDocKey)
	if avg > maxAverageWords {
		t.Errorf("%.1f words a sentence on average (at most %d)", avg, maxAverageWords)
	}
}

var codeSpan = regexp.MustCompile("`[^`]*`")

// proseSentences splits text into sentences: at a blank line, at an item of
// an indented listing, and after ".", "!" or "?" followed by a space or the
// end, unless the word is an abbreviation (e.g., i.e.) or an ellipsis. "0.5"
// and "run.json" do not end a sentence, as no space follows their dot.
func proseSentences(text string) []proseUnit {
	text = codeSpan.ReplaceAllString(text, "CODE")
	var units []proseUnit
	var cur []string
	itemIndent := -1 // the indent of the listing's items; -1: in prose
	flush := func() {
		if len(cur) > 0 {
			units = append(units, proseUnit{strings.Join(cur, " "), itemIndent >= 0})
			cur = nil
		}
	}
	for _, line := range strings.Split(text, "\n") {
		trimmed := strings.TrimSpace(line)
		indent := len(line) - len(strings.TrimLeft(line, " \t"))
		switch {
		case trimmed == "":
			flush()
			itemIndent = -1
		case indent == 0:
			if itemIndent >= 0 {
				flush()
				itemIndent = -1
			}
			cur = append(cur, trimmed)
		case itemIndent < 0 || indent <= itemIndent:
			flush()
			itemIndent = indent
			cur = append(cur, trimmed)
		default:
			cur = append(cur, trimmed)
		}
	}
	flush()
	var out []proseUnit
	for _, u := range units {
		for _, s := range splitSentences(u.text) {
			out = append(out, proseUnit{s, u.item})
		}
	}
	return out
}

// proseUnit is a sentence, or a sentence of a listing's item.
type proseUnit struct {
	text string
	item bool
}

func splitSentences(unit string) []string {
	var out []string
	words := strings.Fields(unit)
	start := 0
	for i, w := range words {
		end := strings.TrimRight(w, `)"'`)
		if i == len(words)-1 || !strings.HasSuffix(end, ".") && !strings.HasSuffix(end, "!") && !strings.HasSuffix(end, "?") {
			continue
		}
		if abbreviation(end) {
			continue
		}
		out = append(out, strings.Join(words[start:i+1], " "))
		start = i + 1
	}
	if start < len(words) {
		out = append(out, strings.Join(words[start:], " "))
	}
	return out
}

func abbreviation(w string) bool {
	w = strings.TrimLeft(w, `("'`)
	switch strings.ToLower(w) {
	case "e.g.", "i.e.", "etc.", "vs.", "cf.", "...", "…":
		return true
	}
	return strings.HasSuffix(w, "...")
}

// proseWords counts the words of a sentence: runs of text holding a letter
// or a digit ("—", "|" and "→" are not words).
func proseWords(s string) int {
	n := 0
	for _, w := range strings.Fields(s) {
		if strings.IndexFunc(w, func(r rune) bool {
			return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r > 0x7f && r != '—' && r != '…' && r != '→' && r != '×'
		}) >= 0 {
			n++
		}
	}
	return n
}

func TestProseSentences(t *testing.T) {
	for _, c := range []struct {
		text string
		want []string
	}{
		{"One. Two, e.g. three.", []string{"One.", "Two, e.g. three."}},
		{"Read run.json and 0.5 of it. Done", []string{"Read run.json and 0.5 of it.", "Done"}},
		{"ids ID#1 ... ID#N here. Next (a note.) Last", []string{"ids ID#1 ... ID#N here.", "Next (a note.)", "Last"}},
		{"Codes:\n  a   one\n      more\n  b   two\nAfter.", []string{"Codes:", "a one more", "b two", "After."}},
		{"A `x. y` b.\n\nC", []string{"A CODE b.", "C"}},
	} {
		var got []string
		for _, s := range proseSentences(c.text) {
			got = append(got, s.text)
		}
		if fmt.Sprint(got) != fmt.Sprint(c.want) {
			t.Errorf("proseSentences(%q) = %q, want %q", c.text, got, c.want)
		}
	}
}
