package sim

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fast is a config whose requests finish in milliseconds.
func fast() Config { return Config{Speed: 10000} }

func startFleet(t *testing.T, cfg Config) *Fleet {
	t.Helper()
	f, err := Start(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// client returns a client whose idle connections are closed at cleanup, so
// goleak sees no transport goroutines.
func client(t *testing.T) *http.Client {
	tr := &http.Transport{MaxIdleConnsPerHost: 128}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}
}

type reply struct {
	status int
	body   []byte
	obj    map[string]any
	err    error
}

func do(ctx context.Context, c *http.Client, method, url string, body any) reply {
	var rd io.Reader
	if body != nil {
		switch b := body.(type) {
		case string:
			rd = strings.NewReader(b)
		default:
			js, _ := json.Marshal(b)
			rd = bytes.NewReader(js)
		}
	}
	req, err := http.NewRequestWithContext(ctx, method, url, rd)
	if err != nil {
		return reply{err: err}
	}
	resp, err := c.Do(req)
	if err != nil {
		return reply{err: err}
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	r := reply{status: resp.StatusCode, body: data, err: err}
	if len(data) > 0 && data[0] == '{' {
		if jerr := json.Unmarshal(data, &r.obj); jerr != nil && r.err == nil {
			r.err = fmt.Errorf("bad JSON %q: %w", data, jerr)
		}
	}
	return r
}

func post(t *testing.T, c *http.Client, url string, body any) reply {
	t.Helper()
	r := do(context.Background(), c, http.MethodPost, url, body)
	if r.err != nil {
		t.Fatalf("POST %s: %v", url, r.err)
	}
	return r
}

func get(t *testing.T, c *http.Client, url string) reply {
	t.Helper()
	r := do(context.Background(), c, http.MethodGet, url, nil)
	if r.err != nil {
		t.Fatalf("GET %s: %v", url, r.err)
	}
	return r
}

// path walks obj by keys and indexes ("meta_info.finish_reason.type").
func path(obj any, p string) any {
	for _, k := range strings.Split(p, ".") {
		switch o := obj.(type) {
		case map[string]any:
			obj = o[k]
		case []any:
			var i int
			fmt.Sscan(k, &i)
			if i >= len(o) {
				return nil
			}
			obj = o[i]
		default:
			return nil
		}
	}
	return obj
}

func num(obj any, p string) int {
	v, _ := path(obj, p).(float64)
	return int(v)
}

func str(obj any, p string) string {
	s, _ := path(obj, p).(string)
	return s
}

func ids(obj any) []int {
	var out []int
	for _, v := range path(obj, "output_ids").([]any) {
		out = append(out, int(v.(float64)))
	}
	return out
}

func gen(text string, maxNew int) map[string]any {
	return map[string]any{"text": text, "sampling_params": map[string]any{"max_new_tokens": maxNew, "temperature": 0.6}}
}

func TestGenerateShape(t *testing.T) {
	f := startFleet(t, fast())
	c := client(t)
	r := post(t, c, f.URLs()[0]+"/generate", gen("<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n", 30000))
	if r.status != 200 {
		t.Fatalf("status %d: %s", r.status, r.body)
	}
	text := str(r.obj, "text")
	if !strings.HasPrefix(text, "<think>\n") || !strings.Contains(text, "\n</think>\n\n") || strings.Contains(text, "<|im_end|>") {
		t.Errorf("text shape: %.200q", text)
	}
	_, answer, _ := strings.Cut(text, "</think>\n\n")
	if strings.TrimSpace(answer) == "" {
		t.Error("empty answer")
	}
	out := ids(r.obj)
	if out[0] != idThinkStart || out[len(out)-1] != idImEnd || !containsInt(out, idThinkEnd) {
		t.Errorf("output_ids: first %d last %d", out[0], out[len(out)-1])
	}
	for _, id := range out {
		if id < 0 || id > idThinkEnd {
			t.Fatalf("implausible id %d", id)
		}
	}
	m := r.obj["meta_info"]
	if str(m, "finish_reason.type") != "stop" || num(m, "finish_reason.matched") != idImEnd {
		t.Errorf("finish_reason %v", path(m, "finish_reason"))
	}
	if num(m, "completion_tokens") != len(out) {
		t.Errorf("completion_tokens %d, %d ids", num(m, "completion_tokens"), len(out))
	}
	// prompt 62 bytes → 16 tokens by the 4-bytes-per-token approximation
	if num(m, "prompt_tokens") != 16 || str(m, "id") == "" || path(m, "cached_tokens") == nil || path(m, "e2e_latency") == nil {
		t.Errorf("meta_info %v", m)
	}
	if path(m, "spec_verify_ct") != nil {
		t.Error("spec figures without speculative decoding")
	}
}

func containsInt(xs []int, x int) bool {
	for _, v := range xs {
		if v == x {
			return true
		}
	}
	return false
}

func TestGenerateInputIDsAndNoThinking(t *testing.T) {
	f := startFleet(t, fast())
	c := client(t)
	prompt := []int{idImStart, 872, 198, 3838, 374, 220, 17, 10, 17, 30, idImEnd, 198, idImStart, 77091, 198}
	r := post(t, c, f.URLs()[0]+"/generate", map[string]any{"input_ids": prompt, "sampling_params": map[string]any{"max_new_tokens": 30000}, "rid": "abc"})
	if r.status != 200 || num(r.obj, "meta_info.prompt_tokens") != len(prompt) || str(r.obj, "meta_info.id") != "abc" {
		t.Fatalf("%d %.300s", r.status, r.body)
	}
	if !strings.HasPrefix(str(r.obj, "text"), "<think>\n") {
		t.Errorf("thinking expected: %.100q", str(r.obj, "text"))
	}
	noThink := append(append([]int(nil), prompt...), noThinkIDs...)
	r = post(t, c, f.URLs()[0]+"/generate", map[string]any{"input_ids": noThink, "sampling_params": map[string]any{"max_new_tokens": 30000}})
	if text := str(r.obj, "text"); strings.Contains(text, "think>") || text == "" {
		t.Errorf("no-thinking output: %.100q", text)
	}
	if out := ids(r.obj); out[len(out)-1] != idImEnd {
		t.Errorf("no EOS")
	}
}

func TestGenerateMaxNewTokens(t *testing.T) {
	f := startFleet(t, fast())
	c := client(t)
	full := post(t, c, f.URLs()[0]+"/generate", gen("hello", 30000))
	r := post(t, c, f.URLs()[0]+"/generate", gen("hello", 10))
	out := ids(r.obj)
	if len(out) != 10 || num(r.obj, "meta_info.completion_tokens") != 10 {
		t.Fatalf("got %d ids", len(out))
	}
	if str(r.obj, "meta_info.finish_reason.type") != "length" || num(r.obj, "meta_info.finish_reason.length") != 10 {
		t.Errorf("finish_reason %v", path(r.obj, "meta_info.finish_reason"))
	}
	if !strings.HasPrefix(str(full.obj, "text"), str(r.obj, "text")) || strings.Contains(str(r.obj, "text"), "</think>") {
		t.Errorf("truncated text is not a prefix of the full one: %q", str(r.obj, "text"))
	}
	// The server default, as in SGLang, is 128.
	r = post(t, c, f.URLs()[0]+"/generate", map[string]any{"text": "hello"})
	if n := num(r.obj, "meta_info.completion_tokens"); n != 128 {
		t.Errorf("default max_new_tokens: %d tokens", n)
	}
	r = post(t, c, f.URLs()[0]+"/generate", gen("hello", 0))
	if len(ids(r.obj)) != 0 || str(r.obj, "meta_info.finish_reason.type") != "length" {
		t.Errorf("max_new_tokens 0: %s", r.body)
	}
}

func TestDeterminism(t *testing.T) {
	f1 := startFleet(t, fast())
	f2 := startFleet(t, Config{Speed: 10000, Count: 2})
	c := client(t)
	a := post(t, c, f1.URLs()[0]+"/generate", gen("prompt one", 30000))
	b := post(t, c, f2.URLs()[1]+"/generate", gen("prompt one", 30000))
	other := post(t, c, f1.URLs()[0]+"/generate", gen("prompt two", 30000))
	if str(a.obj, "text") != str(b.obj, "text") || fmt.Sprint(ids(a.obj)) != fmt.Sprint(ids(b.obj)) {
		t.Error("same request, different output")
	}
	if str(a.obj, "text") == str(other.obj, "text") {
		t.Error("different prompts, same output")
	}
	f3 := startFleet(t, Config{Speed: 10000, Seed: 7})
	if c := post(t, c, f3.URLs()[0]+"/generate", gen("prompt one", 30000)); str(c.obj, "text") == str(a.obj, "text") {
		t.Error("seed does not change the output")
	}
}

func TestLengthDistribution(t *testing.T) {
	f := startFleet(t, Config{Speed: 1e6, ThinkTokensMean: 300, AnswerTokensMean: 100, ThinkTokensMax: 1000})
	c := client(t)
	var total, maxLen int
	const n = 200
	for i := 0; i < n; i++ {
		r := post(t, c, f.URLs()[0]+"/generate", gen(fmt.Sprintf("prompt %d", i), 30000))
		k := num(r.obj, "meta_info.completion_tokens")
		total += k
		maxLen = max(maxLen, k)
	}
	mean := float64(total) / n
	// 300 + 100 tokens of prose plus 7 framing tokens and sentence rounding.
	if mean < 340 || mean > 500 {
		t.Errorf("mean completion %g tokens, want ≈410", mean)
	}
	if maxLen > 1000+4000+40 {
		t.Errorf("max %d beyond the caps", maxLen)
	}
}

func TestChatShape(t *testing.T) {
	f := startFleet(t, fast())
	c := client(t)
	url := f.URLs()[0] + "/v1/chat/completions"
	msgs := []map[string]any{{"role": "user", "content": "What is 2+2?"}}
	r := post(t, c, url, map[string]any{"model": "m", "messages": msgs, "max_tokens": 30000,
		"chat_template_kwargs": map[string]any{"enable_thinking": true}, "separate_reasoning": true})
	if r.status != 200 {
		t.Fatalf("%d %s", r.status, r.body)
	}
	msg := path(r.obj, "choices.0.message")
	content, reasoning := str(msg, "content"), str(msg, "reasoning_content")
	if content == "" || reasoning == "" || strings.Contains(content+reasoning, "think>") ||
		content != strings.TrimSpace(content) || reasoning != strings.TrimSpace(reasoning) {
		t.Errorf("split: reasoning %.80q content %.80q", reasoning, content)
	}
	if str(r.obj, "choices.0.finish_reason") != "stop" || num(r.obj, "choices.0.matched_stop") != idImEnd ||
		str(r.obj, "model") != "m" || str(r.obj, "object") != "chat.completion" {
		t.Errorf("choice: %.300s", r.body)
	}
	u := r.obj["usage"]
	// 12 bytes → 3 tokens, +5 per message, +3 for the generation prompt.
	if num(u, "prompt_tokens") != 11 || num(u, "total_tokens") != num(u, "prompt_tokens")+num(u, "completion_tokens") {
		t.Errorf("usage %v", u)
	}

	// Truncated thinking: everything in reasoning_content, content null.
	r = post(t, c, url, map[string]any{"messages": msgs, "max_tokens": 20})
	msg = path(r.obj, "choices.0.message")
	if path(msg, "content") != nil || str(msg, "reasoning_content") == "" || str(r.obj, "choices.0.finish_reason") != "length" ||
		path(r.obj, "choices.0.matched_stop") != nil {
		t.Errorf("truncated: %s", r.body)
	}

	// Thinking off: no reasoning at all.
	r = post(t, c, url, map[string]any{"messages": msgs, "chat_template_kwargs": map[string]any{"enable_thinking": false}})
	msg = path(r.obj, "choices.0.message")
	if path(msg, "reasoning_content") != nil || str(msg, "content") == "" || num(r.obj, "usage.prompt_tokens") != 15 {
		t.Errorf("thinking off: %.300s", r.body)
	}

	// No split: the raw text is the content.
	r = post(t, c, url, map[string]any{"messages": msgs, "separate_reasoning": false, "max_completion_tokens": 30000})
	if !strings.HasPrefix(str(r.obj, "choices.0.message.content"), "<think>\n") {
		t.Errorf("separate_reasoning=false: %.200s", r.body)
	}
}

func TestChatContentParts(t *testing.T) {
	f := startFleet(t, fast())
	c := client(t)
	r := post(t, c, f.URLs()[0]+"/v1/chat/completions", map[string]any{"messages": []map[string]any{
		{"role": "system", "content": nil},
		{"role": "user", "content": []map[string]any{{"type": "text", "text": "abcdefgh"}}}}})
	if r.status != 200 || num(r.obj, "usage.prompt_tokens") != 5+5+2+3 {
		t.Errorf("%d %s", r.status, r.body)
	}
}

func TestErrors(t *testing.T) {
	f := startFleet(t, Config{Speed: 10000, ContextLength: 1000})
	c := client(t)
	u := f.URLs()[0]
	long := strings.Repeat("abcd", 1000)
	cases := []struct {
		name, path string
		body       any
		status     int
		msg        string
	}{
		{"prompt too long", "/generate", gen(long, 10), 400, "The input (1000 tokens) is longer than the model's context length (1000 tokens)."},
		{"prompt+max", "/generate", gen("abcd", 999), 400, "Requested token count exceeds the model's maximum context length of 1000 tokens."},
		{"no prompt", "/generate", map[string]any{"sampling_params": map[string]any{}}, 400, "Either text or input_ids should be provided."},
		{"bad json", "/generate", "{", 400, "invalid request body"},
		{"batch", "/generate", map[string]any{"text": []string{"a", "b"}}, 400, "batch"},
		{"chat prompt+max", "/v1/chat/completions", map[string]any{"messages": []map[string]any{{"role": "user", "content": "hi"}}, "max_tokens": 995}, 400, "Requested token count exceeds"},
		{"chat no messages", "/v1/chat/completions", map[string]any{"messages": []any{}}, 400, "messages"},
	}
	for _, tc := range cases {
		r := post(t, c, u+tc.path, tc.body)
		msg := str(r.obj, "error.message")
		if strings.HasPrefix(tc.path, "/v1") {
			msg = str(r.obj, "message")
			if str(r.obj, "object") != "error" || num(r.obj, "code") != tc.status {
				t.Errorf("%s: OpenAI error shape: %s", tc.name, r.body)
			}
		}
		if r.status != tc.status || !strings.Contains(msg, tc.msg) {
			t.Errorf("%s: %d %s", tc.name, r.status, r.body)
		}
	}
	if r := get(t, c, u+"/nope"); r.status != 404 || str(r.obj, "detail") != "Not Found" {
		t.Errorf("404: %d %s", r.status, r.body)
	}
	if r := get(t, c, u+"/generate"); r.status != 405 || str(r.obj, "detail") != "Method Not Allowed" {
		t.Errorf("405: %d %s", r.status, r.body)
	}
}

func TestDuplicateRID(t *testing.T) {
	// Speed 1: the first request decodes for seconds, long enough to collide.
	f := startFleet(t, Config{})
	c := client(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan reply, 1)
	go func() {
		done <- do(ctx, c, http.MethodPost, f.URLs()[0]+"/generate", map[string]any{"text": "x", "rid": "r1"})
	}()
	waitFor(t, "first request running", func() bool { return f.Servers()[0].Stats().Running == 1 })
	r := post(t, c, f.URLs()[0]+"/generate", map[string]any{"text": "y", "rid": "r1"})
	if r.status != 400 || !strings.Contains(str(r.obj, "error.message"), "r1") {
		t.Errorf("duplicate rid: %d %s", r.status, r.body)
	}
	cancel()
	<-done
	waitFor(t, "slot freed", func() bool { return f.Servers()[0].Stats().Running == 0 })
	// Once the first is gone the rid is free again.
	r = post(t, c, f.URLs()[0]+"/generate", map[string]any{"text": "y", "rid": "r1", "sampling_params": map[string]any{"max_new_tokens": 1}})
	if r.status != 200 {
		t.Errorf("rid reuse after finish: %d %s", r.status, r.body)
	}
}

// waitFor polls cond for up to 10 s (generous for a loaded machine).
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func TestInfoEndpoints(t *testing.T) {
	f := startFleet(t, Config{Speed: 10000, SpecAcceptMean: 3})
	c := client(t)
	u := f.URLs()[0]
	for _, p := range []string{"/get_model_info", "/model_info"} {
		r := get(t, c, u+p)
		if r.status != 200 || str(r.obj, "model_path") != DefaultModel || path(r.obj, "is_generation") != true ||
			str(r.obj, "tokenizer_path") == "" || str(r.obj, "weight_version") == "" {
			t.Errorf("%s: %s", p, r.body)
		}
	}
	for _, p := range []string{"/get_server_info", "/server_info"} {
		r := get(t, c, u+p)
		// context_length is null unless set, as in SGLang 2026; the prompt
		// bound is max_req_input_len.
		if r.status != 200 || r.obj["context_length"] != nil || num(r.obj, "max_req_input_len") != DefaultContextLength-1 || str(r.obj, "version") == "" ||
			str(r.obj, "reasoning_parser") != "qwen3" || str(r.obj, "speculative_algorithm") == "" || num(r.obj, "max_running_requests") != 48 {
			t.Errorf("%s: %s", p, r.body)
		}
	}
	r := get(t, c, u+"/v1/models")
	if str(r.obj, "data.0.id") != DefaultModel || num(r.obj, "data.0.max_model_len") != DefaultContextLength || str(r.obj, "object") != "list" {
		t.Errorf("/v1/models: %s", r.body)
	}
	if r := get(t, c, u+"/health"); r.status != 200 {
		t.Errorf("/health %d", r.status)
	}
	if r := get(t, c, u+"/health_generate"); r.status != 200 {
		t.Errorf("/health_generate %d", r.status)
	}
	g := post(t, c, u+"/generate", gen("spec", 30000))
	n, v := num(g.obj, "meta_info.completion_tokens"), num(g.obj, "meta_info.spec_verify_ct")
	acc, _ := path(g.obj, "meta_info.spec_accept_length").(float64)
	if v == 0 || acc < 2 || acc > 4 || fmt.Sprintf("%.3f", float64(n)/float64(v)) != fmt.Sprintf("%.3f", acc) {
		t.Errorf("spec: completion %d verify %d accept %g", n, v, acc)
	}
	r = get(t, c, u+"/metrics")
	for _, name := range []string{"sglang:num_running_reqs", "sglang:num_queue_reqs", "sglang:gen_throughput", "sglang:token_usage",
		"sglang:prompt_tokens_total", "sglang:generation_tokens_total", "# TYPE sglang:num_running_reqs gauge"} {
		if !bytes.Contains(r.body, []byte(name)) {
			t.Errorf("/metrics lacks %s", name)
		}
	}
	if want := fmt.Sprintf("sglang:generation_tokens_total{model_name=%q} %d\n", DefaultModel, n+2); !bytes.Contains(r.body, []byte(want)) {
		t.Errorf("/metrics: want %q in\n%s", want, r.body) // n tokens plus the 1 each of /health and /health_generate
	}
}

// metric reads one sglang:NAME value from /metrics.
func metric(t *testing.T, c *http.Client, url, name string) float64 {
	t.Helper()
	r := get(t, c, url+"/metrics")
	sc := bufio.NewScanner(bytes.NewReader(r.body))
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "sglang:"+name+"{") {
			var v float64
			fmt.Sscan(line[strings.LastIndexByte(line, ' ')+1:], &v)
			return v
		}
	}
	t.Fatalf("no metric %s", name)
	return 0
}

