package stages

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"net/http"
	"net/url"
	"os"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/pipe-dev/pipe/pipeline"
	"github.com/pipe-dev/pipe/pipeline/config"
	"github.com/pipe-dev/pipe/pipeline/record"
	"github.com/pipe-dev/pipe/stages/fleet"
	"github.com/pipe-dev/pipe/stages/sglang"
	"github.com/pipe-dev/pipe/stages/sglang/sim"
	"github.com/pipe-dev/pipe/stages/tokenize"
	"github.com/pipe-dev/pipe/stages/tokenize/chat"
)

func init() {
	pipeline.Register(pipeline.Spec{
		Kind:        "generate",
		Expensive:   true,
		SimSettings: func(n int) []string { return []string{fmt.Sprintf(`servers=["sim:%d"]`, n)} },
		Summary:     "get completions from a fleet of SGLang servers (chat or native /generate API)",
		Description: `Sends each record's conversation to one of the servers and adds the
completion. The completion holds the reasoning, answer, finish reason,
token counts, speculative acceptance, latency, server, attempts and the
exact request settings.

servers lists where requests go. A URL may hold user:password, sent as
Basic auth (see below). A table {url = "…", concurrency = N, api_key_env =
"VAR"} overrides the concurrency or the API key variable for its server.
A table {launch = "COMMAND … {port} …", count, port, gpus,
gpus_per_server, env, ready_timeout, restarts, …} starts servers. The run
supervises and ends them (docs/fleet.md). servers = ["sim:N"] starts N
simulated servers for the run. Options go as a query:
"sim:4?speed=60&faults=503:0.05,reset:0.01"; see pipe sim.

Before its first request every server is checked on its own: /health,
server info and a 1-token generation. Server info (model, version, context
length) is read once. The run starts as soon as one server is ready; a slow
first answer from another delays nobody. The stage keeps probing the
others. A server not ready a minute after the start, while others work, is
warned about (state never_ready). With none ready for ready_timeout the run
stops with every server's reason. Servers that serve different models are
an error.

Each server gets at most its concurrency in flight. With concurrency =
"auto" a server's limit never passes its max_running_requests. A record
goes to the server with the lowest load that has a free slot. So a slow
server gets fewer records and never holds up the others.

Transport errors, timeouts and HTTP 408/429/5xx are retried, up to
max_attempts. A retry has jittered exponential backoff and a fresh rid, and
goes preferably to another server. After max_attempts the record is failed
and written to RUN_DIR/failed/STAGE.jsonl. A server with breaker_failures
consecutive failures is ejected: its requests in flight are re-sent
elsewhere. It is re-admitted after a successful probe. A 400 is never
retried: the record goes to the "rejected" port with the server's message.
Other 4xx answers (401, 403, 404, 409 …) say the server is at fault. It is
ejected at once, with the reason in run.log. The request is re-sent
elsewhere as a counted attempt. A slow server is never ejected for being
slow; repeated timeouts count as consecutive failures.

A request in flight far beyond the fleet's latencies has stalled: beyond
stall_timeout, and beyond 4× the p99 of the recent completions. It is sent
again to another server as a counted attempt with a fresh rid. The first
answer wins and the other is cancelled. The stalled request's server is
suspect until a probe answers: it gets no new requests, and a warning. A
failed probe ejects it. While no server is ready, run.log names every
server's state and reason every 5 s. So does the stage's "waiting for
servers" figure. Health and info requests give up after 10 s.

Requests go through Go's standard HTTP client. https:// servers are checked
against the system's roots; SSL_CERT_FILE adds one. HTTPS_PROXY/HTTP_PROXY
and NO_PROXY are obeyed, and localhost is never proxied. HTTP/2 is used
where a gateway offers it. Connections are kept alive, one per request
slot. A request is sent again unchanged only when not a byte of it reached
the server. A connection lost after the request was sent may mean the
server is generating it. So the next try is a new attempt with a fresh
rid, counted in the record's attempts and in the figures.

api = "chat" uses /v1/chat/completions: the server renders the chat
template (chat_template_kwargs.enable_thinking, separate_reasoning).
api = "generate" uses /generate with input_ids. They are rendered by the
model's own chat template from tokenizer. The completion's prompt_ids and
output_ids are then exactly the tokens the model saw and sampled.
Over-long prompts are rejected before sending.

With tokenizer, the chat template tells whether it forces thinking. It does
when its generation prompt, rendered with thinking on, ends inside <think>:
Qwen3.5, Qwen3.6, Qwen3-Thinking-2507. The run log says at start which case
it found. A forced output starts inside the reasoning, and is split so: one
cut short is all reasoning. completion.request.thinking_forced tells
validate-thinking and the report.

Tool conversations go to the model whole: the conversation's tools, and its
earlier calls and results. On the chat API they are its tools and
tool_calls. On /generate the model's template renders them, as
apply_chat_template(messages, tools=...) does. turns = "last" answers the
last user or tool message. turns = "all" keeps a given turn's tool results
only when the regenerated turn makes the same calls. Otherwise the
conversation ends there. meta.conversation_ended says why, and the summary
counts conversations_ended by reason. The model's own calls: on /generate
they stay in the answer as the model wrote them (Qwen3's <tool_call>
blocks). On the chat API, with a server started with --tool-call-parser,
the server's parsed calls are completion.tool_calls, their ids kept. The
answer is then the text outside them.

API keys and extra headers come from the environment, never from the
pipeline file. api_key_env = "NAME" sends "Authorization: Bearer $NAME"
with every request to every server (SGLang's --api-key). A server table's
api_key_env overrides it for that server; "" sends none.
headers_env = {"X-Name" = "VAR"} sends more headers the same way. A
variable that is unset or empty fails the run at start, as pipe check
cannot know the environment. A user:password in a server URL is sent as
Basic auth. It cannot be combined with an API key on the same server. A
server is named everywhere by its URL without user:password: records'
completion.server, figures, run.log, status, errors, --dry-run. Keys and
header values are never written anywhere. A server that refuses the
credentials (401 or 403) at start is left out with a warning, and probed,
while the others work. When every server refuses, the run fails at once
(exit 2). "sim:N?api_key_env=NAME" makes the simulated servers require the
key in $NAME.`,
		Outputs: []string{"out", pipeline.RejectedPort},
		Needs:   []string{record.FieldMessages},
		Fields: pipeline.FieldsFor(func(c *generateConfig) (needs, produces []string) {
			produces = []string{record.FieldCompletion}
			if c.API == string(sglang.APIGenerate) {
				produces = append(produces, record.FieldOutputIDs)
			}
			return []string{record.FieldMessages}, produces
		}),
		KeySettings: pipeline.SettingsFor(func(cfg *generateConfig) string {
			n := 0
			for _, s := range cfg.Servers.Items {
				n += s.count()
			}
			return fmt.Sprintf("%d servers × %s, %s, max %d tokens", n, cfg.Concurrency, cfg.API, cfg.MaxOutputTokens)
		}),
		Example: `[[stage]]
id   = "prompts"
kind = "read-prompts"
path = "prompts.jsonl"

[[stage]]
id                = "gen"
kind              = "generate"
input             = "prompts"
servers           = ["http://localhost:30000", "http://localhost:30001"]
concurrency       = 48
max_output_tokens = 4096
enable_thinking   = true

[[stage]]
id    = "out"
kind  = "write-jsonl"
input = "gen"
path  = "out/completions.jsonl"
`,
		New: pipeline.NewProcessor(func(c *generateConfig) (pipeline.Processor, error) { return &generate{cfg: *c}, nil }),
	})
}

