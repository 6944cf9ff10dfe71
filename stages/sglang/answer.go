package sglang

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/pipe-dev/pipe/pipeline/record"
)

// The answer types below read a 200 body with go-json-experiment/json. They
// are lenient the way the protocol notes ask (unknown fields ignored, a
// number may come as a string or null, a field may be missing or of another
// kind, a name may repeat) and strict about structure: a torn or malformed
// body, or anything after the top-level object, is an error.

// answerOpts: a repeated name is read again (the last one wins, objects
// merge); invalid UTF-8 and lone surrogates become U+FFFD, as encoding/json
// does. The library's nesting limit (10,000) bounds a hostile body's depth.
var answerOpts = json.JoinOptions(jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true))

// nativeAnswer is POST /generate's answer.
type nativeAnswer struct {
	Text      text               `json:"text"`
	OutputIDs tokenIDs           `json:"output_ids"`
	MetaInfo  object[nativeMeta] `json:"meta_info"`
}

type nativeMeta struct {
	FinishReason     finish `json:"finish_reason"`
	PromptTokens     count  `json:"prompt_tokens"`
	CompletionTokens count  `json:"completion_tokens"`
	CachedTokens     count  `json:"cached_tokens"`
	ReasoningTokens  count  `json:"reasoning_tokens"`
	meta             `json:",inline"`
}

// meta are the meta_info members both APIs share: load, latency and
// speculative figures, named as in SGLang's tokenizer_manager.py (2026),
// with the older aliases of the draft counts.
type meta struct {
	E2ELatency            figure `json:"e2e_latency"`
	SpecVerifyCt          count  `json:"spec_verify_ct"`
	SpecAcceptLength      figure `json:"spec_accept_length"`
	SpecAcceptRate        figure `json:"spec_accept_rate"`
	SpecNumCorrectDrafts  count  `json:"spec_num_correct_drafts"`
	SpecAcceptedDrafts    count  `json:"spec_accepted_drafts"`
	SpecAcceptTokenNum    count  `json:"spec_accept_token_num"`
	SpecNumProposedDrafts count  `json:"spec_num_proposed_drafts"`
	SpecProposedDrafts    count  `json:"spec_proposed_drafts"`
	SpecDraftTokenNum     count  `json:"spec_draft_token_num"`
	NumRunningReqs        count  `json:"num_running_reqs"`
	NumWaitingReqs        count  `json:"num_waiting_reqs"`
	// num_retractions; total_retractions in the 2026-03 docs build.
	NumRetractions   count `json:"num_retractions"`
	TotalRetractions count `json:"total_retractions"`
}

// chatAnswer is POST /v1/chat/completions' answer.
type chatAnswer struct {
	Choices choices       `json:"choices"`
	Usage   object[usage] `json:"usage"`
	// Some SGLang versions attach meta_info-like figures to chat answers.
	MetaInfo object[meta] `json:"meta_info"`
}

type choice struct {
	Message      object[message] `json:"message"`
	FinishReason finish          `json:"finish_reason"`
	MatchedStop  stop            `json:"matched_stop"`
	// Per choice, sent with return_meta_info: true (serving_chat.py,
	// SGLang 2026).
	MetaInfo object[meta] `json:"meta_info"`
	// Per choice, sent with return_token_ids: true (protocol.py's
	// ChatCompletionResponseChoice, SGLang 2026-07): the sampled ids as
	// /generate's output_ids, before the reasoning split, and the
	// prompt's ids. response_token_ids is the name one SGLang test reads.
	TokenIDs         tokenIDs `json:"token_ids"`
	ResponseTokenIDs tokenIDs `json:"response_token_ids"`
	PromptTokenIDs   tokenIDs `json:"prompt_token_ids"`
}

type message struct {
	Content          text      `json:"content"`
	ReasoningContent text      `json:"reasoning_content"`
	ToolCalls        toolCalls `json:"tool_calls"`
}

type usage struct {
	PromptTokens        count `json:"prompt_tokens"`
	CompletionTokens    count `json:"completion_tokens"`
	ReasoningTokens     count `json:"reasoning_tokens"`
	PromptTokensDetails object[struct {
		CachedTokens count `json:"cached_tokens"`
	}] `json:"prompt_tokens_details"`
	CompletionTokensDetails object[struct {
		ReasoningTokens count `json:"reasoning_tokens"`
	}] `json:"completion_tokens_details"`
}

