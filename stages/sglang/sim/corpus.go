package sim

import (
	"math/rand/v2"
	"sort"
	"strconv"
	"strings"
	"sync"
)

// Output text comes from two precomputed corpora (thinking-style and
// answer-style prose) so that a response is a few slices of ready-made bytes:
// raw text, JSON-escaped text and comma-separated ids per token. A request
// picks a paragraph start and a length; nothing is generated per request.
//
// Without a tokenizer, every corpus word, punctuation mark and paragraph
// break is one token with a fixed id: punctuation and newlines get their real
// Qwen2/Qwen3 byte-level ids ("," 11, "." 13, "\n" 198, "\n\n" 271), words get
// a stable hash-derived id in [1000, 151643), below Qwen3's special tokens.
// With a tokenizer, the same prose is encoded by it, sentence by sentence,
// and each token's text is its decoded id.

// Qwen3 special and well-known token ids.
const (
	idEndOfText  = 151643 // <|endoftext|>
	idImStart    = 151644 // <|im_start|>
	idImEnd      = 151645 // <|im_end|>: the EOS a stopped output ends with
	idThinkStart = 151667 // <think>
	idThinkEnd   = 151668 // </think>
	idNewline    = 198    // "\n"
	idNewlines2  = 271    // "\n\n"
)

// corpus is a token sequence with per-token byte offsets into three parallel
// renderings. Offsets have len(ids)+1 entries.
type corpus struct {
	text, esc, idj      []byte  // raw text; JSON-escaped text; "id," per token
	ids                 []int32 // token ids
	textOff, escOff     []uint32
	idjOff              []uint32
	starts              []int32 // paragraph-start token indexes, ascending
	ends                []int32 // sentence-end token indexes (exclusive), ascending
	limitStart, maxSpan int     // a span starts before limitStart and is at most maxSpan long
}

func (c *corpus) add(text string, id int32) {
	c.text = append(c.text, text...)
	c.esc = appendEscaped(c.esc, text)
	c.idj = strconv.AppendInt(c.idj, int64(id), 10)
	c.idj = append(c.idj, ',')
	c.ids = append(c.ids, id)
	c.textOff = append(c.textOff, uint32(len(c.text)))
	c.escOff = append(c.escOff, uint32(len(c.esc)))
	c.idjOff = append(c.idjOff, uint32(len(c.idj)))
}

func newCorpus() *corpus {
	return &corpus{textOff: []uint32{0}, escOff: []uint32{0}, idjOff: []uint32{0}}
}

func (c *corpus) len() int { return len(c.ids) }

// span picks a paragraph start from u in [0,1) and extends want tokens to the
// next sentence end (when it exists within maxSpan).
func (c *corpus) span(u float64, want int) (i, j int) {
	k := sort.Search(len(c.starts), func(k int) bool { return int(c.starts[k]) >= c.limitStart })
	i = int(c.starts[int(u*float64(k))%max(k, 1)])
	want = min(want, c.maxSpan)
	j = i + want
	e := sort.Search(len(c.ends), func(k int) bool { return int(c.ends[k]) >= j })
	if e < len(c.ends) && int(c.ends[e])-i <= c.maxSpan {
		j = int(c.ends[e])
	}
	return i, j
}

