package tokenize

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

type addedToken struct {
	content string
	id      int
	// As in tokenizer.json; only the general pipeline (addedSplits) reads them.
	lstrip, rstrip, singleWord bool
}

// addedMatcher finds added tokens (special or not) in text, leftmost first
// and longest first among those starting at the same byte, as Hugging Face's
// added-vocabulary split does, with a byte trie (Gemma has 6,415 added
// tokens, 6,322 of them starting with '<').
type addedMatcher struct {
	ids        map[string]int
	content    map[int]string
	decodeForm map[int]string   // normalized=true tokens: the normalized content, which decoders see
	root       [256]int32       // the trie node after a first byte; 0: no token starts with it
	edges      map[uint64]int32 // node<<8 | byte -> the next node
	end        []int32          // end[node]: id+1 of the token ending there, 0 if none
	// onlyFirst is the one first byte all tokens share, or -1; then the scan
	// is a strings.IndexByte.
	onlyFirst int
	none      bool
	flags     map[int]addedToken // by id, for addedSplits
}

func (m *addedMatcher) build(tokens []addedToken) {
	m.onlyFirst = -1
	m.none = len(tokens) == 0
	m.flags = map[int]addedToken{}
	m.edges = map[uint64]int32{}
	m.end = []int32{0} // node 0 is the root
	firsts := map[byte]bool{}
	for _, tok := range tokens {
		m.flags[tok.id] = tok
		c := tok.content
		firsts[c[0]] = true
		n := m.root[c[0]]
		if n == 0 {
			n = int32(len(m.end))
			m.end = append(m.end, 0)
			m.root[c[0]] = n
		}
		for k := 1; k < len(c); k++ {
			key := uint64(n)<<8 | uint64(c[k])
			next, ok := m.edges[key]
			if !ok {
				next = int32(len(m.end))
				m.end = append(m.end, 0)
				m.edges[key] = next
			}
			n = next
		}
		if m.end[n] == 0 { // the first of two tokens with the same content wins
			m.end[n] = int32(tok.id) + 1
		}
	}
	if len(firsts) == 1 {
		for b := range firsts {
			m.onlyFirst = int(b)
		}
	}
}

// find returns the first added token at or after s[from:]: its start, end
// and id; start is -1 if there is none.
func (m *addedMatcher) find(s string, from int) (start, end, id int) {
	if m.none {
		return -1, -1, 0
	}
	for i := from; i < len(s); i++ {
		if m.onlyFirst >= 0 {
			k := strings.IndexByte(s[i:], byte(m.onlyFirst))
			if k < 0 {
				return -1, -1, 0
			}
			i += k
		}
		n := m.root[s[i]]
		if n == 0 {
			continue
		}
		best, bestID := -1, int32(0)
		if m.end[n] != 0 {
			best, bestID = i+1, m.end[n]
		}
		for j := i + 1; j < len(s); j++ {
			next, ok := m.edges[uint64(n)<<8|uint64(s[j])]
			if !ok {
				break
			}
			n = next
			if m.end[n] != 0 {
				best, bestID = j+1, m.end[n]
			}
		}
		if best >= 0 {
			return i, best, int(bestID - 1)
		}
	}
	return -1, -1, 0
}

// addedSplits is Hugging Face's AddedVocabulary::find_matches: the added
// tokens in s (leftmost-longest, non-overlapping, searched from the end of
// the previous match), a single_word token skipped where a word character
// touches it, lstrip/rstrip tokens taking the whitespace beside them; and
// the text between them. Each result is [start, end, id] with id -1 for text.
func (m *addedMatcher) addedSplits(s string, dst [][3]int) [][3]int {
	if s == "" {
		return dst
	}
	startOffset := 0
	for from := 0; from < len(s); {
		start, stop, id := m.find(s, from)
		if start < 0 {
			break
		}
		from = stop
		tok := m.flags[id]
		if tok.singleWord {
			startSpace := start == 0 || !endsWithWord(s[:start])
			stopSpace := stop == len(s) || !startsWithWord(s[stop:])
			if !startSpace || !stopSpace {
				continue
			}
		}
		if tok.lstrip {
			start = max(len(strings.TrimRightFunc(s[:start], unicode.IsSpace)), startOffset)
		}
		if tok.rstrip {
			stop += len(s[stop:]) - len(strings.TrimLeftFunc(s[stop:], unicode.IsSpace))
		}
		if startOffset < start {
			dst = append(dst, [3]int{startOffset, start, -1})
		}
		dst = append(dst, [3]int{start, stop, id})
		startOffset = stop
	}
	if startOffset != len(s) {
		dst = append(dst, [3]int{startOffset, len(s), -1})
	}
	return dst
}

// isWordChar is Rust regex's Unicode \w: Alphabetic, marks, decimal
// digits, connector punctuation and the joiners.
func isWordChar(c rune) bool {
	return unicode.IsLetter(c) || unicode.IsMark(c) || unicode.Is(unicode.Nd, c) || unicode.Is(unicode.Pc, c) ||
		unicode.Is(unicode.Nl, c) || unicode.Is(unicode.Other_Alphabetic, c) || c == 0x200C || c == 0x200D
}

func endsWithWord(s string) bool {
	c, size := utf8.DecodeLastRuneInString(s)
	return size > 0 && isWordChar(c)
}

func startsWithWord(s string) bool {
	c, size := utf8.DecodeRuneInString(s)
	return size > 0 && isWordChar(c)
}