func TestWarmUp(t *testing.T) {
	// 3 simulated seconds at speed 10: 300 ms of wall time.
	start := time.Now()
	f := startFleet(t, Config{Speed: 10, WarmUp: 3 * time.Second})
	c := client(t)
	u := f.URLs()[0]
	h := get(t, c, u+"/health")
	g := post(t, c, u+"/generate", gen("x", 1))
	if time.Since(start) < 300*time.Millisecond {
		if h.status != 503 || g.status != 503 || str(g.obj, "message") == "" || num(g.obj, "code") != 503 {
			t.Errorf("during warm-up: health %d, generate %d %s", h.status, g.status, g.body)
		}
		if hg := get(t, c, u+"/health_generate"); hg.status != 503 && time.Since(start) < 300*time.Millisecond {
			t.Errorf("health_generate during warm-up: %d", hg.status)
		}
	} else {
		t.Log("machine too slow to observe the warm-up window")
	}
	waitFor(t, "ready", func() bool { return get(t, c, u+"/health").status == 200 })
	if time.Since(start) < 300*time.Millisecond {
		t.Errorf("ready after %v, before the warm-up ended", time.Since(start))
	}
	if g := post(t, c, u+"/generate", gen("x", 1)); g.status != 200 {
		t.Errorf("after warm-up: %d", g.status)
	}
}

