package sim

import (
	"errors"
	"fmt"
	"time"
)

// Config describes every server of a fleet. The zero value is valid: each
// field's comment states the default that a zero (or nil) value means. All
// durations and rates are in simulated time; Speed compresses them into wall
// time.
type Config struct {
	// Count is how many servers to start when Addrs is empty. Default 1.
	Count int
	// Addrs are the listen addresses ("127.0.0.1:30000"), one server each.
	// Default: Count servers on 127.0.0.1 with ports chosen by the kernel.
	Addrs []string

	// Model is reported as model_path, tokenizer_path and /v1/models id.
	// Default "Qwen/Qwen3-32B".
	Model string
	// Version is reported by /get_server_info. Default "0.5.4".
	Version string
	// ContextLength bounds prompt + max new tokens (400 beyond it).
	// Default 40960 (Qwen3's max_position_embeddings).
	ContextLength int
	// ReasoningParser splits thinking from the answer in chat completions
	// when thinking is on, as `--reasoning-parser qwen3` does. Default
	// "qwen3"; "none" turns the split off (content then carries the raw
	// "<think>…</think>" text).
	ReasoningParser string
	// ForcedThinking says the served chat template forces thinking (its
	// generation prompt ends in "<think>\n"): chat outputs then start
	// inside the reasoning, without <think> (see forced.go). /generate
	// tells it from the prompt itself. Default false.
	ForcedThinking bool

	// MaxRunning is how many requests decode at once. Default 48.
	MaxRunning int
	// HideCapacity makes /server_info report max_running_requests null and
	// leave effective_max_running_requests_per_dp out of internal_states,
	// as a server started without --max-running-requests reports the
	// argument, on a version whose internal_states lack the derived limit:
	// a client must learn the capacity from the load its answers report.
	// Default false.
	HideCapacity bool
	// MaxQueued is how many admitted requests may wait for a running slot;
	// one more gets 503 "The request queue is full.". Default 1024; a
	// negative value means no limit.
	MaxQueued int
	// KVTokens is the KV cache size in tokens (max_total_num_tokens). A
	// waiting request is admitted only when, besides a running slot, its
	// prompt and max_new_tokens (clipped at 4096) fit beyond the running
	// requests' tokens and their reserved decode tokens, as SGLang's
	// scheduler admits (see admission in life.go); when the running
	// requests' prompts and outputs still exceed it, one of them is
	// retracted at a time (it leaves the batch, waits until it fits again
	// and re-prefills; meta_info num_retractions, /metrics
	// num_retracted_requests_total). Default max(ContextLength,
	// MaxRunning × 4096).
	KVTokens int
	// WarmUp is how long /health answers 503 (and generation requests are
	// refused with 503) after a server starts or revives. Default 0.
	WarmUp time.Duration

	// Speed divides every simulated duration: 60 runs a simulated minute in
	// a wall second. Reported latencies stay in simulated seconds. Default 1.
	Speed float64
	// PrefillLatency is the fixed part of a request's time to first token.
	// Default 20ms.
	PrefillLatency time.Duration
	// PrefillTokensPerSec is the prefill speed; prefill takes
	// PrefillLatency + prompt_tokens / PrefillTokensPerSec. Default 8000.
	PrefillTokensPerSec float64
	// DecodeTokensPerSec is one request's decode speed when it runs alone
	// (speculative decoding, if any, already included). Default 60.
	DecodeTokensPerSec float64
	// BatchHalfSpeed is the running-batch size at which each request decodes
	// at half of DecodeTokensPerSec: with n running, each request gets
	// DecodeTokensPerSec / (1 + (n-1)/BatchHalfSpeed) tokens/s, so a server's
	// total throughput grows with n and saturates (≈1450 tokens/s at 48
	// running with the defaults). Default 48.
	BatchHalfSpeed float64

	// ThinkTokensMean is the mean length of the thinking part. Thinking and
	// answer lengths are log-normal with LengthSigma. Default 1500.
	ThinkTokensMean int
	// ThinkTokensMax caps the thinking part. Default 12000.
	ThinkTokensMax int
	// AnswerTokensMean is the mean length of the answer. Default 400.
	AnswerTokensMean int
	// AnswerTokensMax caps the answer. Default 4000.
	AnswerTokensMax int
	// LengthSigma is the log-normal shape of both lengths. Default 0.6.
	LengthSigma float64

	// SpecAcceptMean turns on speculative-decoding figures (spec_verify_ct,
	// spec_accept_length) with this mean accepted length per verify step
	// (per request it varies by ±25%). Default 0: no speculative decoding.
	SpecAcceptMean float64

	// ToolCalls is the share of answers to prompts with tools that call
	// one of them (see tools.go), 0..1. Default 0 means 0.5; a negative
	// value means none.
	ToolCalls float64
	// ToolCallParser parses the calls out of chat answers to requests
	// with tools into message.tool_calls, as SGLang's --tool-call-parser
	// does: "qwen25" (Qwen3's <tool_call> format; "qwen" is its alias).
	// Default "": none, the calls stay in content.
	ToolCallParser string

	// Faults are injected failures; see Fault. Default none.
	Faults []Fault
	// Seed makes outputs and fault draws reproducible; outputs also depend
	// on the request content. Default 0 (itself a fixed seed).
	Seed uint64

	// APIKey, when set, makes every server require it like SGLang's
	// --api-key: every request except OPTIONS and paths starting /health or
	// /metrics answers 401 {"error": "Unauthorized"} unless it carries
	// exactly "Authorization: Bearer APIKey". Default "": no key.
	APIKey string

	// Tokenizer, when set, produces prompt token counts and output ids; the
	// output text is then re-tokenized with it. Default nil: the documented
	// approximation: a prompt is one token per 4 bytes, outputs use the
	// fixed ids described in corpus.go.
	Tokenizer Tokenizer
}

