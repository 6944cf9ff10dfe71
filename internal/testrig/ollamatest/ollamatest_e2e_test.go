//go:build e2e

package ollamatest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// TestOllama runs the checks against one server: starting it and loading the
// model takes a second or two.
func TestOllama(t *testing.T) {
	url, model := Start(t)
	if model != Model {
		t.Fatalf("model %q", model)
	}
	for _, c := range []struct {
		name string
		test func(*testing.T, string)
	}{
		{"ChatCompletion", testChatCompletion},
		{"LengthAndNaturalStops", testLengthAndNaturalStops},
		{"StreamMatchesNonStream", testStreamMatchesNonStream},
		{"StopSequence", testStopSequence},
		{"ConcurrentRequests", testConcurrentRequests},
		{"SGLangExtrasAndSystemPrompt", testSGLangExtrasAndSystemPrompt},
		{"ModelsAndErrors", testModelsAndErrors},
	} {
		t.Run(c.name, func(t *testing.T) { c.test(t, url) })
	}
}

type chatResponse struct {
	Object  string `json:"object"`
	Model   string `json:"model"`
	Choices []struct {
		Message struct {
			Role    string `json:"role"`
			Content string `json:"content"`
		} `json:"message"`
		Delta struct {
			Content string `json:"content"`
		} `json:"delta"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Usage *struct {
		PromptTokens     int `json:"prompt_tokens"`
		CompletionTokens int `json:"completion_tokens"`
		TotalTokens      int `json:"total_tokens"`
	} `json:"usage"`
}

// chat sends a request to /v1/chat/completions. For a stream it returns the
// chunks in order (the last one carrying usage, as include_usage asks).
func chat(t *testing.T, baseURL string, req map[string]any) []chatResponse {
	t.Helper()
	chunks, err := doChat(baseURL, req)
	if err != nil {
		t.Fatal(err)
	}
	return chunks
}

// doChat is chat for any goroutine: it reports instead of failing the test.
func doChat(baseURL string, req map[string]any) ([]chatResponse, error) {
	req["model"] = Model
	body, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, baseURL+"/v1/chat/completions", bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	hr.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(hr)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("status %s", resp.Status)
	}
	if req["stream"] != true {
		var r chatResponse
		if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
			return nil, err
		}
		return []chatResponse{r}, nil
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
		return nil, fmt.Errorf("stream Content-Type %q", ct)
	}
	var chunks []chatResponse
	done := false
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			continue
		}
		data, ok := strings.CutPrefix(line, "data: ")
		switch {
		case !ok:
			return nil, fmt.Errorf("stream line %q is not an SSE data line", line)
		case done:
			return nil, fmt.Errorf("data after [DONE]: %q", data)
		case data == "[DONE]":
			done = true
			continue
		}
		var c chatResponse
		if err := json.Unmarshal([]byte(data), &c); err != nil {
			return nil, fmt.Errorf("chunk %q: %v", data, err)
		}
		chunks = append(chunks, c)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if !done {
		return nil, errors.New("stream did not end with data: [DONE]")
	}
	return chunks, nil
}

// checkCompletion checks one non-streamed completion against max_tokens and
// returns its content and finish reason.
func checkCompletion(t *testing.T, r chatResponse, promptTokens, maxTokens int) (string, string) {
	t.Helper()
	if r.Object != "chat.completion" || r.Model != Model || len(r.Choices) != 1 {
		t.Fatalf("object %q model %q with %d choices", r.Object, r.Model, len(r.Choices))
	}
	c := r.Choices[0]
	if c.Message.Role != "assistant" || c.FinishReason == nil || r.Usage == nil {
		t.Fatalf("role %q finish %v usage %v", c.Message.Role, c.FinishReason, r.Usage)
	}
	u := r.Usage
	if promptTokens > 0 && u.PromptTokens != promptTokens {
		t.Errorf("prompt_tokens %d, want %d", u.PromptTokens, promptTokens)
	}
	if u.TotalTokens != u.PromptTokens+u.CompletionTokens {
		t.Errorf("total_tokens %d != %d + %d", u.TotalTokens, u.PromptTokens, u.CompletionTokens)
	}
	switch *c.FinishReason {
	case "length":
		if u.CompletionTokens != maxTokens {
			t.Errorf("finish_reason length with %d completion tokens, max_tokens %d", u.CompletionTokens, maxTokens)
		}
	case "stop":
		// The end-of-turn token counts as a completion token.
		if u.CompletionTokens < 1 || u.CompletionTokens > maxTokens {
			t.Errorf("finish_reason stop with %d completion tokens, max_tokens %d", u.CompletionTokens, maxTokens)
		}
	default:
		t.Errorf("finish_reason %q", *c.FinishReason)
	}
	return c.Message.Content, *c.FinishReason
}

// helloTokens is the prompt "hello" in ChatML with the real Qwen3 vocabulary:
// <|im_start|> user \n hello <|im_end|> \n <|im_start|> assistant \n —
// "user", "hello" and "assistant" are single tokens, and no BOS is added.
const helloTokens = 9

func hello() []map[string]string {
	return []map[string]string{{"role": "user", "content": "hello"}}
}

func testChatCompletion(t *testing.T, url string) {
	start := time.Now()
	r := chat(t, url, map[string]any{"messages": hello(), "max_tokens": 8, "seed": 1})[0]
	t.Logf("8-token completion in %v", time.Since(start).Round(time.Millisecond))
	content, finish := checkCompletion(t, r, helloTokens, 8)
	t.Logf("finish_reason %s, %d tokens: %q", finish, r.Usage.CompletionTokens, content)
}

func testLengthAndNaturalStops(t *testing.T, url string) {
	// max_tokens 4: most completions are cut ("length"). max_tokens 100:
	// with the model's end-of-turn bias (about 2% a step) most end by
	// themselves ("stop"). Seeds make the outcome reproducible.
	reasons := map[int]map[string]int{4: {}, 100: {}}
	for _, max := range []int{4, 100} {
		for seed := range 6 {
			r := chat(t, url, map[string]any{"messages": hello(), "max_tokens": max, "seed": seed})[0]
			_, finish := checkCompletion(t, r, helloTokens, max)
			reasons[max][finish]++
		}
	}
	t.Logf("finish reasons by max_tokens: %v", reasons)
	if reasons[4]["length"] == 0 || reasons[100]["stop"] == 0 {
		t.Errorf("want some length finishes at max_tokens 4 and some stops at 100, got %v", reasons)
	}
}

func testStreamMatchesNonStream(t *testing.T, url string) {
	// Greedy decoding is deterministic, so the stream must spell out exactly
	// the non-streamed completion.
	req := func(stream bool) map[string]any {
		r := map[string]any{"messages": hello(), "max_tokens": 12, "temperature": 0, "seed": 1}
		if stream {
			r["stream"] = true
			r["stream_options"] = map[string]any{"include_usage": true}
		}
		return r
	}
	want := chat(t, url, req(false))[0]
	wantContent, wantFinish := checkCompletion(t, want, helloTokens, 12)

	start := time.Now()
	chunks := chat(t, url, req(true))
	t.Logf("stream of %d chunks in %v", len(chunks), time.Since(start).Round(time.Millisecond))
	var content strings.Builder
	var finish string
	var usage *chatResponse
	contentChunks := 0
	for i, c := range chunks {
		if c.Object != "chat.completion.chunk" {
			t.Errorf("chunk %d: object %q", i, c.Object)
		}
		if c.Usage != nil {
			usage = &chunks[i]
			continue
		}
		if len(c.Choices) != 1 {
			t.Fatalf("chunk %d has %d choices", i, len(c.Choices))
		}
		if d := c.Choices[0].Delta.Content; d != "" {
			content.WriteString(d)
			contentChunks++
		}
		if f := c.Choices[0].FinishReason; f != nil {
			if finish != "" {
				t.Errorf("second finish_reason %q", *f)
			}
			finish = *f
		}
	}
	if content.String() != wantContent || finish != wantFinish {
		t.Errorf("stream gave %q (%s), non-stream %q (%s)", content.String(), finish, wantContent, wantFinish)
	}
	if usage == nil {
		t.Fatal("no usage chunk despite include_usage")
	}
	if *usage.Usage != *want.Usage {
		t.Errorf("stream usage %+v, non-stream %+v", *usage.Usage, *want.Usage)
	}
	// Tokens arrive one by one (a token that ends inside a UTF-8 character
	// waits for the next), so the stream has about one chunk per token.
	if contentChunks < 2 || contentChunks > usage.Usage.CompletionTokens {
		t.Errorf("%d content chunks for %d tokens", contentChunks, usage.Usage.CompletionTokens)
	}
}

func testStopSequence(t *testing.T, url string) {
	// Take the greedy completion token by token from a stream, then ask again
	// with the third token's text as a stop sequence: the completion must
	// end just before it, with finish_reason stop and the tokens up to and
	// including the stop counted.
	chunks := chat(t, url, map[string]any{"messages": hello(), "max_tokens": 12, "temperature": 0, "seed": 1, "stream": true})
	var pieces []string
	for _, c := range chunks {
		if len(c.Choices) == 1 && c.Choices[0].Delta.Content != "" {
			pieces = append(pieces, c.Choices[0].Delta.Content)
		}
	}
	if len(pieces) < 3 {
		t.Fatalf("only %d pieces: %q", len(pieces), pieces)
	}
	// The first piece whose text is new, printable and not whitespace.
	k := -1
	for i := 1; i < len(pieces); i++ {
		p := pieces[i]
		if strings.TrimSpace(p) == p && p != "" && strconv.IsPrint([]rune(p)[0]) && !strings.Contains(strings.Join(pieces[:i], ""), p) {
			k = i
			break
		}
	}
	if k < 0 {
		t.Skipf("no usable stop piece in %q", pieces)
	}
	stop := pieces[k]
	r := chat(t, url, map[string]any{"messages": hello(), "max_tokens": 12, "temperature": 0, "seed": 1, "stop": []string{stop}})[0]
	content, finish := checkCompletion(t, r, helloTokens, 12)
	if want := strings.Join(pieces[:k], ""); content != want || finish != "stop" {
		t.Errorf("with stop %q: got %q (%s), want %q (stop)", stop, content, finish, want)
	}
	if r.Usage.CompletionTokens != k+1 {
		t.Errorf("with stop %q at token %d: %d completion tokens, want %d", stop, k+1, r.Usage.CompletionTokens, k+1)
	}
}

func testConcurrentRequests(t *testing.T, url string) {
	// Twice as many requests as the server decodes at once (Parallel 4):
	// half are batched together, half wait in ollama's queue.
	const n, max = 8, 16
	var wg sync.WaitGroup
	lat := make([]time.Duration, n)
	res := make([][]chatResponse, n)
	errs := make([]error, n)
	start := time.Now()
	for i := range n {
		wg.Go(func() {
			s := time.Now()
			res[i], errs[i] = doChat(url, map[string]any{
				"messages":   []map[string]string{{"role": "user", "content": fmt.Sprintf("request %d", i)}},
				"max_tokens": max, "seed": i,
			})
			lat[i] = time.Since(s).Round(time.Millisecond)
		})
	}
	wg.Wait()
	t.Logf("%d concurrent %d-token requests in %v; latencies %v", n, max, time.Since(start).Round(time.Millisecond), lat)
	for i := range n {
		if errs[i] != nil {
			t.Errorf("request %d: %v", i, errs[i])
			continue
		}
		checkCompletion(t, res[i][0], 0, max)
	}
}

func testSGLangExtrasAndSystemPrompt(t *testing.T, url string) {
	// What the generate stage sends to SGLang: ollama ignores the fields it
	// does not know instead of refusing the request. The system turn adds
	// <|im_start|> system \n Be  brief . <|im_end|> \n: 8 tokens.
	r := chat(t, url, map[string]any{
		"messages": []map[string]string{
			{"role": "system", "content": "Be brief."},
			{"role": "user", "content": "hello"},
		},
		"max_tokens":           4,
		"chat_template_kwargs": map[string]any{"enable_thinking": true},
		"separate_reasoning":   true,
		"top_k":                20,
		"min_p":                0,
		"rid":                  "pipe-test-1",
		"repetition_penalty":   1.0,
		"skip_special_tokens":  true,
	})[0]
	checkCompletion(t, r, helloTokens+8, 4)
}

func testModelsAndErrors(t *testing.T, url string) {
	resp, err := http.Get(url + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	var models struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	err = json.NewDecoder(resp.Body).Decode(&models)
	resp.Body.Close()
	if err != nil || len(models.Data) != 1 || models.Data[0].ID != Model+":latest" {
		t.Errorf("/v1/models: %+v, %v; want one model %s:latest", models, err, Model)
	}

	// Errors come as OpenAI error objects with a 4xx status.
	for _, c := range []struct {
		req    map[string]any
		status int
	}{
		{map[string]any{"model": "no-such-model", "messages": hello()}, http.StatusNotFound},
		{map[string]any{"model": Model, "messages": []any{}}, http.StatusBadRequest},
	} {
		body, _ := json.Marshal(c.req)
		resp, err := http.Post(url+"/v1/chat/completions", "application/json", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		var e struct {
			Error struct {
				Message string `json:"message"`
			} `json:"error"`
		}
		err = json.NewDecoder(resp.Body).Decode(&e)
		resp.Body.Close()
		if resp.StatusCode != c.status || err != nil || e.Error.Message == "" {
			t.Errorf("%s: status %d, error %q (%v); want status %d with a message", body, resp.StatusCode, e.Error.Message, err, c.status)
		}
	}
}

// TestStopLeavesNoProcess checks that cleanup ends the server and its runner.
func TestStopLeavesNoProcess(t *testing.T) {
	var s server
	t.Run("serve", func(t *testing.T) {
		s = start(t, Options{Parallel: 1})
		chat(t, s.baseURL, map[string]any{"messages": hello(), "max_tokens": 2})
	})
	if s.pid == 0 {
		t.Skip("server did not start")
	}
	if live := groupMembers(s.pid); len(live) > 0 {
		t.Errorf("processes of the server's group still running: %v", live)
	}
	if c, err := net.Dial("tcp", strings.TrimPrefix(s.baseURL, "http://")); err == nil {
		c.Close()
		t.Errorf("%s still accepts connections", s.baseURL)
	}
}
