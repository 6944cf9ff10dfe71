package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/pipe-dev/pipe/stages/sglang/sim"
	"github.com/pipe-dev/pipe/stages/tokenize"
)

// simCmd is pipe sim and its flags; each default is sim's own default.
type simCmd struct {
	ports, listen, tokenizer string
	lengths                  string // a length preset; "" keeps the flags as given
	toolCalls                float64
	count                    int
	faults                   faultFlags
	cfg                      sim.Config
}

// faultFlags collects repeated --fault values.
type faultFlags []sim.Fault

func (f *faultFlags) String() string {
	s := make([]string, len(*f))
	for i, x := range *f {
		s[i] = x.String()
	}
	return strings.Join(s, " ")
}

func (f *faultFlags) Set(v string) error {
	for _, one := range strings.Fields(strings.ReplaceAll(v, ";", " ")) {
		x, err := sim.ParseFault(one)
		if err != nil {
			return err
		}
		*f = append(*f, x)
	}
	return nil
}

func init() {
	register(&command{
		Name:      "sim",
		UsageLine: "pipe sim [--ports FROM-TO | --listen HOST:PORT --count N] [flags]",
		Short:     "serve simulated SGLang servers (no GPU needed)",
		Long: `Sim serves N independent simulated SGLang servers until interrupted, and prints
one line per server ("sim: server 0 ready at http://127.0.0.1:30000") once it
listens. Each speaks SGLang's HTTP API: POST /generate (text or input_ids,
sampling_params, rid, stream), POST /v1/chat/completions (reasoning split like
--reasoning-parser qwen3), GET /health (503 during --warm-up),
/health_generate, /get_model_info and /model_info, /get_server_info and
/server_info, /v1/models and /metrics (Prometheus text). With --api-key KEY,
as SGLang's, every request except OPTIONS and paths starting /health or
/metrics answers 401 {"error": "Unauthorized"} unless it carries
"Authorization: Bearer KEY" (the scheme in any case) or "x-api-key: KEY".
Answers carry meta_info's num_running_reqs and num_waiting_reqs (per choice
on the chat API with "return_meta_info": true). A chat request with
"return_token_ids": true gets choices[i].token_ids (the output ids, as
/generate's output_ids) and prompt_token_ids (Qwen3's template over the
messages), as SGLang 2026-07's; /server_info has
context_length null (the model's length is /v1/models' max_model_len),
max_req_input_len and max_running_requests, as SGLang 2026's.

Load behaves like a GPU server with continuous batching: at most --max-running
requests decode at once and the rest wait in a queue of --max-queued (then
503 "The request queue is full."); prefill takes --prefill-latency plus
prompt_tokens / --prefill-tps; each running request decodes at
--decode-tps / (1 + (running-1) / --batch-half-speed) tokens/s, so a server's
throughput saturates as the batch grows. A client that disconnects aborts its
request and frees its slot. --speed X runs X simulated seconds per wall second
(reported latencies stay simulated).

Outputs are deterministic for a given request and --seed:
"<think>\n…\n</think>\n\n" + answer + <|im_end|> (151645), thinking and answer
lengths log-normal around their means, capped by max_new_tokens (then
finish_reason "length"). --lengths reasoning is a reasoning model's heavy
tail: thinking 5300 and answer 800 tokens on average, sigma 0.9, thinking up
to 30000 and answers up to 8000 (about 6000 tokens per output on average, p99
near 29000); the length flags given with it override it. In a sim: URL the
same options are lengths=, think_mean=, think_max=, answer_mean=,
answer_max= and length_sigma=. Without --tokenizer, a prompt counts one token per 4
bytes and output ids are stable Qwen3-range ids; with --tokenizer DIR (a
directory with tokenizer.json) both come from the real tokenizer.

Tools: an answer to a prompt with tools (the chat API's "tools", or Qwen3's
<tools> block in a /generate prompt; from input_ids only with --tokenizer)
calls one of them with probability --tool-calls (default 0.5; 0: never):
after the thinking, Qwen3's <tool_call>\n{"name": NAME, "arguments": {...}}
\n</tool_call> before <|im_end|>. With --tool-call-parser qwen25, as SGLang's,
a chat answer's calls come parsed in message.tool_calls (ids "call_" + 24
hex) with finish_reason "tool_calls"; a malformed call is dropped there.
In a sim: URL: tool_calls= and tool_call_parser=.

Faults (--fault, repeatable): KIND[:RATE][@AT[+FOR]][#SERVER,...], where KIND is
one of 500, 503, 400, hang, reset, empty-answer, empty-thinking, no-think-end,
leaked-think, bad-tool-call (a prompt with tools gets a malformed call: not
JSON, or an undeclared name), die, slow (the server decodes at a third of its
speed while the window is open: slow@30m, slow@3000req#1), spec-collapse
(with --spec-accept, speculative decoding accepts almost no draft token while
the answers look fine: spec-collapse@2000req#1). RATE is a probability per request (default 1 inside a
window); AT and FOR are simulated times since start; SERVER indexes restrict it
(default all servers). Examples: --fault 500:0.01  --fault hang@10m+30s
--fault die@1h+5m#2 (server 2 down from 1h to 1h05m). Draws are reproducible
with --seed.`,
		New: func() runner { return &simCmd{} },
	})
}