func TestQueueing(t *testing.T) {
	// Default max running (48); outputs take ~30 simulated seconds at speed
	// 1, so the first 48 stay running while we look.
	f := startFleet(t, Config{MaxQueued: 2})
	c := client(t)
	u := f.URLs()[0]
	s := f.Servers()[0]
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	results := make(chan reply, 60)
	launch := func(i int) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results <- do(ctx, c, http.MethodPost, u+"/generate", gen(fmt.Sprintf("q%d", i), 30000))
		}()
	}
	for i := 0; i < 48; i++ {
		launch(i)
	}
	waitFor(t, "48 running", func() bool { return s.Stats().Running == 48 })
	launch(48)
	waitFor(t, "49th queued", func() bool { return s.Stats().Queued == 1 })
	if got := metric(t, c, u, "num_running_reqs"); got != 48 {
		t.Errorf("num_running_reqs %g", got)
	}
	if got := metric(t, c, u, "num_queue_reqs"); got != 1 {
		t.Errorf("num_queue_reqs %g", got)
	}
	if got := metric(t, c, u, "gen_throughput"); got < 1000 || got > 2000 {
		t.Errorf("gen_throughput at 48 running: %g tokens/s", got)
	}
	launch(49)
	waitFor(t, "50th queued", func() bool { return s.Stats().Queued == 2 })
	r := post(t, c, u+"/generate", gen("one too many", 10))
	if r.status != 503 || str(r.obj, "message") != "The request queue is full." || str(r.obj, "object") != "error" {
		t.Errorf("beyond max queued: %d %s", r.status, r.body)
	}
	// Nothing has finished: every launched request is still waiting.
	if len(results) != 0 {
		t.Errorf("%d requests finished early", len(results))
	}
	cancel()
	wg.Wait()
	waitFor(t, "all aborted", func() bool { st := s.Stats(); return st.Running == 0 && st.Queued == 0 })
	if got := metric(t, c, u, "token_usage"); got != 0 {
		t.Errorf("token_usage %g with nothing running", got)
	}
}

func TestQueueOrderAndHandover(t *testing.T) {
	// One slot: queued requests run in arrival order, each as soon as the one
	// before it ends (≈2.5 simulated s = 125 ms each at speed 20).
	f := startFleet(t, Config{MaxRunning: 1, Speed: 20, ThinkTokensMean: 100, AnswerTokensMean: 20})
	c := client(t)
	u := f.URLs()[0]
	s := f.Servers()[0]
	var wg sync.WaitGroup
	var mu sync.Mutex
	var order []string
	for i, name := range []string{"a", "b", "c"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := do(context.Background(), c, http.MethodPost, u+"/generate", map[string]any{"text": name, "rid": name, "sampling_params": map[string]any{"max_new_tokens": 30000}})
			mu.Lock()
			defer mu.Unlock()
			if r.err != nil || r.status != 200 {
				t.Errorf("%s: %v %d", name, r.err, r.status)
			}
			order = append(order, name)
		}()
		// Arrived: it has started running (Requests) or waits in the queue.
		waitFor(t, name+" arrived", func() bool { st := s.Stats(); return int(st.Requests)+st.Queued >= i+1 })
		if st := s.Stats(); st.Running > 1 {
			t.Fatalf("%d running with one slot", st.Running)
		}
	}
	wg.Wait()
	if strings.Join(order, "") != "abc" {
		t.Errorf("completion order %v, want FIFO", order)
	}
}