// Tokenizer is the part of a real tokenizer the simulator uses.
type Tokenizer interface {
	// Encode returns the ids of text without adding special tokens, except
	// that special-token strings in text (e.g. "<|im_start|>") map to their ids.
	Encode(text string) []int
	// Decode returns the text of ids with special tokens kept.
	Decode(ids []int) string
}

// Defaults for Config's zero values.
const (
	DefaultModel               = "Qwen/Qwen3-32B"
	DefaultVersion             = "0.5.4"
	DefaultContextLength       = 40960
	DefaultReasoningParser     = "qwen3"
	DefaultMaxRunning          = 48
	DefaultMaxQueued           = 1024
	DefaultSpeed               = 1.0
	DefaultPrefillLatency      = 20 * time.Millisecond
	DefaultPrefillTokensPerSec = 8000.0
	DefaultDecodeTokensPerSec  = 60.0
	DefaultBatchHalfSpeed      = 48.0
	DefaultThinkTokensMean     = 1500
	DefaultThinkTokensMax      = 12000
	DefaultAnswerTokensMean    = 400
	DefaultAnswerTokensMax     = 4000
	DefaultLengthSigma         = 0.6
	DefaultToolCalls           = 0.5
)

// withDefaults returns c with zero fields replaced by their defaults, or an
// error naming every field out of range.
func (c Config) withDefaults() (Config, error) {
	c.fillDefaults()
	errs := c.rangeErrors()
	n := c.Count
	if len(c.Addrs) > 0 {
		n = len(c.Addrs)
	}
	c.Faults = append([]Fault(nil), c.Faults...) // normalized below; the caller's slice stays as given
	for i := range c.Faults {
		f, err := c.Faults[i].normalize(n)
		if err != nil {
			errs = append(errs, fmt.Errorf("fault %d (%s): %w", i+1, c.Faults[i].Kind, err))
		}
		c.Faults[i] = f
	}
	if len(errs) > 0 {
		return c, fmt.Errorf("sim: %w", errors.Join(errs...))
	}
	return c, nil
}