type generateConfig struct {
	// Servers are base URLs, tables {url, concurrency, api_key_env}, or
	// "sim:N". Required.
	Servers serverList `toml:"servers" op:"true" required:"true" doc:"Where requests go: base URLs (\"http://host:30000\"), {url, concurrency, api_key_env} tables, \"sim:N\" for N simulated servers, or {launch = …} tables for servers the run starts (docs/fleet.md). The description above tells each."`
	// APIKeyEnv names the environment variable holding the API key.
	APIKeyEnv string `toml:"api_key_env" op:"true" doc:"Environment variable holding the servers' API key (SGLang's --api-key). The key is sent as \"Authorization: Bearer KEY\" with every request. A variable unset or empty fails the run at start. A server table's api_key_env overrides it. Without it no key is sent."`
	// HeadersEnv maps header names to the environment variables holding
	// their values.
	HeadersEnv map[string]string `toml:"headers_env" op:"true" doc:"Extra headers sent with every request to every server: {\"X-Header-Name\" = \"VAR\"}. Each value is read from an environment variable. A variable unset or empty fails the run at start. Not Authorization (use api_key_env), nor the headers the client sets itself."`
	// Concurrency is the requests in flight per server, or "auto".
	Concurrency concurrencySetting `toml:"concurrency" op:"true" default:"48" doc:"Requests in flight per server, 1..4096, or \"auto\". With \"auto\" each server's limit follows what it can run, up to max_concurrency. It starts at the capacity the server reports in /server_info, else 16. It rises while the queue stays empty. It falls when the server queues or answers 503."`
	// MaxConcurrency is the ceiling of concurrency = "auto".
	MaxConcurrency int `toml:"max_concurrency" op:"true" default:"256" min:"1" max:"4096" doc:"With concurrency = \"auto\": the most requests in flight per server."`
	// API is "chat" or "generate".
	API string `toml:"api" default:"chat" enum:"chat|generate" doc:"\"chat\": /v1/chat/completions, where the server renders the template. \"generate\": native /generate with input_ids rendered from tokenizer."`
	// Model is the model name sent on the chat API.
	Model string `toml:"model" doc:"Model name sent on the chat API. Unset: the model the servers report."`
	// Tokenizer is the model directory (tokenizer.json and chat template);
	// required with api = "generate".
	Tokenizer string `toml:"tokenizer" path:"indir" contains:"tokenizer.json" doc:"Model directory with tokenizer.json and the chat template. Required with api = \"generate\". With api = \"chat\" it lets prompts too long for the context be rejected before sending."`
	// Template is the chat template: "" the model's own, "chatml".
	Template string `toml:"template" enum:"|chatml" doc:"With tokenizer: \"\" renders the model's own chat template, \"chatml\" generic ChatML."`
	// MaxOutputTokens bounds thinking + answer. Required.
	MaxOutputTokens int `toml:"max_output_tokens" required:"true" min:"1" doc:"Bound on thinking + answer tokens. Required, because the server's default (128) silently truncates."`
	// MaxLength is the trainer's tokens per row ([trainer] max_length).
	MaxLength int `toml:"max_length" default:"0" min:"0" trainer:"max_length" doc:"The trainer's tokens per row, read from [trainer] max_length. A request asks for at most what its row can still train: max_length minus the prompt's tokens, never above max_output_tokens. A prompt that leaves no room is rejected before any GPU time (prompt_too_long). 0: no cap."`
	// Sampling: nil (not set) is resolved at Open from the model's
	// generation_config.json (generate_sampling.go) and sent.
	Temperature *float64 `toml:"temperature" min:"0" doc:"Sampling temperature. Unset: the model's generation_config.json in tokenizer, else the server's neutral default. It is sent with every request; see run.json sampling."`
	TopP        *float64 `toml:"top_p" min:"0" max:"1" doc:"Nucleus sampling. Unset: the model's generation_config.json in tokenizer, else the server's neutral default. It is sent with every request; see run.json sampling."`
	TopK        *int     `toml:"top_k" min:"-1" doc:"Top-k sampling; -1 is off. Unset: the model's generation_config.json in tokenizer, else the server's neutral default. It is sent with every request; see run.json sampling."`
	MinP        *float64 `toml:"min_p" min:"0" max:"1" doc:"Min-p sampling. Unset: the model's generation_config.json in tokenizer, else the server's neutral default. It is sent with every request; see run.json sampling."`
	Seed        *int     `toml:"seed" doc:"Sampling seed, sent as seed on the chat API and sampling_seed on /generate. A record with meta.sample K (read-prompts' samples) is sent seed + K - 1. Unset: no seed."`
	// PerPrompt names the sampling settings a record's meta may set.
	PerPrompt         []string `toml:"per_prompt" op:"false" enum:"temperature|top_p|top_k|seed" doc:"Sampling settings taken from each record's meta where it has them: meta.temperature, meta.top_p, meta.top_k, meta.seed. They are recorded with its completion. A value of the wrong type rejects the record as bad_sampling."`
	Stop              []string `toml:"stop" doc:"Stop strings. Unset: none."`
	StopTokenIDs      []int    `toml:"stop_token_ids" doc:"Stop token ids. The model's EOS always stops."`
	RepetitionPenalty *float64 `toml:"repetition_penalty" min:"0" doc:"Repetition penalty. Unset: the model's generation_config.json in tokenizer, else the server's neutral default. It is sent with every request; see run.json sampling."`
	PresencePenalty   *float64 `toml:"presence_penalty" min:"-2" max:"2" doc:"Presence penalty. Unset: the model's generation_config.json in tokenizer, else the server's neutral default. It is sent with every request; see run.json sampling."`
	FrequencyPenalty  *float64 `toml:"frequency_penalty" min:"-2" max:"2" doc:"Frequency penalty. Unset: the model's generation_config.json in tokenizer, else the server's neutral default. It is sent with every request; see run.json sampling."`
	// EnableThinking turns the model's thinking on.
	EnableThinking bool `toml:"enable_thinking" default:"true" doc:"Let the model think before answering."`
	// SystemPrompt is prepended to conversations without a system message.
	SystemPrompt string `toml:"system_prompt" doc:"System message for conversations that have none. It is recorded with each completion."`
	Turns        string `toml:"turns" default:"last" enum:"last|all" doc:"\"last\": reply to the conversation's last user or tool message, the history (tool calls and results included) as given. \"all\": regenerate every assistant turn in order, on one server. A turn's tool results stay only if the regenerated turn makes the same calls; else the conversation ends there."`

	MaxAttempts     int             `toml:"max_attempts" op:"true" default:"5" min:"1" max:"100" doc:"Requests per generation before the record is failed."`
	RequestTimeout  config.Duration `toml:"request_timeout" op:"true" default:"30m" doc:"Bound on one request. Long thinking outputs need long ones."`
	StallTimeout    config.Duration `toml:"stall_timeout" op:"true" default:"5m" doc:"A request in flight longer than this, and than 4× the fleet's p99 latency, has stalled. It is sent again to another server as a counted attempt; the first answer wins, the other is cancelled. Its server gets no new requests until a probe answers."`
	ReadyTimeout    config.Duration `toml:"ready_timeout" op:"true" default:"10m" doc:"How long to wait while no server is ready, at start or mid-run, before failing the run."`
	ProbeInterval   config.Duration `toml:"probe_interval" op:"true" default:"5s" doc:"How often a server that is down is probed for re-admission. A launched server is probed as soon as its launcher sees it answer."`
	BackoffMin      config.Duration `toml:"backoff_min" op:"true" default:"100ms" doc:"First retry wait. It doubles per attempt, with jitter."`
	BackoffMax      config.Duration `toml:"backoff_max" op:"true" default:"10s" doc:"Longest retry wait."`
	BreakerFailures int             `toml:"breaker_failures" op:"true" default:"5" min:"1" doc:"Consecutive failures that eject a server until a probe succeeds."`
}