// parseResult decodes a 200 body of api into r. mode says how the output
// begins, for splitting raw text when the server did not.
func parseResult(api API, body []byte, mode ThinkMode, r *Result) error {
	if api == APIGenerate {
		return parseNative(body, mode, r)
	}
	return parseChat(body, mode, r)
}

func parseNative(body []byte, mode ThinkMode, r *Result) error {
	if firstByte(body) == '[' {
		return fmt.Errorf("bad /generate response: a list (batch) where one result was expected")
	}
	var a nativeAnswer
	if err := decodeObject(body, &a); err != nil {
		return fmt.Errorf("bad /generate response: %s", err)
	}
	m := &a.MetaInfo.v
	r.Text = a.Text.s
	r.OutputIDs = a.OutputIDs
	r.FinishReason, r.MatchedStop, r.AbortMessage = m.FinishReason.reason, m.FinishReason.matched.v, m.FinishReason.message.s
	r.PromptTokens, r.CompletionTokens = m.PromptTokens.n, m.CompletionTokens.n
	r.CachedTokens, r.ReasoningTokens = m.CachedTokens.n, m.ReasoningTokens.n
	m.apply(r)
	r.dropped = m.dropped(nil)
	deriveAcceptLength(r)
	r.Reasoning, r.Answer = mode.Split(r.Text)
	return nil
}

func parseChat(body []byte, mode ThinkMode, r *Result) error {
	var a chatAnswer
	if err := decodeObject(body, &a); err != nil {
		return fmt.Errorf("bad chat response: %s", err)
	}
	ch := &a.Choices.first
	r.FinishReason, r.AbortMessage = ch.FinishReason.reason, ch.FinishReason.message.s
	r.MatchedStop = ch.FinishReason.matched.v
	if ch.MatchedStop.v != nil {
		r.MatchedStop = ch.MatchedStop.v
	}
	u := &a.Usage.v
	r.PromptTokens, r.CompletionTokens = u.PromptTokens.n, u.CompletionTokens.n
	r.CachedTokens = u.PromptTokensDetails.v.CachedTokens.n
	r.ReasoningTokens = u.ReasoningTokens.n
	if r.ReasoningTokens == 0 {
		r.ReasoningTokens = u.CompletionTokensDetails.v.ReasoningTokens.n
	}
	r.OutputIDs = ch.TokenIDs
	if r.OutputIDs == nil {
		r.OutputIDs = ch.ResponseTokenIDs
	}
	r.PromptIDs = ch.PromptTokenIDs
	ch.MetaInfo.v.apply(r)
	a.MetaInfo.v.apply(r)
	r.dropped = a.MetaInfo.v.dropped(u.dropped(ch.MetaInfo.v.dropped(nil)))
	deriveAcceptLength(r)
	if a.Choices.n == 0 {
		return fmt.Errorf("bad chat response: no choices")
	}
	if err := ch.Message.v.ToolCalls.err; err != nil {
		return fmt.Errorf("bad chat response: tool_calls: %v", err)
	}
	r.ToolCalls = ch.Message.v.ToolCalls.calls
	splitChat(ch.Message.v, mode, r)
	return nil
}

// splitChat sets r's reasoning and answer from a chat message.
func splitChat(m message, mode ThinkMode, r *Result) {
	content, reasoning := m.Content, m.ReasoningContent
	switch {
	case mode == ThinkForced && strings.TrimSpace(reasoning.s) == "" && strings.Contains(content.s, "</think>"):
		// A reasoning parser that does not know the prompt opened the
		// reasoning (older SGLang without force_reasoning) finds no
		// <think> and leaves it all in content: split it here.
		r.Reasoning, r.Answer = SplitForcedThinking(content.s)
	case reasoning.ok:
		r.Reasoning, r.Answer = reasoning.s, content.s
	case content.ok && mode != ThinkOff:
		// No reasoning parser on the server: split the raw text here.
		r.Reasoning, r.Answer = mode.Split(content.s)
	case content.ok:
		r.Answer = content.s
	}
}

