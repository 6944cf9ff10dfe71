package sim

import (
	"math"
	"strconv"
	"strings"
)

// segment is tokens [i, j) of a corpus.
type segment struct {
	c    *corpus
	i, j int32
}

func (s segment) n() int { return int(s.j - s.i) }

// output is one request's full (untruncated) completion as a list of corpus
// segments. Truncation to max_new_tokens happens when rendering.
type output struct {
	segs  [16]segment
	nsegs int
	total int     // tokens, EOS included
	spec  float64 // accepted tokens per verify step; 0 when spec is off
	// ids, when a real tokenizer is configured, are the canonical ids of the
	// whole output (its text encoded at once, as a model trained on canonical
	// tokenizations emits them); they then replace the segments' ids, which
	// were encoded sentence by sentence and split tokens like ".\n\n".
	ids     []int
	tok     Tokenizer
	keepEOS bool // the EOS's text is shown (skip_special_tokens=false)
}

// canonicalize re-encodes the whole output text with the tokenizer, keeping
// the EOS token last whether or not its text is shown.
func (o *output) canonicalize(tok Tokenizer, keepEOS bool) {
	text := o.text(0, o.total)
	ids := tok.Encode(text)
	if !keepEOS {
		ids = append(ids, idImEnd)
	}
	o.ids, o.tok, o.total, o.keepEOS = ids, tok, len(ids), keepEOS
}

func (o *output) push(c *corpus, i, j int) {
	if j > i {
		o.segs[o.nsegs] = segment{c, int32(i), int32(j)}
		o.nsegs++
		o.total += j - i
	}
}

func (o *output) pushSpecial(sp *specials, k int) { o.push(sp.c, k, k+1) }

// lognormal draws a length with the given mean from two uniform hashes.
func lognormal(mean float64, sigma float64, u1, u2 float64) float64 {
	z := math.Sqrt(-2*math.Log(1-u1)) * math.Cos(2*math.Pi*u2)
	return math.Exp(math.Log(mean) - sigma*sigma/2 + sigma*z)
}

// plan builds the completion for a request whose content hashes to h.
// thinking says whether the model thinks first (Qwen3 with enable_thinking);
// forced that the prompt opened the think block, so the output does not.
// tools are the prompt's declared tools: the answer may call one
// (tools.go).
func (t *texts) plan(cfg *Config, h uint64, thinking, forced bool, faults faultSet, keepEOS bool, tools []toolSpec) output {
	var o output
	sp := t.sp
	h = mix(h, cfg.Seed)
	thinkLen, answerLen := drawLengths(cfg, h)
	ti, tj := t.think.span(unitFloat(mix(h, 5)), thinkLen)
	ai, aj := t.answer.span(unitFloat(mix(h, 6)), answerLen)
	call := drawToolCall(cfg, h, tools, faults)
	if call != nil {
		// A short answer before the call, or none.
		aj = ai + min(aj-ai, 48)
		if unitFloat(mix(h, 24)) < 0.5 {
			aj = ai
		}
	}
	if faults.has(FaultEmptyThinking) {
		tj = ti
	}
	if faults.has(FaultEmptyAnswer) {
		aj = ai
	}
	if thinking {
		o.pushThink(t, ti, tj, forced, faults)
	}
	if !thinking || !faults.has(FaultNoThinkEnd) {
		o.pushAnswer(t, ai, aj, call, faults)
	}
	if keepEOS {
		o.pushSpecial(sp, sp.eosKeep)
	} else {
		o.pushSpecial(sp, sp.eosSkip)
	}
	o.spec = specAccept(cfg, h, faults)
	if t.tok != nil {
		o.canonicalize(t.tok, keepEOS)
	}
	return o
}

// pushThink pushes the think block with think text [i, j): its opening
// unless the prompt forced it open, and its end unless a fault drops it.
func (o *output) pushThink(t *texts, i, j int, forced bool, faults faultSet) {
	sp := t.sp
	if !forced {
		o.pushSpecial(sp, sp.thinkStart)
		o.pushSpecial(sp, sp.newline)
	}
	o.push(t.think, i, j)
	if !faults.has(FaultNoThinkEnd) {
		o.pushThinkEnd(sp)
	}
}

// pushThinkEnd pushes "\n</think>\n\n".
func (o *output) pushThinkEnd(sp *specials) {
	o.pushSpecial(sp, sp.newline)
	o.pushSpecial(sp, sp.thinkEnd)
	o.pushSpecial(sp, sp.newlines2)
}