func TestDisconnectFreesSlot(t *testing.T) {
	f := startFleet(t, Config{MaxRunning: 1})
	c := client(t)
	u := f.URLs()[0]
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan reply, 1)
	go func() { done <- do(ctx, c, http.MethodPost, u+"/generate", gen("long", 30000)) }()
	waitFor(t, "running", func() bool { return f.Servers()[0].Stats().Running == 1 })
	cancel()
	if r := <-done; r.err == nil {
		t.Fatal("request finished despite the cancel")
	}
	waitFor(t, "slot freed", func() bool { return f.Servers()[0].Stats().Running == 0 })
	if got := metric(t, c, u, "token_usage"); got != 0 {
		t.Errorf("token_usage %g after the abort, want 0", got)
	}
	if r := post(t, c, u+"/generate", gen("short", 1)); r.status != 200 {
		t.Errorf("after abort: %d", r.status)
	}
}

func TestReviveWarmsUpAgain(t *testing.T) {
	// Warm-up of 2 simulated s at speed 20: 100 ms of wall time.
	f := startFleet(t, Config{Speed: 20, WarmUp: 2 * time.Second})
	c := client(t)
	s := f.Servers()[0]
	waitFor(t, "ready", func() bool { return get(t, c, s.URL()+"/health").status == 200 })
	s.Kill()
	revived := time.Now()
	if err := s.Revive(); err != nil {
		t.Fatal(err)
	}
	h := get(t, c, s.URL()+"/health")
	if time.Since(revived) < 100*time.Millisecond && h.status != 503 {
		t.Errorf("revived server skipped its warm-up: %d", h.status)
	}
	waitFor(t, "ready again", func() bool { return get(t, c, s.URL()+"/health").status == 200 })
}

func TestDecodeSpeedModel(t *testing.T) {
	// With the defaults each request gets 60/(1+(n-1)/48) tokens/s, so total
	// throughput rises with the batch and flattens out.
	l := &life{cfg: &Config{DecodeTokensPerSec: 60, BatchHalfSpeed: 48, Speed: 1}}
	l.adm.init(1000, -1, nil, 0, nil)
	var prev float64
	for _, n := range []int{1, 8, 48, 200, 1000} {
		l.adm.running = n
		per := l.rate()
		total := l.genThroughput()
		if n == 1 && per != 60 {
			t.Errorf("alone: %g tokens/s", per)
		}
		if n == 48 && (total < 1400 || total > 1500) {
			t.Errorf("48 running: %g tokens/s", total)
		}
		if total <= prev || total > 60*48 {
			t.Errorf("n=%d: total %g after %g", n, total, prev)
		}
		prev = total
	}
}

func TestPrefillAndDecodeTiming(t *testing.T) {
	// Speed 100: 100 prompt tokens of prefill at 1000 tokens/s = 100 ms+20 ms
	// simulated = 1.2 ms wall; 200 tokens at 100 tokens/s = 2 s = 20 ms wall.
	f := startFleet(t, Config{Speed: 100, PrefillTokensPerSec: 1000, DecodeTokensPerSec: 100})
	c := client(t)
	start := time.Now()
	r := post(t, c, f.URLs()[0]+"/generate", gen(strings.Repeat("abcd", 100), 200))
	wall := time.Since(start)
	lat, _ := path(r.obj, "meta_info.e2e_latency").(float64)
	// Lower bounds are exact; the upper one only catches gross errors, as a
	// loaded machine wakes timers late.
	if lat < 2.1 || lat > 100 || wall < 21*time.Millisecond {
		t.Errorf("e2e_latency %g s (simulated), wall %v; want ≈2.12 s / 21 ms", lat, wall)
	}
}

func TestManyServersIndependent(t *testing.T) {
	f := startFleet(t, Config{Count: 7, Speed: 10000})
	c := client(t)
	seen := map[string]bool{}
	for _, u := range f.URLs() {
		if seen[u] || !strings.HasPrefix(u, "http://127.0.0.1:") {
			t.Fatalf("url %s", u)
		}
		seen[u] = true
		if r := post(t, c, u+"/generate", gen("x", 5)); r.status != 200 {
			t.Errorf("%s: %d", u, r.status)
		}
	}
	if f.Servers()[3].Stats().Requests != 1 {
		t.Errorf("stats per server: %+v", f.Servers()[3].Stats())
	}
}

func TestKillRevive(t *testing.T) {
	f := startFleet(t, Config{Speed: 1})
	c := client(t)
	s := f.Servers()[0]
	u := s.URL()
	ctx := context.Background()
	inflight := make(chan reply, 1)
	go func() { inflight <- do(ctx, c, http.MethodPost, u+"/generate", gen("long", 30000)) }()
	waitFor(t, "running", func() bool { return s.Stats().Running == 1 })
	s.Kill()
	if r := <-inflight; r.err == nil {
		t.Errorf("in-flight request survived the kill: %d", r.status)
	}
	if r := do(ctx, c, http.MethodGet, u+"/health", nil); r.err == nil {
		t.Errorf("dead server answered %d", r.status)
	}
	if s.Alive() {
		t.Error("Alive after Kill")
	}
	if err := s.Revive(); err != nil {
		t.Fatal(err)
	}
	if s.URL() != u {
		t.Errorf("revived on %s, was %s", s.URL(), u)
	}
	if r := get(t, c, u+"/health"); r.status != 200 {
		t.Errorf("revived health %d", r.status)
	}
	if st := s.Stats(); st.Requests != 0 {
		t.Errorf("revived with old counters %+v", st)
	}
}

func TestDieOnSchedule(t *testing.T) {
	// Simulated 2 s → 4 s at speed 10: dead from 200 ms to 400 ms of wall
	// time. Only server 1 dies.
	start := time.Now() // before the fleet's start: elapsed times here are upper bounds
	f := startFleet(t, Config{Count: 2, Speed: 10, Faults: []Fault{{Kind: FaultDie, At: 2 * time.Second, For: 2 * time.Second, Servers: []int{1}}}})
	c := client(t)
	alive := func(i int) bool {
		return do(context.Background(), c, http.MethodGet, f.URLs()[i]+"/health", nil).err == nil
	}
	if !alive(1) && time.Since(start) < 200*time.Millisecond {
		t.Fatal("dead before its time")
	}
	waitFor(t, "death", func() bool { return !alive(1) })
	died := time.Since(start)
	waitFor(t, "revival", func() bool { return alive(1) })
	back := time.Since(start)
	if died < 200*time.Millisecond || back < 400*time.Millisecond {
		t.Errorf("died at %v, back at %v; want 200 ms, 400 ms", died, back)
	}
	if !alive(0) {
		t.Error("server 0 died too")
	}
}