// apply sets r's figures that m holds; of a draft count's aliases the
// newest name that is set wins.
func (m *meta) apply(r *Result) {
	if m.E2ELatency.ok {
		r.ServerLatency = time.Duration(m.E2ELatency.f * float64(time.Second))
	}
	if m.SpecVerifyCt.ok {
		r.SpecVerifyCt = m.SpecVerifyCt.n
	}
	if m.SpecAcceptLength.ok {
		r.SpecAcceptLength = m.SpecAcceptLength.f
	}
	if m.SpecAcceptRate.ok {
		r.SpecAcceptRate = m.SpecAcceptRate.f
	}
	if n := firstSet(m.SpecNumCorrectDrafts, m.SpecAcceptedDrafts, m.SpecAcceptTokenNum); n != 0 {
		r.SpecCorrectDrafts = n
	}
	if n := firstSet(m.SpecNumProposedDrafts, m.SpecProposedDrafts, m.SpecDraftTokenNum); n != 0 {
		r.SpecProposedDrafts = n
	}
	if m.NumRunningReqs.ok {
		r.RunningReqs, r.LoadReported = m.NumRunningReqs.n, true
	}
	if m.NumWaitingReqs.ok {
		r.WaitingReqs, r.LoadReported = m.NumWaitingReqs.n, true
	}
	r.Retractions = max(r.Retractions, m.NumRetractions.n, m.TotalRetractions.n)
}

// dropped appends to names the figures of m that the server gave (a
// number or a string) but the parse read as absent: NaN, Inf, out of
// range. The client counts them per server ("dropped_spec_accept_length"),
// so a server's bad figures are named instead of silently zero. So do
// nativeMeta's and usage's.
func (m *meta) dropped(names []string) []string {
	return appendBad(names, named{"spec_verify_ct", m.SpecVerifyCt.bad},
		named{"spec_accept_length", m.SpecAcceptLength.bad}, named{"e2e_latency", m.E2ELatency.bad})
}

func (m *nativeMeta) dropped(names []string) []string {
	names = appendBad(names, named{"prompt_tokens", m.PromptTokens.bad}, named{"completion_tokens", m.CompletionTokens.bad},
		named{"cached_tokens", m.CachedTokens.bad}, named{"reasoning_tokens", m.ReasoningTokens.bad})
	return m.meta.dropped(names)
}

func (u *usage) dropped(names []string) []string {
	return appendBad(names, named{"prompt_tokens", u.PromptTokens.bad}, named{"completion_tokens", u.CompletionTokens.bad},
		named{"reasoning_tokens", u.ReasoningTokens.bad}, named{"cached_tokens", u.PromptTokensDetails.v.CachedTokens.bad},
		named{"reasoning_tokens", u.CompletionTokensDetails.v.ReasoningTokens.bad})
}

// named is a figure's name and whether it was dropped.
type named struct {
	name string
	bad  bool
}

func appendBad(names []string, fs ...named) []string {
	for _, f := range fs {
		if f.bad {
			names = append(names, f.name)
		}
	}
	return names
}

func firstSet(cs ...count) int {
	for _, c := range cs {
		if c.n != 0 {
			return c.n
		}
	}
	return 0
}

// deriveAcceptLength is SGLang's completion_tokens / spec_verify_ct
// (tokenizer_manager.py) when the server sent only the verify count.
func deriveAcceptLength(r *Result) {
	if r.SpecAcceptLength == 0 && r.SpecVerifyCt > 0 {
		r.SpecAcceptLength = float64(r.CompletionTokens) / float64(r.SpecVerifyCt)
	}
}

// decodeObject decodes body, which must be one JSON object, into v; the
// error says what is wrong and quotes the body's start.
func decodeObject(body []byte, v any) error {
	if firstByte(body) != '{' {
		return fmt.Errorf("not a JSON object: %q", bodyStart(body))
	}
	if err := json.Unmarshal(body, v, answerOpts); err != nil {
		// The syntax error, without the Go type the library names.
		var se *json.SemanticError
		if errors.As(err, &se) && se.Err != nil {
			err = se.Err
		}
		return fmt.Errorf("%v in %q", err, bodyStart(body))
	}
	return nil
}

func firstByte(b []byte) byte {
	b = bytes.TrimLeft(b, " \t\r\n")
	if len(b) == 0 {
		return 0
	}
	return b[0]
}

// bodyStart is the first 200 bytes of a body, for an error message.
func bodyStart(body []byte) string {
	b := strings.TrimSpace(string(body))
	if len(b) > 200 {
		b = b[:200] + "…"
	}
	return b
}

// object[T] reads an object into v; a value of another kind (null
// included) is skipped and leaves v as it was.
type object[T any] struct{ v T }

func (o *object[T]) UnmarshalJSONFrom(dec *jsontext.Decoder) error {
	if dec.PeekKind() != '{' {
		return dec.SkipValue()
	}
	return json.UnmarshalDecode(dec, &o.v)
}

// text is a string; ok says one was given (null and other kinds are not).
type text struct {
	s  string
	ok bool
}