// pushAnswer pushes answer text [i, j), with a stray think end in its
// middle under FaultLeakedThink, then the tool call if there is one.
func (o *output) pushAnswer(t *texts, i, j int, call *toolCall, faults faultSet) {
	if faults.has(FaultLeakedThink) {
		mid := i + (j-i)/2
		o.push(t.answer, i, mid)
		o.pushThinkEnd(t.sp)
		o.push(t.answer, mid, j)
	} else {
		o.push(t.answer, i, j)
	}
	if call == nil {
		return
	}
	if j > i {
		o.pushSpecial(t.sp, t.sp.newlines2)
	}
	tc := toolCallCorpus(call)
	o.push(tc, 0, tc.len())
}

// specAccept is the output's mean speculative accept length: 0 without
// speculative decoding, else SpecAcceptMean varied by ±25% per request
// (at least 1), or the collapsed length under FaultSpecCollapse.
func specAccept(cfg *Config, h uint64, faults faultSet) float64 {
	if cfg.SpecAcceptMean <= 0 {
		return 0
	}
	if faults.has(FaultSpecCollapse) {
		return collapsedAccept
	}
	return max(1, cfg.SpecAcceptMean*(0.75+0.5*unitFloat(mix(h, 7))))
}

// appendEscText appends the JSON-escaped text of the first n tokens.
func (o *output) appendEscText(dst []byte, n int) []byte {
	if o.ids != nil {
		return appendEscaped(dst, o.text(0, n))
	}
	for k := 0; k < o.nsegs && n > 0; k++ {
		s := o.segs[k]
		j := s.i + int32(min(n, s.n()))
		dst = append(dst, s.c.esc[s.c.escOff[s.i]:s.c.escOff[j]]...)
		n -= int(j - s.i)
	}
	return dst
}

// appendIDs appends the first n ids as a JSON array.
func (o *output) appendIDs(dst []byte, n int) []byte {
	dst = append(dst, '[')
	if o.ids != nil {
		for k, id := range o.ids[:min(n, len(o.ids))] {
			if k > 0 {
				dst = append(dst, ',')
			}
			dst = strconv.AppendInt(dst, int64(id), 10)
		}
		return append(dst, ']')
	}
	start := len(dst)
	for k := 0; k < o.nsegs && n > 0; k++ {
		s := o.segs[k]
		j := s.i + int32(min(n, s.n()))
		dst = append(dst, s.c.idj[s.c.idjOff[s.i]:s.c.idjOff[j]]...)
		n -= int(j - s.i)
	}
	if len(dst) > start {
		dst = dst[:len(dst)-1] // the last id's comma
	}
	return append(dst, ']')
}

// text returns the raw text of tokens [from, n).
func (o *output) text(from, n int) string {
	if o.ids != nil {
		n = min(n, len(o.ids))
		if from >= n {
			return ""
		}
		// Shown text skips the EOS as skip_special_tokens does.
		ids := o.ids[from:n]
		if n == len(o.ids) && !o.keepEOS {
			ids = ids[:len(ids)-1]
		}
		return o.tok.Decode(ids)
	}
	var b strings.Builder
	pos := 0
	for k := 0; k < o.nsegs && pos < n; k++ {
		s := o.segs[k]
		lo := max(from-pos, 0)
		hi := min(n-pos, s.n())
		if lo < hi {
			b.Write(s.c.text[s.c.textOff[int(s.i)+lo]:s.c.textOff[int(s.i)+hi]])
		}
		pos += s.n()
	}
	return b.String()
}

// specVerify returns spec_verify_ct for n completion tokens.
func (o *output) specVerify(n int) int {
	if n == 0 {
		return 0
	}
	return int(math.Ceil(float64(n) / o.spec))
}

// splitReasoning applies the qwen3 reasoning parser to a completion's text:
// without "<think>" it is all content; with "<think>" and no "</think>" it is
// all reasoning; otherwise reasoning is before the first "</think>". Both are
// whitespace-trimmed; "" means null.
func splitReasoning(text string) (reasoning, content string) {
	if !strings.Contains(text, "<think>") {
		return "", strings.TrimSpace(text)
	}
	text = strings.TrimSpace(strings.Replace(text, "<think>", "", 1))
	r, c, found := strings.Cut(text, "</think>")
	if !found {
		return strings.TrimSpace(text), ""
	}
	return strings.TrimSpace(r), strings.TrimSpace(c)
}