// fillDefaults sets each zero field that has a default to it. Count
// defaults to 1 only when no Addrs are given.
func (c *Config) fillDefaults() {
	orDefault(&c.Model, DefaultModel)
	orDefault(&c.Version, DefaultVersion)
	orDefault(&c.ReasoningParser, DefaultReasoningParser)
	orDefault(&c.PrefillLatency, DefaultPrefillLatency)
	if len(c.Addrs) == 0 {
		orDefault(&c.Count, 1)
	}
	orDefault(&c.ContextLength, DefaultContextLength)
	orDefault(&c.MaxRunning, DefaultMaxRunning)
	orDefault(&c.MaxQueued, DefaultMaxQueued)
	orDefault(&c.ThinkTokensMean, DefaultThinkTokensMean)
	orDefault(&c.ThinkTokensMax, DefaultThinkTokensMax)
	orDefault(&c.AnswerTokensMean, DefaultAnswerTokensMean)
	orDefault(&c.AnswerTokensMax, DefaultAnswerTokensMax)
	orDefault(&c.Speed, DefaultSpeed)
	orDefault(&c.PrefillTokensPerSec, DefaultPrefillTokensPerSec)
	orDefault(&c.DecodeTokensPerSec, DefaultDecodeTokensPerSec)
	orDefault(&c.BatchHalfSpeed, DefaultBatchHalfSpeed)
	orDefault(&c.LengthSigma, DefaultLengthSigma)
}

// orDefault sets *p to d when *p is its type's zero.
func orDefault[T comparable](p *T, d T) {
	var zero T
	if *p == zero {
		*p = d
	}
}

// rangeErrors names each field of c (defaults filled) out of its range.
func (c *Config) rangeErrors() []error {
	var errs []error
	check := func(ok bool, format string, args ...any) {
		if !ok {
			errs = append(errs, fmt.Errorf(format, args...))
		}
	}
	check(len(c.Addrs) > 0 || (c.Count >= 1 && c.Count <= 1024), "count must be 1..1024, got %d", c.Count)
	check(c.ContextLength >= 16, "context length must be at least 16, got %d", c.ContextLength)
	check(c.ReasoningParser == "qwen3" || c.ReasoningParser == "none", "reasoning parser must be qwen3 or none, got %q", c.ReasoningParser)
	check(c.MaxRunning >= 1, "max running must be at least 1, got %d", c.MaxRunning)
	check(c.KVTokens >= 0, "KV tokens must not be negative, got %d", c.KVTokens)
	check(c.WarmUp >= 0, "warm-up must not be negative, got %v", c.WarmUp)
	check(c.Speed > 0, "speed must be positive, got %g", c.Speed)
	check(c.PrefillLatency >= 0, "prefill latency must not be negative, got %v", c.PrefillLatency)
	check(c.PrefillTokensPerSec > 0, "prefill tokens/s must be positive, got %g", c.PrefillTokensPerSec)
	check(c.DecodeTokensPerSec > 0, "decode tokens/s must be positive, got %g", c.DecodeTokensPerSec)
	check(c.BatchHalfSpeed > 0, "batch half-speed must be positive, got %g", c.BatchHalfSpeed)
	check(c.ThinkTokensMean >= 1 && c.ThinkTokensMean <= c.ThinkTokensMax, "think tokens mean must be 1..max (%d), got %d", c.ThinkTokensMax, c.ThinkTokensMean)
	check(c.AnswerTokensMean >= 1 && c.AnswerTokensMean <= c.AnswerTokensMax, "answer tokens mean must be 1..max (%d), got %d", c.AnswerTokensMax, c.AnswerTokensMean)
	check(c.ThinkTokensMax <= maxSpanLimit && c.AnswerTokensMax <= maxSpanLimit, "think and answer token maxima must be at most %d", maxSpanLimit)
	check(c.LengthSigma > 0 && c.LengthSigma <= 3, "length sigma must be in (0, 3], got %g", c.LengthSigma)
	check(c.ToolCalls <= 1, "tool calls share must be at most 1, got %g", c.ToolCalls)
	check(c.ToolCallParser == "" || c.ToolCallParser == "qwen25" || c.ToolCallParser == "qwen", "tool call parser must be qwen25 (or qwen), got %q", c.ToolCallParser)
	check(c.SpecAcceptMean == 0 || (c.SpecAcceptMean >= 1 && c.SpecAcceptMean <= 16), "spec accept mean must be 0 (off) or 1..16, got %g", c.SpecAcceptMean)
	return errs
}

// toolCallShare is ToolCalls with its default.
func (c *Config) toolCallShare() float64 {
	switch {
	case c.ToolCalls == 0:
		return DefaultToolCalls
	case c.ToolCalls < 0:
		return 0
	}
	return c.ToolCalls
}

// wall converts a simulated duration into wall time.
func (c *Config) wall(d time.Duration) time.Duration {
	return time.Duration(float64(d) / c.Speed)
}
