package sim

import (
	"bytes"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// ServeHTTP routes one request. Unknown paths and methods answer like
// FastAPI does: {"detail": "Not Found"} / {"detail": "Method Not Allowed"}.
func (l *life) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !l.enter() {
		return // killed: the connection is being torn down
	}
	defer l.active.Done()
	if !l.authorized(r) {
		writeJSON(w, http.StatusUnauthorized, []byte(`{"error":"Unauthorized"}`))
		return
	}
	rt, ok := routes[r.URL.Path]
	switch {
	case !ok:
		writeJSON(w, http.StatusNotFound, []byte(`{"detail":"Not Found"}`))
	case !slices.Contains(rt.methods, r.Method):
		writeJSON(w, http.StatusMethodNotAllowed, []byte(`{"detail":"Method Not Allowed"}`))
	default:
		rt.serve(l, w, r)
	}
}

// route is what one path of a server answers: the methods it takes and
// the handler.
type route struct {
	methods []string
	serve   func(l *life, w http.ResponseWriter, r *http.Request)
}

var (
	getOnly = []string{http.MethodGet}
	getHead = []string{http.MethodGet, http.MethodHead}
)

// routes are the paths a server answers, by path.
var routes = map[string]route{
	"/generate":            {[]string{http.MethodPost, http.MethodPut}, (*life).generate},
	"/v1/chat/completions": {[]string{http.MethodPost}, (*life).chat},
	// One handler for both health paths, as in SGLang 2026
	// (http_server.py): a 1-token generation
	// (SGLANG_ENABLE_HEALTH_ENDPOINT_GENERATION defaults on).
	"/health":          {getHead, (*life).healthGenerate},
	"/health_generate": {getHead, (*life).healthGenerate},
	"/get_model_info":  {getOnly, withoutRequest((*life).modelInfo)},
	"/model_info":      {getOnly, withoutRequest((*life).modelInfo)},
	"/get_server_info": {getOnly, withoutRequest((*life).serverInfo)},
	"/server_info":     {getOnly, withoutRequest((*life).serverInfo)},
	"/v1/models":       {getOnly, withoutRequest((*life).models)},
	"/metrics":         {getOnly, withoutRequest((*life).metrics)},
}

// withoutRequest adapts a handler that reads nothing of the request.
func withoutRequest(h func(l *life, w http.ResponseWriter)) func(*life, http.ResponseWriter, *http.Request) {
	return func(l *life, w http.ResponseWriter, _ *http.Request) { h(l, w) }
}

// authorized is SGLang's add_api_key_middleware: with an API key, only
// OPTIONS, /health… and /metrics… go without the key.
func (l *life) authorized(r *http.Request) bool {
	key := l.cfg.APIKey
	if key == "" || r.Method == http.MethodOptions ||
		strings.HasPrefix(r.URL.Path, "/health") || strings.HasPrefix(r.URL.Path, "/metrics") {
		return true
	}
	// utils/auth.py (SGLang 2026): "Authorization: Bearer KEY" (the scheme
	// in any case) or "x-api-key: KEY".
	if x := r.Header.Get("X-Api-Key"); x != "" {
		return subtle.ConstantTimeCompare([]byte(x), []byte(key)) == 1
	}
	got := r.Header.Get("Authorization")
	if len(got) > len("Bearer ") && strings.EqualFold(got[:len("Bearer ")], "Bearer ") {
		got = "Bearer " + got[len("Bearer "):]
	}
	return subtle.ConstantTimeCompare([]byte(got), []byte("Bearer "+key)) == 1
}

var bufPool = sync.Pool{New: func() any { b := make([]byte, 0, 16<<10); return &b }}

func getBuf() *[]byte { return bufPool.Get().(*[]byte) }

func putBuf(b *[]byte) {
	if cap(*b) <= 1<<20 {
		*b = (*b)[:0]
		bufPool.Put(b)
	}
}