func (t *text) UnmarshalJSONFrom(dec *jsontext.Decoder) error {
	if dec.PeekKind() != '"' {
		*t = text{}
		return dec.SkipValue()
	}
	tok, err := dec.ReadToken()
	*t = text{tok.String(), err == nil}
	return err
}

// figure is a number given as a number or a numeric string; anything else
// (null included) is absent. So is a number that is not finite ("NaN",
// "Inf", 1e999 beyond float64), which the journal's JSON could not hold: one
// such figure must not fail a run.
type figure struct {
	f  float64
	ok bool
	// bad says a number or string was given but read as absent.
	bad bool
}

func (f *figure) UnmarshalJSONFrom(dec *jsontext.Decoder) error {
	*f = figure{}
	var s string
	switch dec.PeekKind() {
	case '0', '"':
		tok, err := dec.ReadToken()
		if err != nil {
			return err
		}
		s = tok.String()
	default:
		return dec.SkipValue()
	}
	*f = parseFigure(s)
	f.bad = !f.ok
	return nil
}

func parseFigure(s string) figure {
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
		return figure{}
	}
	return figure{f: v, ok: true}
}

// count is a figure from 0 to MaxInt32 (the int32 columns that hold
// counts), else absent (0): never a wrapped value.
type count struct {
	n       int
	ok, bad bool // bad: given, but not a count
}

func (c *count) UnmarshalJSONFrom(dec *jsontext.Decoder) error {
	var f figure
	if err := f.UnmarshalJSONFrom(dec); err != nil {
		return err
	}
	*c = countOf(f)
	c.bad = f.bad || f.ok && !c.ok
	return nil
}

func countOf(f figure) count {
	if !f.ok || !countInRange(f.f) {
		return count{}
	}
	return count{n: int(f.f), ok: true}
}

func countInRange(f float64) bool { return f >= 0 && f <= math.MaxInt32 }

// tokenIDs are an array of token ids: integers 0 and up, written without
// a fraction, an exponent or a sign. A list with any other element (a
// server's bug, or hostile bytes) is dropped whole, as if the server sent
// none: a list with holes would misplace every token after the first.
type tokenIDs []int

// idScratch holds the ids of one answer while they are read, so that the
// answer keeps one slice of the right size: growing it by append left
// twice its size behind, a tenth of a rehearsal's allocation.
var idScratch = sync.Pool{New: func() any { return new([]int) }}

func (ids *tokenIDs) UnmarshalJSONFrom(dec *jsontext.Decoder) error {
	*ids = nil
	if dec.PeekKind() != '[' {
		return dec.SkipValue()
	}
	if _, err := dec.ReadToken(); err != nil {
		return err
	}
	scratch := idScratch.Get().(*[]int)
	defer idScratch.Put(scratch)
	buf := (*scratch)[:0]
	bad := false
	for dec.PeekKind() != ']' {
		if bad || dec.PeekKind() != '0' {
			bad = true
			if err := dec.SkipValue(); err != nil {
				return err
			}
			continue
		}
		v, err := dec.ReadValue() // the number as written, not copied
		if err != nil {
			return err
		}
		id, ok := tokenID(v)
		bad = !ok
		buf = append(buf, id)
	}
	if len(buf) > 0 && !bad {
		*ids = slices.Clone(buf)
	}
	if cap(buf) <= 1<<18 {
		*scratch = buf
	}
	_, err := dec.ReadToken()
	return err
}