func (c *generateConfig) Validate() []error {
	var errs []error
	if c.API == string(sglang.APIGenerate) && c.Tokenizer == "" {
		errs = append(errs, &config.FieldError{Key: "api", Msg: `"generate" needs tokenizer = "MODEL_DIR" to render input_ids (or use api = "chat")`})
	}
	errs = append(errs, checkTokenizer("tokenizer", c.Tokenizer)...)
	for _, d := range []struct {
		key string
		v   config.Duration
	}{{"request_timeout", c.RequestTimeout}, {"stall_timeout", c.StallTimeout}, {"ready_timeout", c.ReadyTimeout}, {"probe_interval", c.ProbeInterval},
		{"backoff_min", c.BackoffMin}, {"backoff_max", c.BackoffMax}} {
		if d.v.Duration <= 0 {
			errs = append(errs, &config.FieldError{Key: d.key, Msg: fmt.Sprintf("must be positive, got %v", d.v.Duration)})
		}
	}
	if c.BackoffMax.Duration < c.BackoffMin.Duration {
		errs = append(errs, &config.FieldError{Key: "backoff_max", Msg: fmt.Sprintf("must be at least backoff_min (%v), got %v", c.BackoffMin.Duration, c.BackoffMax.Duration)})
	}
	if c.APIKeyEnv != "" && !envNameRe.MatchString(c.APIKeyEnv) {
		errs = append(errs, &config.FieldError{Key: "api_key_env", Msg: "must be an environment variable name (letters, digits and _): give the variable's name, not the key"})
	}
	errs = append(errs, c.checkHeadersEnv()...)
	for i, s := range c.Servers.Items {
		if s.userinfo && c.keyEnv(s) != "" {
			errs = append(errs, &config.FieldError{Key: "servers", Msg: fmt.Sprintf(
				"item %d: %s has user:password (sent as Basic auth) and an API key (api_key_env, sent as Bearer); only one Authorization header can be sent: drop one (api_key_env = \"\" in the server's table sends no key to it)", i+1, s.URL)})
		}
	}
	return errs
}

// checkHeadersEnv checks headers_env: each name an HTTP header the client
// does not set itself (Authorization has keys of its own), each value an
// environment variable's name.
func (c *generateConfig) checkHeadersEnv() []error {
	var errs []error
	for _, name := range slices.Sorted(maps.Keys(c.HeadersEnv)) {
		env := c.HeadersEnv[name]
		switch {
		case !sglang.ValidHeaderName(name):
			errs = append(errs, &config.FieldError{Key: "headers_env", Msg: fmt.Sprintf("%q is not an HTTP header name", name)})
		case strings.EqualFold(name, "Authorization"):
			errs = append(errs, &config.FieldError{Key: "headers_env", Msg: `Authorization: use api_key_env = "VAR" (sent as Bearer) or user:password in the URL (Basic)`})
		case sglang.ReservedHeader(name):
			errs = append(errs, &config.FieldError{Key: "headers_env", Msg: fmt.Sprintf("%s is set by the client itself", name)})
		case !envNameRe.MatchString(env):
			errs = append(errs, &config.FieldError{Key: "headers_env", Msg: fmt.Sprintf("%s: the value must be an environment variable name (letters, digits and _): give the variable's name, not the header's value", name)})
		}
	}
	return errs
}

// envNameRe is an environment variable name.
var envNameRe = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// keyEnv is the variable holding s's API key: its table's, else the
// stage's; "" for none.
func (c *generateConfig) keyEnv(s serverEntry) string {
	if s.APIKeyEnv != nil {
		return *s.APIKeyEnv
	}
	return c.APIKeyEnv
}

// serverList is the servers key: strings or tables, decoded by hand because
// TOML arrays may mix them.
type serverList struct{ Items []serverEntry }

type serverEntry struct {
	// URL is the server's name everywhere: the base URL without
	// user:password ("http://host:30000"), or "sim:N…" as given.
	URL         string
	Concurrency int // 0: the stage's concurrency
	Sim         int // > 0: "sim:N", N simulated servers
	SimQuery    url.Values
	// APIKeyEnv is the table's api_key_env; nil: the stage's.
	APIKeyEnv *string
	// Launch, for a table with launch = "COMMAND": servers pipe starts.
	Launch *launchEntry

	dial     string // the URL as given, with any user:password: what the client is handed
	userinfo bool   // dial has user:password
}

