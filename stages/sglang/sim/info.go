package sim

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// HealthCheckTimeout is how long /health waits for its 1-token generation
// before answering 503 (SGLang's SGLANG_HEALTH_CHECK_TIMEOUT, 20 s), in
// simulated time.
const HealthCheckTimeout = 20 * time.Second

// healthGenerate is /health and /health_generate, as http_server.py's
// health_generate (SGLang 2026): 503 while warming up; else it submits a
// 1-token generation (through the queue) and answers 200 as soon as the
// server makes any progress — that generation done, or any running request
// producing a token (SGLang returns on any scheduler output, polled every
// second) — and 503 when nothing progressed within HealthCheckTimeout.
func (l *life) healthGenerate(w http.ResponseWriter, r *http.Request) {
	answer := func(status int) {
		w.Header()["Content-Length"] = []string{"0"}
		w.WriteHeader(status)
	}
	if l.warming() {
		answer(http.StatusServiceUnavailable)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), l.cfg.wall(HealthCheckTimeout))
	defer cancel()
	done := make(chan error, 1)
	go func() {
		t := newTicket(1, 1, l.kvCapacity()) // one token in, one out
		err := l.adm.acquire(ctx, l.dead, t)
		if err == nil {
			var from time.Time
			from, err = l.prefill(ctx, 1)
			if err == nil {
				err = l.decode(ctx, 1, from, nil)
			}
			l.adm.release(t)
		}
		done <- err
	}()
	base := l.genTokens.Load()
	poll := time.NewTicker(max(time.Millisecond, min(l.cfg.wall(time.Second), 50*time.Millisecond)))
	defer poll.Stop()
	for {
		select {
		case err := <-done:
			switch {
			case err == nil:
				answer(http.StatusOK)
			case errors.Is(err, errQueueFull), r.Context().Err() == nil && ctx.Err() != nil:
				answer(http.StatusServiceUnavailable)
			}
			return
		case <-poll.C:
			if l.genTokens.Load() > base {
				cancel() // the 1-token request is not needed any more
				<-done
				answer(http.StatusOK)
				return
			}
		}
	}
}

func (l *life) modelInfo(w http.ResponseWriter) {
	body, _ := json.Marshal(map[string]any{
		"model_path":                l.cfg.Model,
		"tokenizer_path":            l.cfg.Model,
		"is_generation":             true,
		"preferred_sampling_params": nil,
		"weight_version":            "default",
		"has_image_understanding":   false,
		"has_audio_understanding":   false,
		"model_type":                "qwen3",
		"architectures":             []string{"Qwen3ForCausalLM"},
	})
	writeJSON(w, http.StatusOK, body)
}

// serverInfo reports the server arguments a client may look at, plus
// "pipe_sim": true so tools can tell a simulator from a real server.
func (l *life) serverInfo(w http.ResponseWriter) {
	c := l.cfg
	var spec, specDraft any
	if c.SpecAcceptMean > 0 {
		spec, specDraft = "EAGLE3", SpecDraftTokens
	}
	toolParser := any(c.ToolCallParser)
	if c.ToolCallParser == "" {
		toolParser = nil
	}
	reasoning := any(c.ReasoningParser)
	if c.ReasoningParser == "none" {
		reasoning = nil
	}
	maxQueued := any(c.MaxQueued)
	if c.MaxQueued < 0 {
		maxQueued = nil
	}
	host, port, _ := strings.Cut(l.ln.Addr().String(), ":")
	portNum, _ := strconv.Atoi(port)
	running, queued := l.adm.counts()
	maxRunning := any(c.MaxRunning)
	if c.HideCapacity {
		maxRunning = nil
	}
	states := map[string]any{
		"num_running_reqs":                      running,
		"num_queue_reqs":                        queued,
		"avg_spec_accept_length":                c.SpecAcceptMean,
		"last_gen_throughput":                   l.genThroughput(),
		"max_total_num_tokens":                  l.kvCapacity(),
		"effective_max_running_requests_per_dp": c.MaxRunning,
		"decode_tokens_per_sec_1":               c.DecodeTokensPerSec,
	}
	if c.HideCapacity {
		delete(states, "effective_max_running_requests_per_dp")
	}
	body, _ := json.Marshal(map[string]any{
		"model_path":        c.Model,
		"tokenizer_path":    c.Model,
		"served_model_name": c.Model,
		"host":              host,
		"port":              portNum,
		// The CLI argument, null unless set (SGLang 2026): the model's
		// length is /v1/models' max_model_len; max_req_input_len bounds
		// a prompt (scheduler_info, merged at the top level).
		"context_length":               nil,
		"max_req_input_len":            c.ContextLength - 1,
		"max_running_requests":         maxRunning,
		"max_queued_requests":          maxQueued,
		"max_total_num_tokens":         l.kvCapacity(),
		"reasoning_parser":             reasoning,
		"tool_call_parser":             toolParser,
		"speculative_algorithm":        spec,
		"speculative_num_draft_tokens": specDraft,
		"tp_size":                      1,
		"dp_size":                      1,
		"skip_server_warmup":           c.WarmUp == 0,
		"enable_metrics":               true,
		"random_seed":                  c.Seed,
		"version":                      c.Version,
		"pipe_sim":                     true,
		"pipe_sim_speed":               c.Speed,
		"internal_states":              []map[string]any{states},
	})
	writeJSON(w, http.StatusOK, body)
}