// Words for the two prose styles. ASCII without quotes or backslashes, so
// JSON escaping only ever touches newlines.
var (
	thinkOpeners  = []string{"Okay", "So", "Wait", "Hmm", "Let me", "First", "Then", "Now", "Alternatively", "But", "Also", "Actually", "Right", "Maybe", "I think", "Let me check", "Another way", "Hold on"}
	answerOpeners = []string{"The", "In short", "Here", "To", "This", "For example", "Note that", "Overall", "In practice", "First", "Second", "Finally", "As a result", "Therefore"}
	words         = strings.Fields(`the a an of to in for on with as by at from that this these those it its is are was were be been
		being have has had do does did can could should would will may might must not no yes and or but if then else when while
		because since so than too very more most less least each every all some any many few other such same different new old
		first second third last next previous number value answer question problem solution step steps case cases example
		function equation term terms sum product difference ratio total result results point points line lines angle side sides
		area length width height time rate speed distance cost price amount part parts whole half quarter percent count list set
		order sequence pattern rule method approach idea reason way check compute calculate find solve simplify assume suppose
		consider note notice see know think need want get make take give use try start end keep hold move add subtract multiply
		divide compare count measure estimate verify confirm double mean median mode range integer fraction decimal prime even
		odd positive negative zero one two three four five six seven eight nine ten hundred thousand user wants asks given means
		say says said write wrote read data input output string array list map key index loop condition variable type code test
		error edge boundary small large big little long short high low early late fast slow simple hard easy clear likely
		possible correct wrong true false right left above below before after again once twice here there now still already
		just only also even perhaps probably certainly maybe actually basically exactly roughly nearly almost about around`)
)

// wordID is the approximate id of a word token (with its leading space, if any).
func wordID(tok string) int32 {
	switch tok {
	case ",":
		return 11
	case ".":
		return 13
	case "?":
		return 30
	case ":":
		return 25
	case "\n":
		return idNewline
	case "\n\n":
		return idNewlines2
	}
	h := fnv64(0, []byte(tok))
	return int32(1000 + h%(idEndOfText-1000))
}

// writeProse appends prose of at least n tokens through emit, calling it once
// per piece ("Okay", ",", " let", ".", "\n\n") with sentence and paragraph
// boundaries marked. rng is fixed so the corpus never changes.
func writeProse(n int, openers []string, emit func(piece string, sentenceStart, paragraphStart, sentenceEnd bool)) {
	rng := rand.New(rand.NewPCG(0x5eed, uint64(len(openers))))
	count := 0
	for count < n {
		sentences := 2 + rng.IntN(4)
		for s := 0; s < sentences; s++ {
			first := true
			opener := openers[rng.IntN(len(openers))]
			for wi, w := range strings.Fields(opener) {
				piece := w
				if !(s == 0 && wi == 0) {
					piece = " " + w
				}
				emit(piece, wi == 0, wi == 0 && s == 0, false)
				first = false
				count++
			}
			if rng.IntN(3) == 0 {
				emit(",", false, false, false)
				count++
			}
			nw := 5 + rng.IntN(16)
			for k := 0; k < nw; k++ {
				emit(" "+words[rng.IntN(len(words))], first, false, false)
				first = false
				count++
				if k > 2 && k < nw-2 && rng.IntN(9) == 0 {
					emit(",", false, false, false)
					count++
				}
			}
			end := "."
			switch rng.IntN(10) {
			case 0:
				end = "?"
			case 1:
				end = ":"
			}
			emit(end, false, false, true)
			count++
		}
		emit("\n\n", false, false, false)
		count++
	}
}

// corpusTokens is the span headroom: corpora hold corpusStarts tokens of
// possible starting points plus room for the longest span.
const (
	corpusStarts = 1 << 16
	maxSpanLimit = 1 << 16
)

// buildCorpus builds a prose corpus; tok nil means the approximation.
func buildCorpus(openers []string, tok Tokenizer) *corpus {
	c := newCorpus()
	c.limitStart, c.maxSpan = corpusStarts, maxSpanLimit
	var pending strings.Builder // tokenizer mode: one sentence at a time
	flush := func() {
		if pending.Len() == 0 {
			return
		}
		for _, id := range tok.Encode(pending.String()) {
			c.add(tok.Decode([]int{id}), int32(id))
		}
		pending.Reset()
	}
	writeProse(corpusStarts+maxSpanLimit+64, openers, func(piece string, sentenceStart, paragraphStart, sentenceEnd bool) {
		if tok != nil && (sentenceStart || piece == "\n\n") {
			flush()
		}
		if paragraphStart {
			c.starts = append(c.starts, int32(c.len()))
		}
		if tok == nil {
			c.add(piece, wordID(piece))
		} else {
			pending.WriteString(piece)
		}
		if sentenceEnd {
			if tok != nil {
				flush()
			}
			c.ends = append(c.ends, int32(c.len()))
		}
	})
	if tok != nil {
		flush()
	}
	return c
}