// DecodeConfig reads the servers key. Every bad item is reported (the
// error joins one error per item), not only the first.
func (l *serverList) DecodeConfig(raw any) error {
	var items []any
	switch x := raw.(type) {
	case string:
		items = []any{x}
	case []any:
		items = x
	case []map[string]any:
		for _, m := range x {
			items = append(items, m)
		}
	default:
		return fmt.Errorf(`must be an array of server URLs, e.g. ["http://localhost:30000"]`)
	}
	if len(items) == 0 {
		return fmt.Errorf("must name at least one server")
	}
	// Items keeps one entry per item, bad ones too, so that Validate's item
	// numbers are the user's; a list with errors is never run.
	l.Items = nil
	var errs []error
	seen := map[string]int{} // URL -> item number
	for i, it := range items {
		e, err := decodeServer(it)
		l.Items = append(l.Items, e)
		switch first, dup := seen[e.URL]; {
		case err != nil:
			errs = append(errs, fmt.Errorf("item %d: %v", i+1, err))
		case e.Sim > 0:
		case dup:
			errs = append(errs, fmt.Errorf("item %d: %s is listed twice (also item %d)", i+1, e.URL, first))
		default:
			seen[e.URL] = i + 1
		}
	}
	return errors.Join(errs...)
}

// decodeServer reads one item of the servers key: a URL or a table.
func decodeServer(it any) (serverEntry, error) {
	var e serverEntry
	switch x := it.(type) {
	case string:
		e.URL = x
	case map[string]any:
		if err := e.fromTable(x); err != nil {
			return e, err
		}
	default:
		return e, fmt.Errorf("must be a URL string or a table {url, concurrency, api_key_env}")
	}
	return e, e.parse()
}

// fromTable reads a server table {url, concurrency, api_key_env}.
func (e *serverEntry) fromTable(x map[string]any) error {
	_, launch := x["launch"]
	if err := checkServerTableKeys(x, launch); err != nil {
		return err
	}
	if launch {
		if err := e.fromLaunchTable(x); err != nil {
			return err
		}
	} else if u, ok := x["url"].(string); ok {
		e.URL = u
	} else {
		return fmt.Errorf("a server table needs url = \"http://…\"")
	}
	if err := e.concurrencyFrom(x); err != nil {
		return err
	}
	return e.apiKeyEnvFrom(x)
}

// checkServerTableKeys checks that a server table has only the keys of
// its kind: a server that runs (url) or servers pipe starts (launch).
func checkServerTableKeys(x map[string]any, launch bool) error {
	for _, k := range slices.Sorted(maps.Keys(x)) {
		switch {
		case k == "concurrency" || k == "api_key_env":
		case k == "url" && !launch:
		case launch && slices.Contains(launchKeys, k):
		case launch && k == "url":
			return fmt.Errorf("a server table has url (a server that runs) or launch (servers pipe starts), not both")
		case launch:
			return fmt.Errorf("unknown key %q (a launch table has %s, concurrency and api_key_env)", k, strings.Join(launchKeys, ", "))
		default:
			return fmt.Errorf("unknown key %q (a server table has url, concurrency and api_key_env; or launch = \"COMMAND\" to start servers)", k)
		}
	}
	return nil
}

// concurrencyFrom reads a server table's concurrency, if it has one.
func (e *serverEntry) concurrencyFrom(x map[string]any) error {
	c, ok := x["concurrency"]
	if !ok {
		return nil
	}
	n, ok := c.(int64)
	if !ok || n < 1 || n > 4096 {
		return fmt.Errorf("concurrency must be 1..4096, got %v", c)
	}
	e.Concurrency = int(n)
	return nil
}

// apiKeyEnvFrom reads a server table's api_key_env, if it has one: a
// variable's name, or "" for no key.
func (e *serverEntry) apiKeyEnvFrom(x map[string]any) error {
	v, ok := x["api_key_env"]
	if !ok {
		return nil
	}
	name, ok := v.(string)
	if !ok || (name != "" && !envNameRe.MatchString(name)) {
		return fmt.Errorf("api_key_env must be an environment variable name (or \"\" for no key), got %s", describeEnvName(v))
	}
	e.APIKeyEnv = &name
	return nil
}

func (e *serverEntry) parse() error {
	if e.Launch != nil {
		return nil
	}
	if n, q, ok, err := sim.ParseURL(e.URL); ok {
		if err != nil {
			return err
		}
		e.Sim, e.SimQuery = n, q
		return nil
	}
	// Messages name the URL without user:password, even one that does not
	// parse; url.Parse's own errors repeat the URL, so they are not shown.
	shown := sglang.Redact(e.URL)
	u, err := url.Parse(e.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf(`%q is not a server URL: want "http://HOST:PORT" (or "sim:N")`, shown)
	}
	if err := checkBaseURL(u, shown); err != nil {
		return err
	}
	e.dial = strings.TrimRight(e.URL, "/")
	e.userinfo = u.User != nil
	e.URL = u.Scheme + "://" + u.Host
	return nil
}

// checkBaseURL checks that u, shown as shown, is a base URL: a port in
// range, no path, query or fragment.
func checkBaseURL(u *url.URL, shown string) error {
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return fmt.Errorf(`%q: port %s is out of range: want 1..65535`, shown, p)
		}
	}
	if u.Path != "" && u.Path != "/" {
		return fmt.Errorf(`%q: give the base URL without a path (e.g. "%s://%s")`, shown, u.Scheme, u.Host)
	}
	if u.RawQuery != "" || u.Fragment != "" || u.ForceQuery {
		return fmt.Errorf(`%q: give the base URL without a query or fragment (e.g. "%s://%s")`, shown, u.Scheme, u.Host)
	}
	return nil
}

// describeEnvName shows a bad api_key_env value in a message: a string that
// is no variable name may be the key itself, so it is not repeated.
func describeEnvName(v any) string {
	if _, ok := v.(string); ok {
		return "a string that is not one (give the variable's name, not the key)"
	}
	return fmt.Sprintf("%T", v)
}

type generate struct {
	cfg    generateConfig
	id     string
	log    io.Writer
	notice io.Writer // the terminal and the log: what the user must see now
	client *sglang.Client
	env    *pipeline.Env // Open's, for what start records for other stages
	// specs are the servers; lazy defers start to the first Process (a
	// resume); startMu guards started and startErr.
	specs    []sglang.ServerSpec
	lazy     bool
	startMu  sync.Mutex
	started  bool
	startErr error
	tok      *tokenize.Tokenizer
	tmpl     *chat.Template
	// forced: the template's generation prompt opens the reasoning, so
	// outputs start inside it (chat.Template.ThinkingForced).
	forced bool
	ctxLen int
	// entryOf is, per server spec given to the client, its servers item.
	entryOf []int
	// answers counts completions sent on, tinyAnswers those whose answer
	// is almost nothing (see tinyAnswer): for the early warning.
	answers, tinyAnswers atomic.Int64
	// ended counts conversations ended early, by endedReasons' index.
	ended [len(endedReasons)]atomic.Int64
	// lengths follows the completions' output tokens (pipe plan).
	lengths lengths
	// early watches the first completions for mistakes that make them
	// all useless (generate_early.go).
	early earlyWatch
	// fleets are the servers this stage launched (launch tables);
	// quality watches their completions (generate_quality.go).
	fleets  []*fleet.Fleet
	quality qualityWatch
}

