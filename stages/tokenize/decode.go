package tokenize

import "strings"

// A decoder turns token strings back into text (tokenizer.json "decoder"),
// as Hugging Face's Decoder::decode_chain: tokens in, tokens out; the
// results are concatenated at the end.
type decoder interface {
	decodeChain(tokens []string) []string
}

type decSequence []decoder

func (s decSequence) decodeChain(tokens []string) []string {
	for _, d := range s {
		tokens = d.decodeChain(tokens)
	}
	return tokens
}

// byteLevelDec maps each token's byte-level characters back to bytes; a
// token with a character outside the alphabet is kept as written. Unlike
// Hugging Face, invalid UTF-8 is left as it is (see Decode).
type byteLevelDec struct{}

func (byteLevelDec) decodeChain(tokens []string) []string {
	var sb strings.Builder
	for _, tok := range tokens {
		if b, ok := byteLevelDecode(tok); ok {
			sb.WriteString(b)
		} else {
			sb.WriteString(tok)
		}
	}
	return []string{sb.String()}
}

// byteFallbackDec turns runs of <0xXX> tokens into their bytes (kept as
// bytes even where they are not valid UTF-8, where Hugging Face writes one
// U+FFFD per byte).
type byteFallbackDec struct{}

func (byteFallbackDec) decodeChain(tokens []string) []string {
	out := tokens[:0:0]
	var run []byte
	for _, tok := range tokens {
		if b, ok := byteToken(tok); ok {
			run = append(run, b)
			continue
		}
		if len(run) > 0 {
			out = append(out, string(run))
			run = run[:0]
		}
		out = append(out, tok)
	}
	if len(run) > 0 {
		out = append(out, string(run))
	}
	return out
}

// byteToken parses "<0xXX>" (six characters, hex digits either case).
func byteToken(tok string) (byte, bool) {
	if len(tok) != 6 || !strings.HasPrefix(tok, "<0x") || tok[5] != '>' {
		return 0, false
	}
	hi, ok1 := hexDigit(tok[3])
	lo, ok2 := hexDigit(tok[4])
	return hi<<4 | lo, ok1 && ok2
}

func hexDigit(c byte) (byte, bool) {
	switch {
	case c >= '0' && c <= '9':
		return c - '0', true
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10, true
	case c >= 'A' && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

type fuseDec struct{}

func (fuseDec) decodeChain(tokens []string) []string {
	return []string{strings.Join(tokens, "")}
}

// stripDec removes up to start leading and stop trailing content characters
// from each token.
type stripDec struct {
	content     rune
	start, stop int
}

func (d stripDec) decodeChain(tokens []string) []string {
	out := make([]string, len(tokens))
	for i, tok := range tokens {
		rs := []rune(tok)
		a := 0
		for a < d.start && a < len(rs) && rs[a] == d.content {
			a++
		}
		b := len(rs)
		for k := 0; k < d.stop && b > a && rs[b-1] == d.content; k++ {
			b--
		}
		out[i] = string(rs[a:b])
	}
	return out
}

// replaceDec replaces a pattern's matches in each token.
type replaceDec struct {
	pattern splitPattern
	content string
}

func (d replaceDec) decodeChain(tokens []string) []string {
	out := make([]string, len(tokens))
	for i, tok := range tokens {
		var sb strings.Builder
		prev := 0
		for _, m := range d.pattern.find(tok, nil) {
			sb.WriteString(tok[prev:m[0]])
			sb.WriteString(d.content)
			prev = m[1]
		}
		sb.WriteString(tok[prev:])
		out[i] = sb.String()
	}
	return out
}

// metaspaceDec turns the replacement character into a space; in the first
// token it is dropped instead (every one of them, as Hugging Face does)
// unless prepend_scheme is "never".
type metaspaceDec struct {
	replacement rune
	scheme      string
}

func (d metaspaceDec) decodeChain(tokens []string) []string {
	out := make([]string, len(tokens))
	for i, tok := range tokens {
		var sb strings.Builder
		for _, c := range tok {
			switch {
			case c != d.replacement:
				sb.WriteRune(c)
			case i == 0 && d.scheme != "never":
			default:
				sb.WriteByte(' ')
			}
		}
		out[i] = sb.String()
	}
	return out
}

// joinSpace is what Hugging Face does without a decoder: tokens joined by
// a space.
type joinSpace struct{}

func (joinSpace) decodeChain(tokens []string) []string {
	return []string{strings.Join(tokens, " ")}
}

// decodeWith runs the decoder over the ids' token strings.
func (t *Tokenizer) decodeWith(ids []int) string {
	tokens := make([]string, 0, len(ids))
	for _, id := range ids {
		if s, ok := t.added.decodeForm[id]; ok {
			tokens = append(tokens, s)
		} else if s, ok := t.Token(id); ok {
			tokens = append(tokens, s)
		}
	}
	if len(tokens) == 0 {
		return ""
	}
	return strings.Join(t.decoder.decodeChain(tokens), "")
}

// DecodeOffsets is Decode that also returns, for each id, the byte range
// [start, end) of the text it stands for there; ranges tile the text in
// order, unknown ids get an empty one. A token's length in context is not
// its length decoded alone where the decoder treats the first token apart:
// Metaspace drops a leading ▁ there that is a space elsewhere, and Llama 2's
// Strip removes the text's first space. So, as Hugging Face's DecodeStream
// (tokenizers/src/tokenizer/mod.rs, DecodeStream::step) does, each token's
// text is what it adds to the decoding of the token before it. Where that
// does not tile the text (a decoder whose output depends on more context),
// each end is taken from decoding the whole prefix instead, which is exact
// but quadratic.
func (t *Tokenizer) DecodeOffsets(ids []int) (text string, offsets [][2]int) {
	offsets = make([][2]int, len(ids))
	known := func(id int) bool { _, ok := t.Token(id); return ok }
	if t.decoder == nil {
		pos := 0
		for i, id := range ids {
			if id >= 0 && id < t.tokenBytes.len() {
				offsets[i] = [2]int{pos, pos + t.tokenBytes.size(id)}
				pos += t.tokenBytes.size(id)
			} else {
				offsets[i] = [2]int{pos, pos}
			}
		}
		return t.Decode(ids), offsets
	}
	text = t.Decode(ids)
	pos, prev := 0, -1
	pair := make([]int, 0, 2)
	tiles := true
	for i, id := range ids {
		piece := ""
		if known(id) {
			if prev < 0 {
				piece = t.Decode([]int{id})
			} else {
				pair = append(pair[:0], prev, id)
				both, alone := t.Decode(pair), t.Decode(pair[:1])
				if !strings.HasPrefix(both, alone) {
					tiles = false
					break
				}
				piece = both[len(alone):]
			}
			prev = id
		}
		n := len(piece)
		if !strings.HasPrefix(text[pos:], piece) {
			tiles = false
			break
		}
		offsets[i] = [2]int{pos, pos + n}
		pos += n
	}
	if tiles && pos == len(text) {
		return text, offsets
	}
	pos = 0
	for i := range ids {
		end := max(pos, min(len(t.Decode(ids[:i+1])), len(text)))
		offsets[i] = [2]int{pos, end}
		pos = end
	}
	if len(ids) > 0 {
		offsets[len(ids)-1][1] = len(text)
	}
	return text, offsets
}