// tokenID is v, a JSON number, as a token id: digits only, at most 18.
func tokenID(v []byte) (int, bool) {
	if len(v) == 0 || len(v) > 18 {
		return 0, false
	}
	n := 0
	for _, c := range v {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	return n, true
}

// maxToolCalls bounds the calls one answer may hold; a longer list is a
// bad response, as is any element not of OpenAI's shape.
const maxToolCalls = 1024

// toolCalls is a chat message's tool_calls as SGLang's ToolCall gives them
// ({"id", "index", "type", "function": {"name", "arguments"}}): the ids,
// types, names and arguments kept as sent (the arguments' raw JSON, a
// string from SGLang's parsers), index dropped (its order is the list's).
// null or another kind is none. A list that is too long, or an element
// that is not an object, whose function is not an object, or whose id,
// type or name is not a string, sets err: the answer is then a bad
// response, never a list with holes.
type toolCalls struct {
	calls []record.ToolCall
	err   error
}

func (tc *toolCalls) UnmarshalJSONFrom(dec *jsontext.Decoder) error {
	*tc = toolCalls{}
	if dec.PeekKind() != '[' {
		return dec.SkipValue()
	}
	if _, err := dec.ReadToken(); err != nil {
		return err
	}
	var calls []record.ToolCall
	for i := 0; dec.PeekKind() != ']'; i++ {
		if tc.err != nil || i >= maxToolCalls {
			if tc.err == nil {
				tc.err = fmt.Errorf("more than %d calls", maxToolCalls)
			}
			if err := dec.SkipValue(); err != nil {
				return err
			}
			continue
		}
		call, bad, err := readToolCall(dec)
		if err != nil {
			return err
		}
		if bad != "" {
			tc.err = fmt.Errorf("call %d: %s", i, bad)
			continue
		}
		calls = append(calls, call)
	}
	if _, err := dec.ReadToken(); err != nil {
		return err
	}
	if tc.err == nil {
		tc.calls = calls
	}
	return nil
}

// readToolCall reads one element of tool_calls; bad says what is wrong
// with a well-formed element of the wrong shape.
func readToolCall(dec *jsontext.Decoder) (call record.ToolCall, bad string, err error) {
	if dec.PeekKind() != '{' {
		return call, "not an object", dec.SkipValue()
	}
	var o struct {
		ID       jsontext.Value `json:"id"`
		Type     jsontext.Value `json:"type"`
		Function jsontext.Value `json:"function"`
	}
	if err := json.UnmarshalDecode(dec, &o); err != nil {
		return call, "", err
	}
	str := func(v jsontext.Value, what string, s *string) {
		switch {
		case bad != "" || len(v) == 0 || v.Kind() == 'n':
		case v.Kind() != '"':
			bad = what + " is not a string"
		default:
			_ = json.Unmarshal(v, s, answerOpts)
		}
	}
	str(o.ID, "id", &call.ID)
	str(o.Type, "type", &call.Type)
	if bad != "" {
		return call, bad, nil
	}
	if len(o.Function) == 0 || o.Function.Kind() != '{' {
		return call, "function is not an object", nil
	}
	var f struct {
		Name      jsontext.Value `json:"name"`
		Arguments jsontext.Value `json:"arguments"`
	}
	if err := json.Unmarshal(o.Function, &f, answerOpts); err != nil {
		return call, "function: " + err.Error(), nil
	}
	if len(f.Name) == 0 || f.Name.Kind() != '"' {
		return call, "function.name is not a string", nil
	}
	str(f.Name, "function.name", &call.Function.Name)
	if len(f.Arguments) > 0 && f.Arguments.Kind() != 'n' {
		call.Function.Arguments = bytes.Clone(f.Arguments)
	}
	return call, bad, nil
}

// stop is a matched stop: an integer token id, a string, or nil.
type stop struct{ v any }

func (s *stop) UnmarshalJSONFrom(dec *jsontext.Decoder) error {
	s.v = nil
	switch dec.PeekKind() {
	case '"', '0':
		tok, err := dec.ReadToken()
		if err != nil {
			return err
		}
		if tok.Kind() == '"' {
			s.v = tok.String()
		} else if n, err := strconv.Atoi(tok.String()); err == nil {
			s.v = n
		}
		return nil
	}
	return dec.SkipValue()
}

// finish is a finish_reason given as a string or as SGLang's object
// ({"type":"stop","matched":151645}, {"type":"abort","message":…}).
type finish struct {
	reason  string
	matched stop
	message text
}

func (f *finish) UnmarshalJSONFrom(dec *jsontext.Decoder) error {
	*f = finish{}
	switch dec.PeekKind() {
	case '"':
		var t text
		err := t.UnmarshalJSONFrom(dec)
		f.reason = t.s
		return err
	case '{':
		var o struct {
			Type    text `json:"type"`
			Matched stop `json:"matched"`
			Message text `json:"message"`
		}
		err := json.UnmarshalDecode(dec, &o)
		*f = finish{o.Type.s, o.Matched, o.Message}
		return err
	}
	return dec.SkipValue()
}

// choices reads the first choice of an array and counts them all.
type choices struct {
	first choice
	n     int
}

func (c *choices) UnmarshalJSONFrom(dec *jsontext.Decoder) error {
	if dec.PeekKind() != '[' {
		return dec.SkipValue()
	}
	if _, err := dec.ReadToken(); err != nil {
		return err
	}
	for ; dec.PeekKind() != ']'; c.n++ {
		var err error
		if c.n == 0 {
			o := object[choice]{c.first}
			err = o.UnmarshalJSONFrom(dec)
			c.first = o.v
		} else {
			err = dec.SkipValue()
		}
		if err != nil {
			return err
		}
	}
	_, err := dec.ReadToken()
	return err
}