var (
	_ pipeline.Processor = (*generate)(nil)
	_ pipeline.Parallel  = (*generate)(nil)
	_ pipeline.Opener    = (*generate)(nil)
	_ pipeline.Closer    = (*generate)(nil)
	_ pipeline.Reporter  = (*generate)(nil)
)

// Workers is the fleet's total capacity: one worker per request slot, so
// every server can be at its cap while records remain.
func (g *generate) Workers() int {
	n := 0
	for _, s := range g.cfg.Servers.Items {
		limit, ceiling := g.perServer(s.Concurrency)
		n += max(limit, ceiling) * s.count()
	}
	return n
}

// Open loads the tokenizer (if any), resolves the servers (starting
// simulated ones) and waits until at least one server is ready.
func (g *generate) Open(ctx context.Context, env *pipeline.Env) error {
	g.id, g.log, g.notice, g.env = env.StageID, env.Log, env.Notice, env
	if g.log == nil {
		g.log = io.Discard
	}
	if g.notice == nil {
		g.notice = g.log
	}
	var err error
	if g.cfg.Tokenizer != "" {
		if g.tok, err = sharedTokenizer(env, g.cfg.Tokenizer); err != nil {
			return err
		}
		if g.tmpl, err = g.tok.Chat(g.cfg.Template); err != nil {
			return err
		}
	}
	if err := g.detectForcedThinking(); err != nil {
		return err
	}
	g.sayOutputBound()
	if err := g.fillSampling(); err != nil {
		return err
	}
	specs, err := g.resolveServers(ctx, env)
	if err != nil {
		return err
	}
	c := g.cfg
	think := c.EnableThinking
	g.client = sglang.New(specs, sglang.Options{
		API:   sglang.API(c.API),
		Model: c.Model,
		Sampling: sglang.Sampling{
			MaxOutputTokens: c.MaxOutputTokens, Temperature: c.Temperature, TopP: c.TopP, TopK: c.TopK, MinP: c.MinP,
			Seed: c.Seed, Stop: c.Stop, StopTokenIDs: c.StopTokenIDs, RepetitionPenalty: c.RepetitionPenalty,
			PresencePenalty: c.PresencePenalty, FrequencyPenalty: c.FrequencyPenalty, EnableThinking: &think,
		},
		Thinking:        think,
		ThinkingForced:  g.forced,
		MaxAttempts:     c.MaxAttempts,
		RequestTimeout:  c.RequestTimeout.Duration,
		StallTimeout:    c.StallTimeout.Duration,
		BackoffMin:      c.BackoffMin.Duration,
		BackoffMax:      c.BackoffMax.Duration,
		BreakerFailures: c.BreakerFailures,
		ProbeInterval:   c.ProbeInterval.Duration,
		ReadyTimeout:    g.readyTimeout(),
		Logf:            g.logf,
		// While no server is ready: every 5 s each server's state and
		// reason, in the run log (and in Report's "waiting for servers").
		Notify: g.noticef,
		// Warnings while servers work: on the terminal and in the log.
		Warn: g.warnf,
		// A stop sends nothing more: what waits for a slot goes back
		// unfinished (the next run does it).
		Stop: env.Stopping,
	})
	// A proxy from the environment is obeyed (a gateway may need one) but
	// said: on a cluster HTTP_PROXY is often set for the internet, and a
	// proxy's own timeouts would cut long generations short.
	proxies := g.client.Proxies()
	for _, server := range slices.Sorted(maps.Keys(proxies)) {
		g.noticef("server %s is reached through the proxy %s (from HTTPS_PROXY/HTTP_PROXY; add the host to NO_PROXY to go direct)", server, proxies[server])
	}
	g.specs = specs
	if env.Done != nil && env.Done.Len() > 0 {
		// A resume may have nothing left to generate (every prompt done,
		// or taken from the journal): the servers are waited for at the
		// first prompt that needs them, so a run that only completes its
		// outputs (rows written again, uploads) needs no server up.
		g.lazy = true
		fmt.Fprintf(g.log, "stage %q: resuming; the servers are waited for at the first prompt to generate\n", g.id)
		return nil
	}
	return g.start(ctx)
}

// start waits until a server is ready (sglang.Client.Start); once, at Open
// or, on a resume, at the first Process. The error of a failed start is
// every later caller's too.
func (g *generate) start(ctx context.Context) error {
	g.startMu.Lock()
	defer g.startMu.Unlock()
	if g.started || g.startErr != nil {
		return g.startErr
	}
	if err := g.launchFleets(ctx); err != nil {
		g.startErr = err
		return err
	}
	ctx, stopWatch := g.watchGivenUp(ctx)
	defer stopWatch()
	if err := g.client.Start(ctx); err != nil {
		if cause := context.Cause(ctx); errors.Is(cause, errAllGivenUp) {
			err = cause
		}
		var ae *sglang.AuthError
		if errors.As(err, &ae) {
			err = fmt.Errorf("%w; %s", err, g.authHint(g.specs, ae))
		}
		if !g.lazy {
			g.client.Close()
			g.client = nil
		}
		g.startErr = err
		return err
	}
	g.started = true
	g.ctxLen = g.client.ContextLength()
	recordServedModel(g.env, g.id, g.client.Model())
	fmt.Fprintf(g.log, "stage %q: %d servers, model %q, context length %d, %d requests in flight at most\n",
		g.id, len(g.specs), g.client.Model(), g.ctxLen, g.client.Capacity())
	return nil
}

// logf writes a line of the stage's to the run log.
func (g *generate) logf(format string, args ...any) {
	fmt.Fprintf(g.log, "stage %q: "+format+"\n", append([]any{g.id}, args...)...)
}

// warnf is a warning of the fleet's (a server left out, never ready or
// stalled): the run's warner when there is one (terminal, log, status.json,
// notifications), else on the terminal and in the log, prefixed
// "warning:".
func (g *generate) warnf(kind, text string) {
	if g.env != nil && g.env.Warn != nil {
		g.env.Warn(kind, text)
		return
	}
	g.noticef("warning: %s", text)
}