func TestFaultsShape(t *testing.T) {
	type check func(t *testing.T, native, chat reply)
	errShape := func(status int) check {
		return func(t *testing.T, native, chat reply) {
			// A ValueError (400) is {"error":{"message"}}; an
			// HTTPException (5xx) {"object":"error","message","type",
			// "param","code"} (http_server.py, SGLang 2026).
			msg := str(native.obj, "error.message")
			if status >= 500 {
				msg = str(native.obj, "message")
				if num(native.obj, "code") != status || str(native.obj, "type") != fmt.Sprint(status) {
					t.Errorf("native: %d %s", native.status, native.body)
				}
			}
			if native.status != status || msg == "" {
				t.Errorf("native: %d %s", native.status, native.body)
			}
			if chat.status != status || num(chat.obj, "code") != status || str(chat.obj, "message") == "" {
				t.Errorf("chat: %d %s", chat.status, chat.body)
			}
		}
	}
	cases := []struct {
		kind  FaultKind
		check check
	}{
		{FaultServerError, errShape(500)},
		{FaultQueueFull, func(t *testing.T, native, chat reply) {
			errShape(503)(t, native, chat)
			if str(native.obj, "message") != "The request queue is full." {
				t.Errorf("message %s", native.body)
			}
		}},
		{FaultBadRequest, errShape(400)},
		{FaultEmptyAnswer, func(t *testing.T, native, chat reply) {
			if text := str(native.obj, "text"); !strings.HasSuffix(text, "\n</think>\n\n") {
				t.Errorf("native: %.100q", text[max(0, len(text)-100):])
			}
			if path(chat.obj, "choices.0.message.content") != nil || str(chat.obj, "choices.0.message.reasoning_content") == "" {
				t.Errorf("chat: %.200s", chat.body)
			}
		}},
		{FaultEmptyThinking, func(t *testing.T, native, chat reply) {
			if text := str(native.obj, "text"); !strings.HasPrefix(text, "<think>\n\n</think>\n\n") || len(text) < 30 {
				t.Errorf("native: %.100q", text)
			}
			if path(chat.obj, "choices.0.message.reasoning_content") != nil || str(chat.obj, "choices.0.message.content") == "" {
				t.Errorf("chat: %.200s", chat.body)
			}
		}},
		{FaultNoThinkEnd, func(t *testing.T, native, chat reply) {
			text := str(native.obj, "text")
			out := ids(native.obj)
			if strings.Contains(text, "</think>") || !strings.HasPrefix(text, "<think>\n") || out[len(out)-1] != idImEnd ||
				str(native.obj, "meta_info.finish_reason.type") != "stop" {
				t.Errorf("native: %.100q", text)
			}
			if path(chat.obj, "choices.0.message.content") != nil || str(chat.obj, "choices.0.message.reasoning_content") == "" ||
				str(chat.obj, "choices.0.finish_reason") != "stop" {
				t.Errorf("chat: %.200s", chat.body)
			}
		}},
		{FaultLeakedThink, func(t *testing.T, native, chat reply) {
			if n := strings.Count(str(native.obj, "text"), "</think>"); n != 2 {
				t.Errorf("native: %d </think>", n)
			}
			if !strings.Contains(str(chat.obj, "choices.0.message.content"), "</think>") {
				t.Errorf("chat content without the leaked marker: %.300s", chat.body)
			}
		}},
		{FaultReset, func(t *testing.T, native, chat reply) {
			for _, r := range []reply{native, chat} {
				if r.err == nil {
					t.Errorf("no transport error: %d %.100s", r.status, r.body)
				} else if !strings.Contains(r.err.Error(), "reset") && !errors.Is(r.err, io.ErrUnexpectedEOF) {
					t.Errorf("error %v, want a reset", r.err)
				}
			}
		}},
	}
	for _, tc := range cases {
		t.Run(string(tc.kind), func(t *testing.T) {
			f := startFleet(t, Config{Speed: 10000, Faults: []Fault{{Kind: tc.kind, Rate: 1}}})
			c := client(t)
			ctx := context.Background()
			native := do(ctx, c, http.MethodPost, f.URLs()[0]+"/generate", gen("p", 30000))
			chat := do(ctx, c, http.MethodPost, f.URLs()[0]+"/v1/chat/completions", map[string]any{"messages": []map[string]any{{"role": "user", "content": "p"}}})
			if tc.kind != FaultReset && (native.err != nil || chat.err != nil) {
				t.Fatal(native.err, chat.err)
			}
			tc.check(t, native, chat)
		})
	}
}

func TestFaultHang(t *testing.T) {
	f := startFleet(t, Config{Speed: 10000, Faults: []Fault{{Kind: FaultHang, Rate: 1}}})
	c := client(t)
	c.Timeout = 100 * time.Millisecond
	start := time.Now()
	r := do(context.Background(), c, http.MethodPost, f.URLs()[0]+"/generate", gen("p", 10))
	if r.err == nil || time.Since(start) < 100*time.Millisecond {
		t.Errorf("hang answered: %v %d after %v", r.err, r.status, time.Since(start))
	}
	if st := f.Servers()[0].Stats(); st.Running != 0 {
		t.Errorf("hang holds a slot: %+v", st)
	}
}

func TestFaultRateReproducible(t *testing.T) {
	statuses := func(seed uint64) string {
		f := startFleet(t, Config{Speed: 1e6, Seed: seed, ThinkTokensMean: 10, AnswerTokensMean: 10,
			Faults: []Fault{{Kind: FaultServerError, Rate: 0.3}, {Kind: FaultBadRequest, Rate: 0.1}}})
		c := client(t)
		var b strings.Builder
		for i := 0; i < 200; i++ {
			r := post(t, c, f.URLs()[0]+"/generate", gen("same prompt", 100))
			fmt.Fprintf(&b, "%d ", r.status)
		}
		return b.String()
	}
	a, b, other := statuses(1), statuses(1), statuses(2)
	if a != b {
		t.Error("same seed, different faults")
	}
	if a == other {
		t.Error("different seed, same faults")
	}
	n500 := strings.Count(a, "500")
	n400 := strings.Count(a, "400")
	if n500 < 40 || n500 > 80 || n400 < 5 || n400 > 35 {
		t.Errorf("500: %d/200 (want ≈60), 400: %d/200 (want ≈14 of the rest)", n500, n400)
	}
}

func TestFaultWindow(t *testing.T) {
	// 500s only from 1 s to 3 s simulated: 100 ms–300 ms at speed 10.
	f := startFleet(t, Config{Speed: 10, ThinkTokensMean: 1, AnswerTokensMean: 1, ThinkTokensMax: 1, AnswerTokensMax: 1,
		Faults: []Fault{{Kind: FaultServerError, At: time.Second, For: 2 * time.Second}}})
	c := client(t)
	open, shut := 100*time.Millisecond, 300*time.Millisecond
	var inside, after bool
	deadline := time.Now().Add(10 * time.Second)
	for !(inside && after) && time.Now().Before(deadline) {
		sent := time.Since(f.start)
		r := post(t, c, f.URLs()[0]+"/generate", gen("p", 1))
		recv := time.Since(f.start)
		switch {
		case recv < open || sent >= shut:
			if r.status != 200 {
				t.Fatalf("status %d outside the window (sent %v, received %v)", r.status, sent, recv)
			}
			after = after || sent >= shut
		case sent >= open && recv < shut:
			if r.status != 500 {
				t.Fatalf("status %d inside the window (sent %v, received %v)", r.status, sent, recv)
			}
			inside = true
		}
	}
	if !inside || !after {
		t.Errorf("machine too slow: no request fully inside (%v) or after (%v) the window", inside, after)
	}
}

// A window from a request number opens at that request of the server,
// whatever the time: requests 1-4 answer, the 5th on get the fault.
func TestFaultFromRequest(t *testing.T) {
	f := startFleet(t, Config{Speed: 1e6, ThinkTokensMean: 1, AnswerTokensMean: 1,
		Faults: []Fault{{Kind: FaultServerError, FromRequest: 5}}})
	c := client(t)
	var got []int
	for i := 0; i < 8; i++ {
		got = append(got, post(t, c, f.URLs()[0]+"/generate", gen("p", 1)).status)
	}
	if fmt.Sprint(got) != "[200 200 200 200 500 500 500 500]" {
		t.Errorf("statuses %v, want 200 for the first 4 requests and 500 from the 5th", got)
	}
}