// specials holds the fixed tokens outputs are framed with, one token each.
type specials struct {
	c                                                          *corpus
	thinkStart, newline, thinkEnd, newlines2, eosSkip, eosKeep int
}

func buildSpecials(tok Tokenizer) *specials {
	s := &specials{c: newCorpus()}
	add := func(text string, id int32, skipText string) int {
		if tok != nil && text != "" {
			if ids := tok.Encode(text); len(ids) == 1 {
				id = int32(ids[0])
			}
		}
		s.c.add(skipText, id)
		return s.c.len() - 1
	}
	s.thinkStart = add("<think>", idThinkStart, "<think>")
	s.newline = add("\n", idNewline, "\n")
	s.thinkEnd = add("</think>", idThinkEnd, "</think>")
	s.newlines2 = add("\n\n", idNewlines2, "\n\n")
	s.eosSkip = add("", idImEnd, "") // skip_special_tokens (the default) drops its text
	s.eosKeep = add("<|im_end|>", idImEnd, "<|im_end|>")
	return s
}

// texts is everything outputs are cut from; immutable once built.
type texts struct {
	think, answer *corpus
	sp            *specials
	tok           Tokenizer
}

// approxTexts is shared by every fleet without a tokenizer: it is immutable
// and takes a few tens of milliseconds to build.
var approxTexts = sync.OnceValue(func() *texts { return buildTexts(nil) })

func buildTexts(tok Tokenizer) *texts {
	return &texts{think: buildCorpus(thinkOpeners, tok), answer: buildCorpus(answerOpeners, tok), sp: buildSpecials(tok), tok: tok}
}

// appendEscaped appends s JSON-escaped without quotes.
func appendEscaped(dst []byte, s string) []byte {
	const hex = "0123456789abcdef"
	for i := 0; i < len(s); i++ {
		b := s[i]
		switch {
		case b == '"' || b == '\\':
			dst = append(dst, '\\', b)
		case b == '\n':
			dst = append(dst, '\\', 'n')
		case b == '\r':
			dst = append(dst, '\\', 'r')
		case b == '\t':
			dst = append(dst, '\\', 't')
		case b < 0x20:
			dst = append(dst, '\\', 'u', '0', '0', hex[b>>4], hex[b&15])
		default:
			dst = append(dst, b)
		}
	}
	return dst
}

// appendJSONString appends s as a JSON string with quotes.
func appendJSONString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	dst = appendEscaped(dst, s)
	return append(dst, '"')
}

// fnv64 is FNV-1a over b, continuing from h (0 starts fresh).
func fnv64(h uint64, b []byte) uint64 {
	if h == 0 {
		h = 14695981039346656037
	}
	for _, c := range b {
		h ^= uint64(c)
		h *= 1099511628211
	}
	return h
}

// mix hashes a few words into one (splitmix64 finalizer over a running sum).
func mix(xs ...uint64) uint64 {
	var h uint64 = 0x9e3779b97f4a7c15
	for _, x := range xs {
		h ^= x + 0x9e3779b97f4a7c15 + (h << 6) + (h >> 2)
		h ^= h >> 30
		h *= 0xbf58476d1ce4e5b9
		h ^= h >> 27
		h *= 0x94d049bb133111eb
		h ^= h >> 31
	}
	return h
}

// unitFloat maps a hash to [0, 1).
func unitFloat(h uint64) float64 { return float64(h>>11) / (1 << 53) }