// noticef is for what the user must see now (no server ready, and why): on
// the terminal too.
func (g *generate) noticef(format string, args ...any) {
	fmt.Fprintf(g.notice, "stage %q: "+format+"\n", append([]any{g.id}, args...)...)
}

// resolveServers expands "sim:N" into the URLs of a simulated fleet shared
// by the run (env.Resources closes it at the end), and reads each server's
// headers from the environment. With a tokenizer the fleet counts and
// samples real token ids with it, as a real server would.
func (g *generate) resolveServers(ctx context.Context, env *pipeline.Env) ([]sglang.ServerSpec, error) {
	var specs []sglang.ServerSpec
	g.entryOf = nil
	for i, s := range g.cfg.Servers.Items {
		conc, ceiling := g.perServer(s.Concurrency)
		header, err := g.serverHeader(s)
		if err != nil {
			return nil, err
		}
		if s.Launch != nil {
			for _, u := range s.Launch.urls() {
				specs = append(specs, sglang.ServerSpec{URL: u, Concurrency: conc, MaxConcurrency: ceiling, Header: header})
				g.entryOf = append(g.entryOf, i)
			}
			continue
		}
		if s.Sim == 0 {
			specs = append(specs, sglang.ServerSpec{URL: s.dial, Concurrency: conc, MaxConcurrency: ceiling, Header: header})
			g.entryOf = append(g.entryOf, i)
			continue
		}
		key := "sglang-sim:" + strings.TrimPrefix(s.URL, "sim:")
		if g.tok != nil {
			key += " tokenizer=" + g.cfg.Tokenizer
		}
		v, err := env.Resources.Get(key, func() (any, func() error, error) {
			cfg, err := sim.ConfigFromQuery(s.Sim, s.SimQuery, func(name string) (string, error) { return envValue(os.LookupEnv, name) })
			if err != nil {
				return nil, nil, err
			}
			if g.tok != nil {
				cfg.Tokenizer = g.tok
			}
			// The fleet lives for the run, not for Open's context.
			f, err := sim.Start(context.WithoutCancel(ctx), cfg)
			if err != nil {
				return nil, nil, err
			}
			return f, f.Close, nil
		})
		if err != nil {
			return nil, fmt.Errorf("starting %s: %w", s.URL, err)
		}
		for _, u := range v.(*sim.Fleet).URLs() {
			specs = append(specs, sglang.ServerSpec{URL: u, Concurrency: conc, MaxConcurrency: ceiling, Header: header})
			g.entryOf = append(g.entryOf, i)
		}
	}
	return specs, nil
}

// serverHeader is what every request to s carries besides the client's own
// headers: headers_env's headers and, with an API key variable, the key as
// a Bearer token. Errors name variables, never their values.
func (g *generate) serverHeader(s serverEntry) (http.Header, error) {
	h := http.Header{}
	for _, name := range slices.Sorted(maps.Keys(g.cfg.HeadersEnv)) {
		v, err := envValue(os.LookupEnv, g.cfg.HeadersEnv[name])
		if err != nil {
			return nil, fmt.Errorf("headers_env %s: %v", name, err)
		}
		h.Set(name, v)
	}
	if name := g.cfg.keyEnv(s); name != "" {
		key, err := envValue(os.LookupEnv, name)
		if err != nil {
			return nil, fmt.Errorf("api_key_env: %v", err)
		}
		h.Set("Authorization", "Bearer "+key)
	}
	return h, nil
}

// envValue reads the header value in environment variable name. Surrounding
// spaces and newlines (a key file read with $(cat …)) are dropped, as HTTP
// would drop them; unset, empty or holding a control character is an error
// that names the variable and never shows its value.
func envValue(lookup func(string) (string, bool), name string) (string, error) {
	v, ok := lookup(name)
	if !ok {
		return "", fmt.Errorf("environment variable %s is not set", name)
	}
	v = strings.Trim(v, " \t\r\n")
	if v == "" {
		return "", fmt.Errorf("environment variable %s is empty", name)
	}
	if !sglang.ValidHeaderValue(v) {
		return "", fmt.Errorf("environment variable %s holds a control character (a newline?), which cannot be sent in a header", name)
	}
	return v, nil
}

// authHint says how to mend refused credentials: which api_key_env the
// refused servers used, or that none was set.
func (g *generate) authHint(specs []sglang.ServerSpec, ae *sglang.AuthError) string {
	refused := map[string]bool{}
	for _, s := range ae.Servers {
		refused[s.URL] = true
	}
	noKey := false
	var vars []string
	for i, sp := range specs {
		if !refused[sglang.Redact(strings.TrimRight(sp.URL, "/"))] {
			continue
		}
		e := g.cfg.Servers.Items[g.entryOf[i]]
		if name := g.cfg.keyEnv(e); name != "" {
			if !slices.Contains(vars, name) {
				vars = append(vars, name)
			}
		} else if !e.userinfo {
			noKey = true
		}
	}
	switch {
	case noKey:
		return `to send an API key, set api_key_env = "VAR" to the environment variable that holds it (SGLang's --api-key)`
	case len(vars) > 0:
		return "check the API key in $" + strings.Join(vars, ", $")
	}
	return "check the user:password in the server URL"
}

func (g *generate) Close() error {
	if g.client != nil {
		g.client.Close()
	}
	return nil
}

// Process generates the record's completion (and, with turns = "all", every
// earlier assistant turn first), all on one server.
func (g *generate) Process(ctx context.Context, rec *record.Record, out pipeline.Emitter) error {
	if g.lazy {
		if err := g.start(ctx); err != nil {
			return err
		}
	}
	plan, err := g.conversation(rec.Messages)
	if err != nil {
		return out.Reject(rec, "bad_prompt", err.Error())
	}
	sess := g.client.Session()
	history, comp, ended, reject, err := g.generateAll(ctx, sess, rec, plan)
	// Free the server's slot before waiting on downstream (backpressure).
	sess.Close()
	if errors.Is(err, sglang.ErrNotSent) {
		return pipeline.ErrNotStarted
	}
	if err != nil {
		var ex *sglang.ExhaustedError
		if errors.As(err, &ex) {
			return out.Fail(rec, err, ex.Attempts)
		}
		return err
	}
	if reject != nil {
		return out.Reject(rec, reject.Reason, reject.Detail)
	}
	if len(history) > 0 && history[0].Role == "system" {
		comp.SystemPrompt = history[0].Content
	}
	rec.Messages = history
	rec.Completion = comp
	if ended != "" {
		if rec.Meta == nil {
			rec.Meta = map[string]any{}
		}
		rec.Meta[record.MetaConversationEnded] = ended
		g.countEnded(ended)
	}
	g.countAnswer(comp)
	g.watchQuality(comp)
	g.watchEarly(comp)
	return out.Emit("out", rec)
}