func (l *life) models(w http.ResponseWriter) {
	body := fmt.Appendf(nil, `{"object":"list","data":[{"id":%q,"object":"model","created":%d,"owned_by":"sglang","root":%q,"parent":null,"max_model_len":%d}]}`,
		l.cfg.Model, l.started.Unix(), l.cfg.Model, l.cfg.ContextLength)
	writeJSON(w, http.StatusOK, body)
}

// kvCapacity is the simulated KV cache size in tokens (what token_usage is a
// fraction of): room for every running slot at 4096 tokens, and at least one
// full context.
func (l *life) kvCapacity() int {
	if l.cfg.KVTokens > 0 {
		return l.cfg.KVTokens
	}
	return max(l.cfg.ContextLength, l.cfg.MaxRunning*4096)
}

// genThroughput is the current decode throughput in simulated tokens/s:
// running requests times each one's speed.
func (l *life) genThroughput() float64 {
	n, _ := l.adm.counts()
	if n == 0 {
		return 0
	}
	return float64(n) * l.rate()
}

// metrics writes Prometheus text in SGLang's names, labelled with the model.
func (l *life) metrics(w http.ResponseWriter) {
	running, queued := l.adm.counts()
	label := fmt.Sprintf(`{model_name=%q}`, l.cfg.Model)
	var b strings.Builder
	metric := func(name, typ, help string, v float64) {
		fmt.Fprintf(&b, "# HELP sglang:%s %s\n# TYPE sglang:%s %s\nsglang:%s%s %s\n",
			name, help, name, typ, name, label, strconv.FormatFloat(v, 'g', -1, 64))
	}
	metric("prompt_tokens_total", "counter", "Number of prefill tokens processed.", float64(l.promptTokens.Load()))
	metric("generation_tokens_total", "counter", "Number of generation tokens processed.", float64(l.genTokens.Load()))
	metric("num_requests_total", "counter", "Number of requests processed.", float64(l.requests.Load()))
	// Not an SGLang metric: whole answers sent, for tests.
	fmt.Fprintf(&b, "# HELP pipe_sim:completed_requests_total Generation requests answered in full (pipe sim only).\n# TYPE pipe_sim:completed_requests_total counter\npipe_sim:completed_requests_total%s %d\n", label, l.completed.Load())
	metric("num_running_reqs", "gauge", "The number of running requests.", float64(running))
	metric("num_queue_reqs", "gauge", "The number of requests in the waiting queue.", float64(queued))
	metric("gen_throughput", "gauge", "The generation throughput (token/s).", l.genThroughput())
	metric("token_usage", "gauge", "The token usage.", float64(l.kvTokens.Load())/float64(l.kvCapacity()))
	metric("max_total_num_tokens", "gauge", "Maximum total number of tokens.", float64(l.kvCapacity()))
	// No sglang:max_running_requests: SGLang dropped it in 2024
	// (metrics/collector.py); clients read /server_info.
	metric("num_retracted_reqs", "gauge", "The number of retracted requests.", float64(l.retractedNow.Load()))
	metric("num_retracted_requests_total", "counter", "Total number of retracted requests due to insufficient KV cache.", float64(l.retracted.Load()))
	metric("cache_hit_rate", "gauge", "The cache hit rate.", 0)
	l.ttft.write(&b, "time_to_first_token_seconds", "Histogram of time to first token in seconds.", label)
	if l.cfg.SpecAcceptMean > 0 {
		metric("spec_accept_length", "gauge", "The average acceptance length of speculative decoding.", l.cfg.SpecAcceptMean)
	}
	h := w.Header()
	h["Content-Type"] = []string{"text/plain; version=0.0.4; charset=utf-8"}
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write([]byte(b.String()))
}