// A slow server decodes at a third of its speed from its window on: the
// same request (the same output) takes about three times as long in the
// server's own simulated time (meta_info.e2e_latency) from its 3rd request.
func TestFaultSlow(t *testing.T) {
	f := startFleet(t, Config{Speed: 100, ThinkTokensMean: 200, AnswerTokensMean: 100, LengthSigma: 0.01,
		Faults: []Fault{{Kind: FaultSlow, FromRequest: 3}}})
	c := client(t)
	var lat []float64
	for i := 0; i < 4; i++ {
		r := post(t, c, f.URLs()[0]+"/generate", gen("the same prompt", 1000))
		if r.status != 200 {
			t.Fatalf("status %d: %s", r.status, r.body)
		}
		v, _ := path(r.obj, "meta_info.e2e_latency").(float64)
		lat = append(lat, v)
	}
	before, after := max(lat[0], lat[1]), min(lat[2], lat[3])
	if after < 2*before {
		t.Errorf("latencies %v: the 3rd and 4th requests are not about 3× the first two", lat)
	}
}

func TestParseFault(t *testing.T) {
	good := map[string]string{
		"500:0.01":             "500:0.01",
		"hang@10m+30s":         "hang:1@10m0s+30s",
		"die@1h+5m#2":          "die@1h0m0s+5m0s#2",
		"reset:0.1@0s+10m#0,1": "reset:0.1@0s+10m0s#0,1",
		"empty-answer:1":       "empty-answer:1",
		"hang@200req#2":        "hang:1@200req#2",
		"slow@3000req#1":       "slow@3000req#1",
		"slow@30m":             "slow@30m0s",
	}
	for in, want := range good {
		f, err := ParseFault(in)
		if err != nil {
			t.Errorf("%s: %v", in, err)
			continue
		}
		if f.Kind == FaultHang && f.Rate == 0 {
			f.Rate = 1 // normalized at Start
		}
		g, _ := f.normalize(3)
		if g.String() != want {
			t.Errorf("%s → %s, want %s", in, g.String(), want)
		}
	}
	for _, bad := range []string{"boom:0.1", "500", "500:2", "die@1m", "hang@x", "500:0.1#a", "hang@0req", "hang@5req+1s", "die@5req", "slow", "slow:0.5@1m"} {
		if _, err := ParseFault(bad); err == nil {
			t.Errorf("%s: no error", bad)
		}
	}
	if _, err := Start(context.Background(), Config{Faults: []Fault{{Kind: FaultDie, At: 1, For: 1, Servers: []int{3}}}}); err == nil {
		t.Error("server index out of range accepted")
	}
}

func TestConfigErrors(t *testing.T) {
	_, err := Start(context.Background(), Config{Speed: -1, MaxRunning: -2, ReasoningParser: "x"})
	if err == nil || !strings.Contains(err.Error(), "speed") || !strings.Contains(err.Error(), "max running") || !strings.Contains(err.Error(), "reasoning parser") {
		t.Errorf("err = %v", err)
	}
}

func TestStreamNative(t *testing.T) {
	f := startFleet(t, Config{Speed: 10, ThinkTokensMean: 100, AnswerTokensMean: 30})
	c := client(t)
	full := post(t, c, f.URLs()[0]+"/generate", gen("s", 30000))
	req := gen("s", 30000)
	req["stream"] = true
	r := post(t, c, f.URLs()[0]+"/generate", req)
	frames := sseFrames(t, r.body)
	if len(frames) < 3 || frames[len(frames)-1] != "[DONE]" {
		t.Fatalf("%d frames, last %q", len(frames), frames[len(frames)-1])
	}
	var prev string
	for i, fr := range frames[:len(frames)-1] {
		var obj map[string]any
		if err := json.Unmarshal([]byte(fr), &obj); err != nil {
			t.Fatal(err)
		}
		text := str(obj, "text")
		if !strings.HasPrefix(text, prev) {
			t.Fatalf("frame %d not cumulative", i)
		}
		prev = text
		last := i == len(frames)-2
		if (path(obj, "meta_info.finish_reason") != nil) != last {
			t.Errorf("frame %d finish_reason %v", i, path(obj, "meta_info.finish_reason"))
		}
		if last && (text != str(full.obj, "text") || len(ids(obj)) != len(ids(full.obj))) {
			t.Error("last frame differs from the non-streamed output")
		}
	}
}

func sseFrames(t *testing.T, body []byte) []string {
	t.Helper()
	var out []string
	for _, block := range strings.Split(strings.TrimSpace(string(body)), "\n\n") {
		data, ok := strings.CutPrefix(block, "data: ")
		if !ok {
			t.Fatalf("not an SSE data frame: %q", block)
		}
		out = append(out, data)
	}
	return out
}

func TestStreamChat(t *testing.T) {
	f := startFleet(t, Config{Speed: 50, ThinkTokensMean: 100, AnswerTokensMean: 30})
	c := client(t)
	u := f.URLs()[0] + "/v1/chat/completions"
	msgs := []map[string]any{{"role": "user", "content": "stream me"}}
	full := post(t, c, u, map[string]any{"messages": msgs})
	r := post(t, c, u, map[string]any{"messages": msgs, "stream": true, "stream_options": map[string]any{"include_usage": true}})
	frames := sseFrames(t, r.body)
	var reasoning, content strings.Builder
	var finish string
	var usage any
	for _, fr := range frames[:len(frames)-1] {
		var obj map[string]any
		if err := json.Unmarshal([]byte(fr), &obj); err != nil {
			t.Fatal(err)
		}
		if str(obj, "object") != "chat.completion.chunk" {
			t.Errorf("object %q", str(obj, "object"))
		}
		reasoning.WriteString(str(obj, "choices.0.delta.reasoning_content"))
		content.WriteString(str(obj, "choices.0.delta.content"))
		if s := str(obj, "choices.0.finish_reason"); s != "" {
			finish = s
		}
		if u := path(obj, "usage"); u != nil {
			usage = u
		}
	}
	if frames[len(frames)-1] != "[DONE]" || finish != "stop" || num(usage, "completion_tokens") != num(full.obj, "usage.completion_tokens") {
		t.Errorf("finish %q usage %v", finish, usage)
	}
	if reasoning.String() != str(full.obj, "choices.0.message.reasoning_content") || content.String() != str(full.obj, "choices.0.message.content") {
		t.Errorf("streamed deltas differ from the full message:\n%.200q\n%.200q", reasoning.String(), str(full.obj, "choices.0.message.reasoning_content"))
	}
}

func TestStreamReset(t *testing.T) {
	f := startFleet(t, Config{Speed: 10000, Faults: []Fault{{Kind: FaultReset, Rate: 1}}})
	c := client(t)
	req := gen("s", 30000)
	req["stream"] = true
	r := do(context.Background(), c, http.MethodPost, f.URLs()[0]+"/generate", req)
	if r.err == nil || r.status != 200 {
		t.Errorf("stream reset: status %d err %v", r.status, r.err)
	}
}

func TestCloseWithRequestsInFlight(t *testing.T) {
	f, err := Start(context.Background(), Config{Count: 2, Faults: []Fault{{Kind: FaultHang, Rate: 0.5}}})
	if err != nil {
		t.Fatal(err)
	}
	c := client(t)
	var wg sync.WaitGroup
	for i := 0; i < 20; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			do(context.Background(), c, http.MethodPost, f.URLs()[i%2]+"/generate", gen(fmt.Sprint(i), 30000))
		}()
	}
	waitFor(t, "requests in", func() bool { return f.Servers()[0].Stats().Running+f.Servers()[1].Stats().Running > 5 })
	f.Close()
	wg.Wait()
	if err := f.Servers()[0].Revive(); err == nil {
		t.Error("revived after Close")
	}
}

func TestContextCancelCloses(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	f, err := Start(ctx, Config{})
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	waitFor(t, "closed", func() bool { return !f.Servers()[0].Alive() })
	f.Close()
}