func (c *simCmd) setFlags(fs *flag.FlagSet) {
	cfg := &c.cfg
	fs.StringVar(&c.ports, "ports", "", "serve on 127.0.0.1 at each port of `FROM-TO` (or a comma list); overrides --listen/--count")
	fs.StringVar(&c.listen, "listen", "127.0.0.1:30000", "first server's `HOST:PORT`; later servers take the next ports (port 0: any free ports)")
	fs.IntVar(&c.count, "count", 1, "number of servers with --listen")
	fs.StringVar(&cfg.Model, "model", sim.DefaultModel, "model name reported by the info endpoints")
	fs.IntVar(&cfg.ContextLength, "context-length", sim.DefaultContextLength, "context length: prompt + max new tokens beyond it is a 400")
	fs.StringVar(&cfg.ReasoningParser, "reasoning-parser", sim.DefaultReasoningParser, "chat reasoning split: qwen3 or none")
	fs.BoolVar(&cfg.ForcedThinking, "forced-thinking", false, "the served chat template forces thinking (generation prompt ends in <think>\\n): chat outputs start inside the reasoning (/generate tells it from the prompt)")
	fs.IntVar(&cfg.MaxRunning, "max-running", sim.DefaultMaxRunning, "requests decoding at once per server")
	fs.IntVar(&cfg.MaxQueued, "max-queued", sim.DefaultMaxQueued, "requests waiting for a slot before 503 (negative: no limit)")
	fs.DurationVar(&cfg.WarmUp, "warm-up", 0, "simulated time /health answers 503 after start or revival (default 0s: none)")
	fs.Float64Var(&cfg.Speed, "speed", sim.DefaultSpeed, "simulated seconds per wall second")
	fs.DurationVar(&cfg.PrefillLatency, "prefill-latency", sim.DefaultPrefillLatency, "fixed part of the time to first token")
	fs.Float64Var(&cfg.PrefillTokensPerSec, "prefill-tps", sim.DefaultPrefillTokensPerSec, "prefill speed, prompt tokens/s")
	fs.Float64Var(&cfg.DecodeTokensPerSec, "decode-tps", sim.DefaultDecodeTokensPerSec, "one request's decode speed when alone, tokens/s")
	fs.Float64Var(&cfg.BatchHalfSpeed, "batch-half-speed", sim.DefaultBatchHalfSpeed, "running-batch size at which each request decodes at half speed")
	fs.IntVar(&cfg.ThinkTokensMean, "think-mean", sim.DefaultThinkTokensMean, "mean thinking length, tokens")
	fs.IntVar(&cfg.ThinkTokensMax, "think-max", sim.DefaultThinkTokensMax, "maximum thinking length, tokens")
	fs.IntVar(&cfg.AnswerTokensMean, "answer-mean", sim.DefaultAnswerTokensMean, "mean answer length, tokens")
	fs.IntVar(&cfg.AnswerTokensMax, "answer-max", sim.DefaultAnswerTokensMax, "maximum answer length, tokens")
	fs.Float64Var(&cfg.LengthSigma, "length-sigma", sim.DefaultLengthSigma, "log-normal shape of both lengths")
	fs.StringVar(&c.lengths, "lengths", "", "length `PRESET`: "+strings.Join(sim.LengthPresets(), " or ")+"; the length flags given override it (default: the length flags' defaults)")
	fs.Float64Var(&cfg.SpecAcceptMean, "spec-accept", 0, "mean accepted tokens per speculative verify step (default 0: no speculative decoding)")
	fs.Float64Var(&c.toolCalls, "tool-calls", sim.DefaultToolCalls, "share of answers to prompts with tools that call one, 0..1")
	fs.StringVar(&cfg.ToolCallParser, "tool-call-parser", "", "parse chat answers' tool calls into message.tool_calls like SGLang's --tool-call-parser: qwen25 (default: none)")
	fs.Uint64Var(&cfg.Seed, "seed", 0, "seed for outputs and fault draws (default 0)")
	fs.Var(&c.faults, "fault", "inject a `FAULT` (repeatable; see above)")
	fs.StringVar(&cfg.APIKey, "api-key", "", "require \"Authorization: Bearer `KEY`\" like SGLang's --api-key (default: none)")
	fs.StringVar(&c.tokenizer, "tokenizer", "", "`DIR` with tokenizer.json: real token counts and output ids (default: approximation)")
}