// generateAll generates the replies plan asks for, in order, appending
// each earlier reply to the history. It returns the history sent for the
// last reply and its completion; ended says why the conversation ended at
// an earlier reply (see nextTurn), "" when it did not.
func (g *generate) generateAll(ctx context.Context, sess *sglang.Session, rec *record.Record, plan turnPlan) (history []record.Message, c *record.Completion, ended string, reject *record.Rejection, err error) {
	last := plan.replyAt[len(plan.replyAt)-1]
	next := 0
	for i, m := range plan.msgs {
		history = append(history, m)
		if next == len(plan.replyAt) || i != plan.replyAt[next] {
			continue
		}
		given := plan.given[next]
		next++
		c, reject, err = g.generateTurn(ctx, sess, rec, history)
		if err != nil || reject != nil {
			return nil, nil, "", reject, err
		}
		if i == last {
			return history, c, "", nil, nil
		}
		reply, why := nextTurn(c, given)
		if why != "" {
			return history, c, why, nil, nil
		}
		history = append(history, reply)
	}
	return nil, nil, "", nil, errors.New("generate: conversation without the message to answer (a bug)")
}

// generateTurn generates the assistant reply to history. A refusal by the
// server (or by the context-length pre-check) comes back as a Rejection.
func (g *generate) generateTurn(ctx context.Context, sess *sglang.Session, rec *record.Record, history []record.Message) (*record.Completion, *record.Rejection, error) {
	req := &sglang.Request{}
	var ids []int
	if g.tmpl != nil {
		// Our own rendering, with the conversation's tools: sent as
		// input_ids on the native API; on the chat API only counted, for
		// the context-length pre-check.
		cm := make([]chat.Message, len(history))
		for i, m := range history {
			cm[i] = chatMessage(m)
		}
		think := g.cfg.EnableThinking
		text, err := g.tmpl.Render(cm, withTools(chat.Options{AddGenerationPrompt: true, EnableThinking: &think}, rec))
		if err != nil {
			return nil, &record.Rejection{Reason: "bad_prompt", Detail: err.Error()}, nil
		}
		ids = g.tok.Encode(text)
	}
	var reject *record.Rejection
	if req.MaxOutputTokens, reject = g.outputBound(ids); reject != nil {
		return nil, reject, nil
	}
	if req.Per, reject = g.perRecord(rec); reject != nil {
		return nil, reject, nil
	}
	if g.cfg.API == string(sglang.APIGenerate) {
		req.InputIDs = ids
	} else {
		req.Tools = rec.Tools
		req.Messages = make([]sglang.Message, len(history))
		for i, m := range history {
			req.Messages[i] = sglang.Message{Role: m.Role, Content: m.Content, ReasoningContent: m.ReasoningContent,
				ToolCalls: m.ToolCalls, ToolCallID: m.ToolCallID, Name: m.Name}
		}
	}
	res, err := sess.Generate(ctx, req)
	if err != nil {
		var se *sglang.Error
		if errors.As(err, &se) && se.BadRequest() {
			return nil, &record.Rejection{Reason: se.RejectReason(), Detail: se.Message}, nil
		}
		return nil, nil, err
	}
	return &record.Completion{
		Reasoning:        res.Reasoning,
		Answer:           res.Answer,
		ToolCalls:        res.ToolCalls, // the chat API's parsed calls (on /generate they stay in Answer)
		FinishReason:     res.FinishReason,
		MatchedStop:      res.MatchedStop,
		PromptTokens:     res.PromptTokens,
		CompletionTokens: res.CompletionTokens,
		CachedTokens:     res.CachedTokens,
		ReasoningTokens:  res.ReasoningTokens,
		PromptIDs:        req.InputIDs,
		OutputIDs:        res.OutputIDs,
		SpecVerifyCt:     res.SpecVerifyCt,
		SpecAcceptLength: res.SpecAcceptLength,
		LatencySeconds:   res.Latency.Seconds(),
		Server:           res.Server,
		Attempts:         res.Attempts,
		Request:          g.withPer(g.requestRecord(req.MaxOutputTokens), req.Per),
	}, nil, nil
}

// perRecord is what rec sets of its own sampling: the per_prompt keys its
// meta has, and the seed of its sample (seed + meta.sample - 1). Nil when
// it sets nothing. A meta value of the wrong type rejects the record.
func (g *generate) perRecord(rec *record.Record) (*sglang.PerRequest, *record.Rejection) {
	var p sglang.PerRequest
	set := false
	for _, key := range g.cfg.PerPrompt {
		f, given, rej := perPromptValue(rec.Meta, key)
		if rej != nil {
			return nil, rej
		}
		if given {
			setPerRequest(&p, key, f)
			set = true
		}
	}
	if seed := g.sampleSeed(rec, p.Seed); seed != nil {
		p.Seed, set = seed, true
	}
	if !set {
		return nil, nil
	}
	out := p // only a record with settings of its own allocates them
	return &out, nil
}

// perPromptValue is meta's value of the per_prompt key, checked; given is
// false when meta has none (absent or null: the stage's setting holds).
func perPromptValue(meta map[string]any, key string) (f float64, given bool, rej *record.Rejection) {
	v, ok := meta[key]
	if raw, isRaw := v.(json.RawMessage); !ok || v == nil || isRaw && string(raw) == "null" {
		return 0, false, nil
	}
	f, isNum := metaNumber(v)
	integer := key == "top_k" || key == "seed"
	if !isNum || integer && f != math.Trunc(f) {
		want := "a number"
		if integer {
			want = "an integer"
		}
		return 0, false, &record.Rejection{Reason: "bad_sampling", Detail: fmt.Sprintf("meta.%s must be %s, got %s", key, want, metaText(v))}
	}
	if lo, hi, ok := samplingRange(key); ok && (f < lo || f > hi) {
		return 0, false, &record.Rejection{Reason: "bad_sampling", Detail: fmt.Sprintf("meta.%s must be %s (as the stage's %s), got %s", key, rangeText(lo, hi), key, metaText(v))}
	}
	return f, true, nil
}

// setPerRequest sets the per_prompt key of p to f.
func setPerRequest(p *sglang.PerRequest, key string, f float64) {
	switch key {
	case "temperature":
		p.Temperature = &f
	case "top_p":
		p.TopP = &f
	case "top_k":
		k := int(f)
		p.TopK = &k
	case "seed":
		k := int(f)
		p.Seed = &k
	}
}

