package tokenize

import (
	"sort"
	"strings"
)

type addedToken struct {
	content string
	id      int
}

// addedMatcher finds added tokens (special or not) in text, leftmost first
// and longest first among those starting at the same byte, as Hugging Face's
// added-vocabulary split does.
type addedMatcher struct {
	ids     map[string]int
	content map[int]string
	// byFirst[b] lists the tokens starting with byte b, longest first.
	byFirst [256][]addedToken
	// onlyFirst is the one first byte all tokens share, or -1; then the scan
	// is a strings.IndexByte.
	onlyFirst int
	none      bool
}

func (m *addedMatcher) build(tokens []addedToken) {
	m.onlyFirst = -1
	m.none = len(tokens) == 0
	firsts := map[byte]bool{}
	for _, tok := range tokens {
		b := tok.content[0]
		m.byFirst[b] = append(m.byFirst[b], tok)
		firsts[b] = true
	}
	for b := range m.byFirst {
		sort.SliceStable(m.byFirst[b], func(i, j int) bool {
			return len(m.byFirst[b][i].content) > len(m.byFirst[b][j].content)
		})
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
		for _, tok := range m.byFirst[s[i]] {
			if strings.HasPrefix(s[i:], tok.content) {
				return i, i + len(tok.content), tok.id
			}
		}
	}
	return -1, -1, 0
}