func TestKillReviveUnderLoad(t *testing.T) {
	// Requests of every kind (plain, streamed, faulted) keep arriving while
	// the server dies and comes back; nothing may hang or leak.
	f := startFleet(t, Config{Speed: 2000, MaxRunning: 8, MaxQueued: 8, ThinkTokensMean: 200, AnswerTokensMean: 50,
		Faults: []Fault{{Kind: FaultHang, Rate: 0.05}, {Kind: FaultReset, Rate: 0.05}}})
	c := client(t)
	c.Timeout = 5 * time.Second
	s := f.Servers()[0]
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for g := 0; g < 16; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				req := gen(fmt.Sprint(g, i), 30000)
				req["stream"] = i%2 == 0
				do(context.Background(), c, http.MethodPost, s.URL()+"/generate", req)
			}
		}()
	}
	for k := 0; k < 20; k++ {
		time.Sleep(5 * time.Millisecond)
		s.Kill()
		if err := s.Revive(); err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	wg.Wait()
	if r := get(t, c, s.URL()+"/health"); r.status != 200 {
		t.Errorf("after the storm: %d", r.status)
	}
}

func TestThroughputFollowsTheBatchModel(t *testing.T) {
	// decode 100 tokens/s alone, half speed at 4 running: 4 concurrent
	// requests get 57.1 tokens/s each, 228.6 together; 1 gets 100.
	measure := func(workers int) (perServer float64, latency float64) {
		f := startFleet(t, Config{Speed: 100, MaxRunning: 4, DecodeTokensPerSec: 100, BatchHalfSpeed: 4, PrefillLatency: time.Millisecond})
		c := client(t)
		u := f.URLs()[0]
		start := time.Now()
		var wg sync.WaitGroup
		var mu sync.Mutex
		for w := 0; w < workers; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; i < 4; i++ {
					r := do(context.Background(), c, http.MethodPost, u+"/generate", gen(fmt.Sprint(w, i), 400))
					if r.err != nil || num(r.obj, "meta_info.completion_tokens") != 400 {
						t.Errorf("%v %s", r.err, r.body)
						return
					}
					mu.Lock()
					latency += path(r.obj, "meta_info.e2e_latency").(float64) / float64(4*workers)
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		sim := time.Since(start).Seconds() * 100
		return float64(f.Servers()[0].Stats().GenerationTokens) / sim, latency
	}
	one, lat1 := measure(1)
	four, lat4 := measure(4)
	t.Logf("1 running: %.1f tokens/s, %.2f s per request; 4 running: %.1f tokens/s, %.2f s", one, lat1, four, lat4)
	// Late timer wake-ups on a loaded machine only ever slow the sim down,
	// so the upper bounds are tight and the lower ones loose.
	if one > 101 || one < 70 {
		t.Errorf("1 running: %.1f tokens/s, want ≈100", one)
	}
	if four > 231 || four < 160 {
		t.Errorf("4 running: %.1f tokens/s, want ≈228.6", four)
	}
	if lat1 < 4 || lat4 < 7 || lat4 < lat1*1.5 {
		t.Errorf("per-request latency 1 running %.2f s (want ≈4.0), 4 running %.2f s (want ≈7.0)", lat1, lat4)
	}
}

// /health is SGLang 2026's health_generate behind both paths: 200 at once
// while the server makes progress (a request decoding), 503 once nothing
// progressed for HealthCheckTimeout (20 simulated seconds): here the one
// running slot is held by a request in a long prefill, which produces no
// token, and the health generation cannot get a slot.
func TestHealthGeneratesOrTimesOut(t *testing.T) {
	f := startFleet(t, Config{Speed: 100, MaxRunning: 1, MaxQueued: -1, PrefillTokensPerSec: 10})
	c := client(t)
	u := f.URLs()[0]
	if r := get(t, c, u+"/health"); r.status != 200 {
		t.Fatalf("/health of an idle server: %d", r.status)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// About 2000 prompt tokens: 200 simulated seconds of prefill.
	go do(ctx, c, http.MethodPost, u+"/generate", gen(strings.Repeat("a long prompt ", 600), 10))
	waitFor(t, "the long request running", func() bool { return f.Servers()[0].Stats().Running == 1 })
	start := time.Now()
	r := get(t, c, u+"/health")
	el := time.Since(start)
	if r.status != 503 {
		t.Errorf("/health of a server that cannot generate: %d, want 503", r.status)
	}
	if wall := time.Duration(float64(HealthCheckTimeout) / 100); el < wall || el > 20*wall {
		t.Errorf("/health answered after %v, want about %v (20 simulated seconds)", el, wall)
	}
	// A server busy decoding answers at once.
	busy := startFleet(t, Config{Speed: 100, MaxRunning: 1, MaxQueued: -1})
	go do(ctx, c, http.MethodPost, busy.URLs()[0]+"/generate", gen("a long answer", 30000))
	waitFor(t, "the busy request running", func() bool { return busy.Servers()[0].Stats().Running == 1 })
	if r := get(t, c, busy.URLs()[0]+"/health"); r.status != 200 {
		t.Errorf("/health of a server decoding with its one slot taken: %d, want 200", r.status)
	}
}

// A KV cache too small for the outputs the server admitted for retracts
// requests one at a time: each still answers in full, some say
// num_retractions > 0, and /metrics counts them
// (num_retracted_requests_total). They do not pile up: the server admits a
// waiting request (a retracted one too) only when its prompt, output so
// far and max_new_tokens fit beside the running ones' reservations, and a
// retraction raises those (admission, as SGLang's PrefillAdder and
// retract_decode). Admitting by running slots alone, as the sim once did,
// retracted 64 such requests about 64,000 times, some over 1,000 times
// each; here a quarter or fewer are retracted, once or twice.
func TestRetraction(t *testing.T) {
	const n = 96
	f := startFleet(t, Config{Speed: 20, MaxRunning: 32, KVTokens: 2000, ThinkTokensMean: 200, AnswerTokensMean: 60})
	c := client(t)
	u := f.URLs()[0]
	var wg sync.WaitGroup
	var mu sync.Mutex
	retracted, answered, most := 0, 0, 0
	for i := range n {
		wg.Go(func() {
			r := do(context.Background(), c, http.MethodPost, u+"/generate", gen(fmt.Sprintf("q%d", i), 400))
			mu.Lock()
			defer mu.Unlock()
			if fin := str(r.obj, "meta_info.finish_reason.type"); r.status != 200 || (fin != "stop" && fin != "length") {
				t.Errorf("q%d: %d %s", i, r.status, r.body)
				return
			}
			answered++
			if k := num(r.obj, "meta_info.num_retractions"); k > 0 {
				retracted++
				most = max(most, k)
			}
		})
	}
	wg.Wait()
	if answered != n || retracted == 0 {
		t.Errorf("%d answered, %d retracted; want %d and some", answered, retracted, n)
	}
	total := metric(t, c, u, "num_retracted_requests_total")
	if total < float64(retracted) {
		t.Errorf("num_retracted_requests_total %g, want at least %d", total, retracted)
	}
	if most > 3 || total > n/2 {
		t.Errorf("retractions piled up: %g in all, one request %d times; want at most %d and 3", total, most, n/2)
	}
	if got := metric(t, c, u, "token_usage"); got != 0 {
		t.Errorf("token_usage %g after every request ended, want 0", got)
	}
	t.Logf("%d of %d retracted, %g retractions, at most %d of one", retracted, n, total, most)
}

// The admission rule itself (admission): a free running slot is not
// enough, a waiting request also needs its prompt and max_new_tokens to fit
// in the KV cache beyond the running requests' tokens and reservations;
// it is admitted as soon as a release makes room, in FIFO order; a lone
// request is always admitted; a retraction raises new_token_ratio.
func TestAdmissionByKVCache(t *testing.T) {
	var kv atomic.Int64
	cfg := &Config{Speed: 1, DecodeTokensPerSec: 60, BatchHalfSpeed: 48}
	var a admission
	a.init(8, -1, &kv, 1000, cfg)
	ctx := context.Background()
	big := newTicket(100, 2000, 1000) // clipped to what an empty cache holds: 898
	if big.left != 898 {
		t.Fatalf("max_new_tokens 2000 in a 1000-token cache clipped to %d, want 898", big.left)
	}
	if err := a.acquire(ctx, nil, big); err != nil {
		t.Fatal(err)
	}
	if kv.Load() != 100 {
		t.Errorf("KV tokens %d after admitting a 100-token prompt, want 100", kv.Load())
	}
	// 1000 - 100 held - 0.7 × 898 reserved = 271 free: a request of 100 +
	// 500 waits, though 7 of 8 running slots are free.
	waiting := newTicket(100, 500, 1000)
	got := make(chan error, 1)
	go func() { got <- a.acquire(ctx, nil, waiting) }()
	queued := func(n int) {
		t.Helper()
		for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); runtime.Gosched() {
			if _, q := a.counts(); q == n {
				return
			}
		}
		r, q := a.counts()
		t.Fatalf("%d running, %d queued; want %d queued", r, q, n)
	}
	queued(1)
	small := newTicket(10, 10, 1000)
	second := make(chan error, 1)
	go func() { second <- a.acquire(ctx, nil, small) }() // fits, but waits behind it (FIFO)
	queued(2)
	if r, q := a.counts(); r != 1 || q != 2 {
		t.Fatalf("%d running, %d queued; want 1 and 2", r, q)
	}
	a.release(big)
	for _, ch := range []chan error{got, second} {
		if err := <-ch; err != nil {
			t.Fatal(err)
		}
	}
	if r, q := a.counts(); r != 2 || q != 0 || kv.Load() != 110 {
		t.Errorf("after the release: %d running, %d queued, %d KV tokens; want 2, 0, 110", r, q, kv.Load())
	}
	// A retraction: the ratio becomes (decoded + 20 × running) / (Σ
	// max_new_tokens + 1) of those left running.
	a.decoded(waiting, 300)
	a.retracted(small)
	a.mu.Lock()
	ratio := a.ratio
	a.mu.Unlock()
	if want := float64(300+20*1) / float64(500+1); ratio != want {
		t.Errorf("new_token_ratio %g after a retraction, want %g", ratio, want)
	}
	a.release(waiting)
	if r, _ := a.counts(); r != 0 || kv.Load() != 0 {
		t.Errorf("%d running, %d KV tokens at the end; want 0 and 0", r, kv.Load())
	}
}

// Retraction applies to every kind of request the sim serves, as SGLang's
// scheduler retracts a decoding request whatever its API: streamed
// /generate, chat with return_meta_info, streamed chat. Each still answers
// in full, as the same prompt does on a server with room (a retracted
// request decodes on from its output so far, a stream's frames pause), the
// server counts retractions while each kind runs (/metrics
// num_retracted_requests_total), the answers that carry meta_info say
// num_retractions > 0 for some, and the KV cache is empty at the end.
func TestRetractionOfEveryKind(t *testing.T) {
	cfg := Config{Speed: 20, MaxRunning: 32, KVTokens: 2000, ThinkTokensMean: 200, AnswerTokensMean: 60}
	f := startFleet(t, cfg)
	cfg.KVTokens = 0
	roomy := startFleet(t, cfg)
	c := client(t)
	u, ru := f.URLs()[0], roomy.URLs()[0]
	msgs := func(i int) []map[string]any {
		return []map[string]any{{"role": "user", "content": fmt.Sprintf("chat %d", i)}}
	}
	// answer returns a request's whole output and its num_retractions (-1:
	// the kind carries none).
	type answer struct {
		text, finish string
		retractions  int
	}
	kinds := []struct {
		name  string
		path  string
		req   func(i int) map[string]any
		read  func(r reply) answer
		plain func(i int) map[string]any // the same request, not streamed
		text  func(r reply) string
		// finish is the plain answer's finish reason.
		finish func(r reply) string
	}{
		{
			name: "streamed /generate", path: "/generate",
			req: func(i int) map[string]any {
				req := gen(fmt.Sprintf("q%d", i), 400)
				req["stream"] = true
				return req
			},
			read: func(r reply) answer {
				frames := sseFrames(t, r.body)
				var last map[string]any
				if len(frames) < 2 || json.Unmarshal([]byte(frames[len(frames)-2]), &last) != nil {
					return answer{}
				}
				return answer{str(last, "text"), str(last, "meta_info.finish_reason.type"), num(last, "meta_info.num_retractions")}
			},
			plain:  func(i int) map[string]any { return gen(fmt.Sprintf("q%d", i), 400) },
			text:   func(r reply) string { return str(r.obj, "text") },
			finish: func(r reply) string { return str(r.obj, "meta_info.finish_reason.type") },
		},
		{
			name: "chat with meta_info", path: "/v1/chat/completions",
			req: func(i int) map[string]any {
				return map[string]any{"messages": msgs(i), "max_tokens": 400, "return_meta_info": true}
			},
			read: func(r reply) answer {
				return answer{str(r.obj, "choices.0.message.reasoning_content") + "|" + str(r.obj, "choices.0.message.content"),
					str(r.obj, "choices.0.finish_reason"), num(r.obj, "choices.0.meta_info.num_retractions")}
			},
			plain: func(i int) map[string]any { return map[string]any{"messages": msgs(i), "max_tokens": 400} },
			text: func(r reply) string {
				return str(r.obj, "choices.0.message.reasoning_content") + "|" + str(r.obj, "choices.0.message.content")
			},
			finish: func(r reply) string { return str(r.obj, "choices.0.finish_reason") },
		},
		{
			name: "streamed chat", path: "/v1/chat/completions",
			req: func(i int) map[string]any {
				return map[string]any{"messages": msgs(i), "max_tokens": 400, "stream": true}
			},
			read: func(r reply) answer {
				var reasoning, content strings.Builder
				finish := ""
				for _, fr := range sseFrames(t, r.body) {
					var obj map[string]any
					if json.Unmarshal([]byte(fr), &obj) != nil {
						continue // [DONE]
					}
					reasoning.WriteString(str(obj, "choices.0.delta.reasoning_content"))
					content.WriteString(str(obj, "choices.0.delta.content"))
					if s := str(obj, "choices.0.finish_reason"); s != "" {
						finish = s
					}
				}
				return answer{reasoning.String() + "|" + content.String(), finish, -1}
			},
			plain: func(i int) map[string]any { return map[string]any{"messages": msgs(i), "max_tokens": 400} },
			text: func(r reply) string {
				return str(r.obj, "choices.0.message.reasoning_content") + "|" + str(r.obj, "choices.0.message.content")
			},
			finish: func(r reply) string { return str(r.obj, "choices.0.finish_reason") },
		},
	}
	for _, k := range kinds {
		before := metric(t, c, u, "num_retracted_requests_total")
		var wg sync.WaitGroup
		var mu sync.Mutex
		said := 0
		for i := range 64 {
			wg.Go(func() {
				r := do(context.Background(), c, http.MethodPost, u+k.path, k.req(i))
				want := do(context.Background(), c, http.MethodPost, ru+k.path, k.plain(i))
				mu.Lock()
				defer mu.Unlock()
				if r.err != nil || r.status != 200 || want.status != 200 {
					t.Errorf("%s %d: %d %v %s", k.name, i, r.status, r.err, r.body)
					return
				}
				a := k.read(r)
				if wf := k.finish(want); a.finish != wf || a.text != k.text(want) {
					t.Errorf("%s %d: finish %q, output %.80q…, want %q and %.80q…", k.name, i, a.finish, a.text, wf, k.text(want))
				}
				if a.retractions > 0 {
					said++
				}
			})
		}
		wg.Wait()
		n := metric(t, c, u, "num_retracted_requests_total") - before
		if n == 0 {
			t.Errorf("%s: no retraction while they ran", k.name)
		}
		if k.name != "streamed chat" && (said == 0 || float64(said) > n) {
			t.Errorf("%s: %d answers say num_retractions > 0, the server counted %g", k.name, said, n)
		}
		if got := metric(t, c, u, "token_usage"); got != 0 {
			t.Errorf("%s: token_usage %g after every request ended, want 0", k.name, got)
		}
		t.Logf("%s: %g retractions, %d answers say so", k.name, n, said)
	}
}