// sampleSeed is the seed of rec's sample K (meta.sample, from 2):
// seed + K - 1, seed being the record's own or else the stage's. Nil for
// a first sample, or with no seed.
func (g *generate) sampleSeed(rec *record.Record, own *int) *int {
	k, ok := metaNumber(rec.Meta[MetaSample])
	if !ok || k <= 1 {
		return nil
	}
	base := cmp.Or(own, g.cfg.Seed)
	if base == nil {
		return nil
	}
	seed := *base + int(k) - 1
	return &seed
}

// withPer records what a request set of its own sampling over the
// stage's settings, under the names sent.
func (g *generate) withPer(r map[string]any, p *sglang.PerRequest) map[string]any {
	if p == nil {
		return r
	}
	if p.Temperature != nil {
		r["temperature"] = *p.Temperature
	}
	if p.TopP != nil {
		r["top_p"] = *p.TopP
	}
	if p.TopK != nil {
		r["top_k"] = *p.TopK
	}
	if p.Seed != nil {
		if g.cfg.API == string(sglang.APIGenerate) {
			r["sampling_seed"] = *p.Seed
		} else {
			r["seed"] = *p.Seed
		}
	}
	return r
}

// outputBound is the most tokens a request with prompt ids may ask for:
// max_output_tokens, or less where the trainer's row has less room left
// (max_length minus the prompt: a token decoded past it is never trained).
// It rejects a prompt with no room for a reply, or too long for the
// servers' context, before any GPU time. Without ids (the chat API with no
// tokenizer) the prompt is not counted, and the row's room is max_length.
func (g *generate) outputBound(ids []int) (int, *record.Rejection) {
	bound := g.cfg.MaxOutputTokens
	if room := g.cfg.MaxLength - len(ids); g.cfg.MaxLength > 0 && room < bound {
		if room < minReplyTokens {
			return 0, &record.Rejection{Reason: "prompt_too_long", Detail: fmt.Sprintf(
				"prompt is %d tokens; the trainer's max_length %d leaves %d for a reply", len(ids), g.cfg.MaxLength, max(room, 0))}
		}
		bound = room
	}
	if n := len(ids); n > 0 && g.ctxLen > 0 && n+bound >= g.ctxLen {
		return 0, &record.Rejection{Reason: "prompt_too_long", Detail: fmt.Sprintf(
			"prompt is %d tokens; with %d output tokens it does not fit the servers' context length %d", n, bound, g.ctxLen)}
	}
	if bound == g.cfg.MaxOutputTokens {
		return 0, nil // the settings' own bound
	}
	return bound, nil
}

// minReplyTokens is the least room a row must have for a reply: DFlash,
// the strictest trainer, drops a row without two adjacent loss tokens
// (SpecForge specforge/algorithms/dflash/providers.py).
const minReplyTokens = 2

// requestRecord is the request settings recorded with a completion (a
// copy: later stages may annotate it), with thinking_forced when the
// template forces thinking, for validation and the report.
func (g *generate) requestRecord(bound int) map[string]any {
	r := maps.Clone(g.client.Settings())
	if r == nil {
		r = map[string]any{}
	}
	if g.forced && g.cfg.EnableThinking {
		r["thinking_forced"] = true
	}
	if bound > 0 {
		// What this request asked for, under the name sent.
		key := "max_tokens"
		if g.cfg.API == string(sglang.APIGenerate) {
			key = "max_new_tokens"
		}
		r[key] = bound
		// The bound is the room the trainer's row had: a completion cut
		// there fills the row (validate-thinking keeps it), whatever the
		// server counts of the prompt.
		r[RequestRowMaxLength] = g.cfg.MaxLength
	}
	return r
}

// sayOutputBound says at start how each request's output is bounded.
func (g *generate) sayOutputBound() {
	c := g.cfg
	switch {
	case c.MaxLength == 0: // no trainer declared: max_output_tokens, as configured
	case c.MaxLength >= c.MaxOutputTokens && g.tok == nil:
		g.noticef("output: at most max_output_tokens %d tokens a request, within the trainer's max_length %d", c.MaxOutputTokens, c.MaxLength)
	case g.tok == nil:
		g.noticef("output: at most %d tokens a request, the trainer's max_length (max_output_tokens %d); without tokenizer the prompt's tokens are not counted, so a long reply can run past the row: set tokenizer to cap each request at what its row can still train", c.MaxLength, c.MaxOutputTokens)
	default:
		g.noticef("output: each request asks for what its row can still train, the trainer's max_length %d minus the prompt's tokens, at most max_output_tokens %d", c.MaxLength, c.MaxOutputTokens)
	}
}

// detectForcedThinking tells from the chat template whether it forces
// thinking, and says once which case it is: outputs are split (and later
// validated and reported) as starting inside the reasoning when it does.
func (g *generate) detectForcedThinking() error {
	if !g.cfg.EnableThinking {
		return nil
	}
	if g.tmpl == nil {
		g.noticef("thinking: no tokenizer, so pipe cannot read the chat template to tell whether it forces thinking; the server's reasoning parser splits the output (set tokenizer to know)")
		return nil
	}
	forced, gen, err := g.tmpl.ThinkingForced("<think>", "</think>")
	if err != nil {
		return fmt.Errorf("%s: rendering the generation prompt: %w", g.cfg.Tokenizer, err)
	}
	g.forced = forced
	if forced {
		g.noticef("thinking: the chat template forces thinking (its generation prompt %q ends inside a think block): outputs start inside the reasoning, and one without </think> is all reasoning", gen)
	} else {
		g.noticef("thinking: the chat template does not force thinking (generation prompt %q): the model opens its own <think>", gen)
	}
	return nil
}

// samplingRange is the range the stage's key of that name allows (its
// min and max tags): a record's own value is held to the same.
func samplingRange(key string) (lo, hi float64, ok bool) {
	t := reflect.TypeFor[generateConfig]()
	for i := range t.NumField() {
		f := t.Field(i)
		if strings.Split(f.Tag.Get("toml"), ",")[0] != key {
			continue
		}
		lo, hi = math.Inf(-1), math.Inf(1)
		if v, err := strconv.ParseFloat(f.Tag.Get("min"), 64); err == nil {
			lo, ok = v, true
		}
		if v, err := strconv.ParseFloat(f.Tag.Get("max"), 64); err == nil {
			hi, ok = v, true
		}
		return lo, hi, ok
	}
	return 0, 0, false
}

func rangeText(lo, hi float64) string {
	switch {
	case math.IsInf(hi, 1):
		return fmt.Sprintf("at least %g", lo)
	case math.IsInf(lo, -1):
		return fmt.Sprintf("at most %g", hi)
	}
	return fmt.Sprintf("%g..%g", lo, hi)
}