func (c *simCmd) run(ctx context.Context, std *stdio, fs *flag.FlagSet) error {
	if fs.NArg() != 0 {
		return usageErrorf("usage: pipe sim [flags] (no arguments)")
	}
	cfg := c.cfg
	cfg.Faults = c.faults
	if c.toolCalls < 0 || c.toolCalls > 1 {
		return usageErrorf("--tool-calls: want a share in 0..1, got %g", c.toolCalls)
	}
	cfg.ToolCalls = c.toolCalls
	if cfg.ToolCalls == 0 {
		cfg.ToolCalls = -1 // never; the config's 0 is the default
	}
	if c.lengths != "" {
		if err := simUseLengths(&cfg, fs, c.lengths); err != nil {
			return usageErrorf("--lengths: %v", err)
		}
	}
	addrs, err := simAddrs(c.ports, c.listen, c.count)
	if err != nil {
		return &exitError{code: exitUsage, err: err}
	}
	cfg.Addrs = addrs
	if c.tokenizer != "" {
		tok, err := tokenize.Load(c.tokenizer)
		if err != nil {
			return fmt.Errorf("--tokenizer: %w", err)
		}
		cfg.Tokenizer = tok
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	fleet, err := sim.Start(ctx, cfg)
	if err != nil {
		return err
	}
	defer fleet.Close()
	served := fleet.Config()
	for _, s := range fleet.Servers() {
		fmt.Fprintf(std.Out, "sim: server %d ready at %s\n", s.Index(), s.URL())
	}
	keyNote := ""
	if served.APIKey != "" {
		keyNote = ", API key required"
	}
	fmt.Fprintf(std.Err, "sim: %d servers, model %s, max running %d, speed %g%s%s; Ctrl-C stops\n",
		len(fleet.Servers()), served.Model, served.MaxRunning, served.Speed, warmNote(served.WarmUp), keyNote)
	select {
	case <-std.Signals:
	case <-ctx.Done():
	}
	fmt.Fprintln(std.Err, "sim: stopping")
	return nil
}

// simUseLengths applies a length preset to the length flags not given on
// the command line.
func simUseLengths(cfg *sim.Config, fs *flag.FlagSet, preset string) error {
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	for name, p := range map[string]*int{
		"think-mean": &cfg.ThinkTokensMean, "think-max": &cfg.ThinkTokensMax,
		"answer-mean": &cfg.AnswerTokensMean, "answer-max": &cfg.AnswerTokensMax,
	} {
		if !given[name] {
			*p = 0
		}
	}
	if !given["length-sigma"] {
		cfg.LengthSigma = 0
	}
	return cfg.UseLengths(preset)
}

func warmNote(d time.Duration) string {
	if d == 0 {
		return ""
	}
	return fmt.Sprintf(", warm-up %v", d)
}

// simPortAddrs is --ports (FROM-TO or a comma list) as local addresses.
func simPortAddrs(ports string) ([]string, error) {
	var out []string
	for _, part := range strings.Split(ports, ",") {
		from, to, isRange := strings.Cut(strings.TrimSpace(part), "-")
		a, err := strconv.Atoi(from)
		b := a
		if err == nil && isRange {
			b, err = strconv.Atoi(to)
		}
		if err != nil || a < 1 || b > 65535 || b < a || b-a >= 1024 {
			return nil, fmt.Errorf("--ports %q: want FROM-TO or a comma list of ports in 1..65535 (at most 1024)", ports)
		}
		for p := a; p <= b; p++ {
			out = append(out, net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		}
	}
	return out, nil
}

// simAddrs turns --ports or --listen/--count into listen addresses.
func simAddrs(ports, listen string, count int) ([]string, error) {
	if ports != "" {
		return simPortAddrs(ports)
	}
	if count < 1 || count > 1024 {
		return nil, fmt.Errorf("--count must be 1..1024, got %d", count)
	}
	host, portStr, err := net.SplitHostPort(listen)
	port, perr := strconv.Atoi(portStr)
	if err != nil || perr != nil || port < 0 || port+count-1 > 65535 {
		return nil, fmt.Errorf("--listen %q: want HOST:PORT", listen)
	}
	out := make([]string, count)
	for i := range out {
		p := port
		if port != 0 {
			p += i
		}
		out[i] = net.JoinHostPort(host, strconv.Itoa(p))
	}
	return out, nil
}