func writeJSON(w http.ResponseWriter, status int, body []byte) {
	h := w.Header()
	h["Content-Type"] = []string{"application/json"}
	h["Content-Length"] = []string{strconv.Itoa(len(body))}
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// api selects the error body shape and response format.
type api int

const (
	apiNative api = iota // /generate: {"error": {"message": …}}
	apiOpenAI            // /v1/...: {"object": "error", "message", "type", "param", "code"}
)

func writeError(w http.ResponseWriter, a api, status int, msg string) {
	b := getBuf()
	defer putBuf(b)
	out := *b
	switch {
	case a == apiNative && status < 500:
		// A ValueError: {"error": {"message"}} (http_server.py).
		out = append(out, `{"error":{"message":`...)
		out = appendJSONString(out, msg)
		out = append(out, `}}`...)
	case a == apiNative:
		// An HTTPException (503 queue full or waiting timeout, 500):
		// SGLang 2026's ORJSONResponse {"object":"error","message",
		// "type":"<status>","param":null,"code":<status>}.
		out = append(out, `{"object":"error","message":`...)
		out = appendJSONString(out, msg)
		out = append(out, `,"type":"`...)
		out = strconv.AppendInt(out, int64(status), 10)
		out = append(out, `","param":null,"code":`...)
		out = strconv.AppendInt(out, int64(status), 10)
		out = append(out, '}')
	default:
		typ := "BadRequestError"
		switch {
		case status == http.StatusServiceUnavailable:
			typ = "ServiceUnavailableError"
		case status >= 500:
			typ = "InternalServerError"
		}
		out = append(out, `{"object":"error","message":`...)
		out = appendJSONString(out, msg)
		out = append(out, `,"type":"`...)
		out = append(out, typ...)
		out = append(out, `","param":null,"code":`...)
		out = strconv.AppendInt(out, int64(status), 10)
		out = append(out, '}')
	}
	writeJSON(w, status, out)
	*b = out
}

// readBody reads the whole body into a pooled buffer. Reading to EOF also
// lets net/http watch the connection, so a client that goes away cancels
// r.Context() (SGLang aborts such a request and frees its slot).
func readBody(r *http.Request) (*[]byte, error) {
	b := getBuf()
	buf := bytes.NewBuffer((*b)[:0])
	_, err := io.Copy(buf, io.LimitReader(r.Body, 256<<20))
	*b = buf.Bytes()
	return b, err
}

// job is one generation request, parsed and validated.
type job struct {
	api          api
	promptTokens int
	maxNew       int
	hash         uint64 // request content: seeds the output
	thinking     bool
	forced       bool // the prompt opened the think block: the output starts inside it
	keepEOS      bool // skip_special_tokens=false
	rid          string
	stream       bool
	includeUsage bool       // chat stream_options.include_usage
	model        string     // chat: echoed
	separate     bool       // chat: split reasoning_content
	metaInfo     bool       // chat: return_meta_info, meta_info per choice
	outputIDs    bool       // chat: return_token_ids, token_ids per choice
	promptIDs    []int      // chat: prompt_token_ids per choice; nil when not asked
	tools        []toolSpec // the prompt's declared tools
	toolParser   bool       // chat: parse the answer's calls into tool_calls
	seed         uint64     // Config.Seed, for the calls' ids
}

type samplingParams struct {
	MaxNewTokens      *int  `json:"max_new_tokens"`
	SkipSpecialTokens *bool `json:"skip_special_tokens"`
	// SamplingSeed, as a request's own seed, picks another output for the
	// same prompt (see seeded).
	SamplingSeed *int64 `json:"sampling_seed"`
}

// seeded mixes a request's own seed into its content hash: the same
// prompt with another seed gets another output, as a server sampling at
// a temperature above 0 gives; without a seed the output is the
// prompt's, so runs stay reproducible.
func seeded(hash uint64, seed *int64) uint64 {
	if seed == nil {
		return hash
	}
	return mix(hash, uint64(*seed)+0x5eed)
}

type generateRequest struct {
	Text           json.RawMessage `json:"text"`
	InputIDs       json.RawMessage `json:"input_ids"`
	SamplingParams samplingParams  `json:"sampling_params"`
	RID            json.RawMessage `json:"rid"`
	Stream         bool            `json:"stream"`
}

// The prompt suffix Qwen3's template adds with enable_thinking=false: a model
// given it answers without thinking.
const noThinkSuffix = "<think>\n\n</think>\n\n"

var noThinkIDs = []int{idThinkStart, idNewlines2, idThinkEnd, idNewlines2}

func (l *life) generate(w http.ResponseWriter, r *http.Request) {
	body, err := readBody(r)
	defer putBuf(body)
	if err != nil {
		return
	}
	var req generateRequest
	if err := json.Unmarshal(*body, &req); err != nil {
		writeError(w, apiNative, http.StatusBadRequest, "invalid request body: "+err.Error())
		return
	}
	j := job{api: apiNative, maxNew: 128, thinking: true, stream: req.Stream}
	if problem := l.generatePrompt(&j, &req); problem != "" {
		writeError(w, apiNative, http.StatusBadRequest, problem)
		return
	}
	j.hash = seeded(j.hash, req.SamplingParams.SamplingSeed)
	if p := req.SamplingParams.MaxNewTokens; p != nil {
		j.maxNew = *p
	}
	if p := req.SamplingParams.SkipSpecialTokens; p != nil {
		j.keepEOS = !*p
	}
	if len(req.RID) > 0 && req.RID[0] == '"' {
		_ = json.Unmarshal(req.RID, &j.rid)
	}
	l.run(w, r, &j)
}

// generatePrompt reads the prompt of a /generate request, its text or its
// input_ids, into j; problem, when not "", is the message of the 400 that
// refuses it. A list of prompts (a batch) is refused.
func (l *life) generatePrompt(j *job, req *generateRequest) (problem string) {
	switch {
	case len(req.Text) > 0 && req.Text[0] == '"':
		var text string
		if err := json.Unmarshal(req.Text, &text); err != nil {
			return "text: " + err.Error()
		}
		j.promptTokens = l.countTokens(text)
		j.hash = fnv64(1, []byte(text))
		j.thinking = !strings.HasSuffix(text, noThinkSuffix)
		j.forced = textOpensThink(text)
		j.tools = toolsInText(text)
	case len(req.InputIDs) > 0 && req.InputIDs[0] == '[' && !bytes.HasPrefix(bytes.TrimLeft(req.InputIDs[1:], " \t\r\n"), []byte("[")):
		var ids []int
		if err := json.Unmarshal(req.InputIDs, &ids); err != nil {
			return "input_ids: " + err.Error()
		}
		j.promptTokens = len(ids)
		j.hash = fnv64(2, req.InputIDs)
		j.thinking = len(ids) < 4 || !equalInts(ids[len(ids)-4:], noThinkIDs)
		j.forced = idsOpenThink(ids)
		if tok := l.cfg.Tokenizer; tok != nil {
			j.tools = toolsInText(tok.Decode(ids))
		}
	case len(req.Text) > 0 && req.Text[0] == '[', len(req.InputIDs) > 0:
		return "batch requests (a list of prompts) are not supported by pipe sim; send one prompt per request"
	default:
		return "Either text or input_ids should be provided."
	}
	return ""
}

func equalInts(a, b []int) bool {
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

// countTokens is the prompt length of text: the tokenizer's count, or the
// approximation of one token per 4 bytes (rounded up), which is close for
// English prose and code with Qwen's byte-level BPE.
func (l *life) countTokens(text string) int {
	if tok := l.cfg.Tokenizer; tok != nil {
		return len(tok.Encode(text))
	}
	return (len(text) + 3) / 4
}

// validate checks a job against the context length, as SGLang does.
func (l *life) validate(j *job) (int, string) {
	ctxLen := l.cfg.ContextLength
	switch {
	case j.maxNew < 0:
		return http.StatusBadRequest, fmt.Sprintf("max_new_tokens must be at least 0, got %d.", j.maxNew)
	case j.promptTokens >= ctxLen:
		return http.StatusBadRequest, fmt.Sprintf("The input (%d tokens) is longer than the model's context length (%d tokens).", j.promptTokens, ctxLen)
	case j.promptTokens+j.maxNew >= ctxLen:
		return http.StatusBadRequest, fmt.Sprintf("Requested token count exceeds the model's maximum context length of %d tokens. "+
			"You requested a total of %d tokens: %d tokens from the input messages and %d tokens for the completion. "+
			"Please reduce the number of tokens in the input messages or the completion to fit within the limit.",
			ctxLen, j.promptTokens+j.maxNew, j.promptTokens, j.maxNew)
	}
	return 0, ""
}

// run takes a validated-for-shape job through faults, admission, prefill and
// decode, and writes the response.
func (l *life) run(w http.ResponseWriter, r *http.Request, j *job) {
	if status, msg := l.validate(j); status != 0 {
		writeError(w, j.api, status, msg)
		return
	}
	if l.warming() {
		writeError(w, j.api, http.StatusServiceUnavailable, "The server is starting up (warm-up); retry later.")
		return
	}
	seq := l.seq.Add(1)
	faults := drawFaults(l.cfg.Faults, l.cfg.Seed, l.s.index, seq, l.s.fleet.now())
	if l.failEarly(w, r, j, faults) {
		return
	}
	release, ok := l.claimRID(j, seq)
	if !ok {
		writeError(w, j.api, http.StatusBadRequest, "Duplicate request ID: "+j.rid)
		return
	}
	defer release()
	ctx := r.Context()
	start := time.Now()
	// Admitted when a slot is free and its prompt and max_new_tokens fit
	// in the KV cache (see admission); the prompt is in the cache while
	// it holds the slot.
	t := newTicket(j.promptTokens, j.maxNew, l.kvCapacity())
	if err := l.adm.acquire(ctx, l.dead, t); err != nil {
		if errors.Is(err, errQueueFull) {
			writeError(w, j.api, http.StatusServiceUnavailable, err.Error())
		}
		return
	}
	held := true // a running slot
	defer func() {
		if held {
			l.adm.release(t)
		}
	}()
	l.requests.Add(1)
	l.promptTokens.Add(int64(j.promptTokens))
	decodeFrom, err := l.prefill(ctx, j.promptTokens)
	if err != nil {
		return
	}
	l.ttft.observe(decodeFrom.Sub(start).Seconds() * l.cfg.Speed)
	j.seed = l.cfg.Seed
	out := l.s.fleet.texts.plan(l.cfg, j.hash, j.thinking, j.forced, faults, j.keepEOS, j.tools)
	res := result{job: j, out: &out, n: min(out.total, j.maxNew), start: start, speed: l.cfg.Speed, reset: faults.has(FaultReset), adm: &l.adm, ticket: t}
	if j.stream {
		l.stream(ctx, w, &res, decodeFrom, &held)
		return
	}
	if l.decodeAll(ctx, &res, decodeFrom, nil, &held) != nil {
		return
	}
	l.answer(w, &res)
}

// failEarly plays the faults drawn for a request that act before it is
// admitted: an error status, or a hang until the client or the server
// goes. It reports whether one did (the request is then answered).
func (l *life) failEarly(w http.ResponseWriter, r *http.Request, j *job, faults faultSet) bool {
	switch {
	case faults.has(FaultServerError):
		writeError(w, j.api, http.StatusInternalServerError, "Internal server error (pipe sim fault 500).")
	case faults.has(FaultQueueFull):
		writeError(w, j.api, http.StatusServiceUnavailable, errQueueFull.Error())
	case faults.has(FaultBadRequest):
		writeError(w, j.api, http.StatusBadRequest, "Bad request (pipe sim fault 400).")
	case faults.has(FaultHang):
		select {
		case <-r.Context().Done():
		case <-l.dead:
		}
	default:
		return false
	}
	return true
}

// claimRID makes j's request id the server's while it runs: ok is false
// when a running request holds it already, as SGLang refuses a duplicate.
// Without an id the request gets a fresh one, held by nobody. The caller
// calls release when the request ends.
func (l *life) claimRID(j *job, seq uint64) (release func(), ok bool) {
	if j.rid == "" {
		j.rid = l.defaultRID(seq)
		return func() {}, true
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, dup := l.rids[j.rid]; dup {
		return nil, false
	}
	l.rids[j.rid] = struct{}{}
	return func() {
		l.mu.Lock()
		delete(l.rids, j.rid)
		l.mu.Unlock()
	}, true
}

// answer writes the whole response of a finished request, or half of it
// before a reset when the fault says so.
func (l *life) answer(w http.ResponseWriter, res *result) {
	b := getBuf()
	defer putBuf(b)
	if res.job.api == apiNative {
		*b = res.appendNative(*b, res.n, true)
	} else {
		*b = res.appendChat(*b, l.cfg.Model)
	}
	if res.reset {
		resetMidway(w, *b)
		return
	}
	writeJSON(w, http.StatusOK, *b)
	l.completed.Add(1)
}

func (l *life) defaultRID(seq uint64) string {
	var b [32]byte
	h1, h2 := mix(l.ridSeed, seq, 1), mix(l.ridSeed, seq, 2)
	const hex = "0123456789abcdef"
	for i := 0; i < 16; i++ {
		b[i] = hex[(h1>>(4*i))&15]
		b[16+i] = hex[(h2>>(4*i))&15]
	}
	return string(b[:])
}

// resetMidway sends the status line, headers and half of body, then resets
// the connection (RST), as a server process dying mid-response does.
func resetMidway(w http.ResponseWriter, body []byte) {
	hj, ok := w.(http.Hijacker)
	if !ok {
		return
	}
	conn, rw, err := hj.Hijack()
	if err != nil {
		return
	}
	fmt.Fprintf(rw, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", len(body))
	_, _ = rw.Write(body[:len(body)/2])
	_ = rw.Flush()
	abortConn(conn)
}

// abortConn closes conn with SO_LINGER 0 so the peer sees a reset.
func abortConn(conn net.Conn) {
	if tc, ok := conn.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	_ = conn.Close()
}

// result renders one finished (or in-progress) generation.
type result struct {
	job   *job
	out   *output
	n     int // tokens to emit in total
	start time.Time
	speed float64
	reset bool
	adm   *admission // the server's load, reported with the answer
	// ticket is the request's claim on the KV cache (admission).
	ticket *ticket
	// retractions is how often the request was retracted (meta_info
	// num_retractions).
	retractions int
}

func (res *result) latency() float64 { return time.Since(res.start).Seconds() * res.speed }

// appendNative renders the /generate body for the first done tokens; final
// says whether finish_reason is known.
func (res *result) appendNative(b []byte, done int, final bool) []byte {
	out := res.out
	b = append(b, `{"text":"`...)
	b = out.appendEscText(b, done)
	b = append(b, `","output_ids":`...)
	b = out.appendIDs(b, done)
	b = append(b, `,"meta_info":{"id":`...)
	b = appendJSONString(b, res.job.rid)
	b = append(b, `,"finish_reason":`...)
	switch {
	case !final:
		b = append(b, `null`...)
	case done >= out.total:
		b = append(b, `{"type":"stop","matched":151645}`...)
	default:
		b = append(b, `{"type":"length","length":`...)
		b = strconv.AppendInt(b, int64(res.job.maxNew), 10)
		b = append(b, '}')
	}
	b = append(b, `,"prompt_tokens":`...)
	b = strconv.AppendInt(b, int64(res.job.promptTokens), 10)
	b = append(b, `,"weight_version":"default","completion_tokens":`...)
	b = strconv.AppendInt(b, int64(done), 10)
	b = append(b, `,"cached_tokens":0,"num_retractions":`...)
	b = strconv.AppendInt(b, int64(res.retractions), 10)
	b = res.appendMeta(b, done)
	return append(b, `}}`...)
}

// SpecDraftTokens is the simulated speculative_num_draft_tokens: each
// verify step proposes SpecDraftTokens-1 draft tokens.
const SpecDraftTokens = 8

// appendMeta appends the meta_info members both APIs share (SGLang 2026,
// tokenizer_manager.py): e2e_latency, the server's load (num_running_reqs,
// num_waiting_reqs) and, with speculative decoding, spec_verify_ct,
// spec_accept_length (= completion tokens / verify steps), spec_accept_rate
// (= correct / proposed drafts), spec_num_correct_drafts (completion
// tokens - verify steps: each step also yields one token of its own) and
// spec_num_proposed_drafts (= verify steps × (draft tokens - 1)).
func (res *result) appendMeta(b []byte, done int) []byte {
	b = append(b, `,"e2e_latency":`...)
	b = strconv.AppendFloat(b, res.latency(), 'f', 4, 64)
	if res.adm != nil {
		running, waiting := res.adm.counts()
		b = append(b, `,"num_running_reqs":`...)
		b = strconv.AppendInt(b, int64(running), 10)
		b = append(b, `,"num_waiting_reqs":`...)
		b = strconv.AppendInt(b, int64(waiting), 10)
	}
	if out := res.out; out.spec > 0 {
		v := out.specVerify(done)
		if v == 0 {
			// SGLang sends the spec figures only when spec_verify_ct > 0.
			return b
		}
		correct, proposed := done-v, v*(SpecDraftTokens-1)
		b = append(b, `,"spec_verify_ct":`...)
		b = strconv.AppendInt(b, int64(v), 10)
		b = append(b, `,"spec_accept_length":`...)
		b = strconv.AppendFloat(b, float64(done)/float64(v), 'f', 4, 64)
		b = append(b, `,"spec_accept_rate":`...)
		b = strconv.AppendFloat(b, float64(correct)/float64(proposed), 'f', 4, 64)
		b = append(b, `,"spec_num_correct_drafts":`...)
		b = strconv.AppendInt(b, int64(correct), 10)
		b = append(b, `,"spec_num_proposed_drafts":`...)
		b = strconv.AppendInt(b, int64(proposed), 10)
	}
	return b
}

// finishReason is the OpenAI finish_reason and matched_stop JSON.
func (res *result) finishReason() (reason, matched string) {
	if res.n >= res.out.total {
		return "stop", "151645"
	}
	return "length", "null"
}

// appendNullable appends s as a JSON string, or null when empty.
func appendNullable(b []byte, s string) []byte {
	if s == "" {
		return append(b, "null"...)
	}
	return appendJSONString(b, s)
}

// chatSplit returns reasoning_content and content for the first done tokens.
func (res *result) chatSplit(done int) (reasoning, content string) {
	text := res.out.text(0, done)
	switch {
	case res.job.separate && res.job.forced:
		return splitForced(text)
	case res.job.separate:
		return splitReasoning(text)
	}
	return "", text
}

func (res *result) appendChat(b []byte, model string) []byte {
	reasoning, content := res.chatSplit(res.n)
	reason, matched := res.finishReason()
	var calls []parsedCall
	parsed := res.job.toolParser && strings.Contains(content, "<tool_call>\n")
	if parsed {
		content, calls = parseQwen25(content, res.job.tools)
		if reason == "stop" {
			reason, matched = "tool_calls", "null"
		}
	}
	b = append(b, `{"id":`...)
	b = appendJSONString(b, res.job.rid)
	b = append(b, `,"object":"chat.completion","created":`...)
	b = strconv.AppendInt(b, res.start.Unix(), 10)
	b = append(b, `,"model":`...)
	b = appendJSONString(b, cmp(res.job.model, model))
	b = append(b, `,"choices":[{"index":0,"message":{"role":"assistant","content":`...)
	b = appendNullable(b, content)
	b = append(b, `,"reasoning_content":`...)
	b = appendNullable(b, reasoning)
	b = append(b, `,"tool_calls":`...)
	if parsed {
		h := mix(res.job.hash, res.job.seed)
		b = append(b, '[')
		for i, c := range calls {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"id":"`...)
			b = append(b, toolCallID(h, i)...)
			b = append(b, `","index":`...)
			b = strconv.AppendInt(b, int64(i), 10)
			b = append(b, `,"type":"function","function":{"name":`...)
			b = appendJSONString(b, c.name)
			b = append(b, `,"arguments":`...)
			b = appendJSONString(b, c.arguments)
			b = append(b, `}}`...)
		}
		b = append(b, ']')
	} else {
		b = append(b, `null`...)
	}
	b = append(b, `},"logprobs":null,"finish_reason":"`...)
	b = append(b, reason...)
	b = append(b, `","matched_stop":`...)
	b = append(b, matched...)
	// serving_chat.py (SGLang 2026-07): after matched_stop, only when
	// asked; token_ids are the output ids as /generate's output_ids.
	if ids := res.job.promptIDs; ids != nil {
		b = append(b, `,"prompt_token_ids":[`...)
		for k, id := range ids {
			if k > 0 {
				b = append(b, ',')
			}
			b = strconv.AppendInt(b, int64(id), 10)
		}
		b = append(b, ']')
	}
	if res.job.outputIDs {
		b = append(b, `,"token_ids":`...)
		b = res.out.appendIDs(b, res.n)
	}
	if res.job.metaInfo {
		// serving_chat.py (SGLang 2026): per choice, only when asked.
		b = append(b, `,"meta_info":{"id":`...)
		b = appendJSONString(b, res.job.rid)
		b = append(b, `,"prompt_tokens":`...)
		b = strconv.AppendInt(b, int64(res.job.promptTokens), 10)
		b = append(b, `,"completion_tokens":`...)
		b = strconv.AppendInt(b, int64(res.n), 10)
		b = append(b, `,"cached_tokens":0,"num_retractions":`...)
		b = strconv.AppendInt(b, int64(res.retractions), 10)
		b = res.appendMeta(b, res.n)
		b = append(b, '}')
	}
	b = append(b, `}],"usage":`...)
	b = res.appendUsage(b)
	return append(b, `,"metadata":{"weight_version":"default"}}`...)
}

func (res *result) appendUsage(b []byte) []byte {
	b = append(b, `{"prompt_tokens":`...)
	b = strconv.AppendInt(b, int64(res.job.promptTokens), 10)
	b = append(b, `,"total_tokens":`...)
	b = strconv.AppendInt(b, int64(res.job.promptTokens+res.n), 10)
	b = append(b, `,"completion_tokens":`...)
	b = strconv.AppendInt(b, int64(res.n), 10)
	return append(b, `,"prompt_tokens_details":null}`...)
}

func cmp(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
