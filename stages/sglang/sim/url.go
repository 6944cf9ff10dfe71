package sim

import (
	"errors"
	"fmt"
	"maps"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// The URL grammar of a simulated fleet in a pipeline file's servers:
// "sim:N" starts N servers for the run, "sim:N?speed=60&max_running=128&
// faults=503:0.05,die@1h+5m#0" sets their options (ConfigFromQuery lists
// them). The output lengths take a preset, lengths=default or
// lengths=reasoning (see lengths.go), and think_mean, think_max,
// answer_mean, answer_max and length_sigma, which override the preset.
// tool_calls=SHARE is the share of answers to prompts with tools that call
// one (default 0.5; 0: none), tool_call_parser=qwen25 parses them into
// the chat API's message.tool_calls as SGLang's --tool-call-parser does
// (default: none; see tools.go), and the fault bad-tool-call makes such a
// call malformed.

// ParseURL reads "sim:N?k=v&…": ok is false for any other string; err
// names what is wrong (N out of 1..64, a bad option or value), without
// repeating an api_key_env value (it may be a key given by mistake).
func ParseURL(s string) (n int, q url.Values, ok bool, err error) {
	rest, ok := strings.CutPrefix(s, "sim:")
	if !ok {
		return 0, nil, false, nil
	}
	count, query, _ := strings.Cut(rest, "?")
	n, err = strconv.Atoi(count)
	if err != nil || n < 1 || n > 64 {
		return 0, nil, true, fmt.Errorf(`%q: want "sim:N" with N in 1..64`, s)
	}
	q, err = parseQuery(query)
	if err != nil {
		return 0, nil, true, fmt.Errorf("%q: %v", s, err)
	}
	if _, err := ConfigFromQuery(n, q, nil); err != nil {
		shown := s
		if q.Has("api_key_env") {
			shown = "sim:" + count // its value may be a key given by mistake
		}
		return 0, nil, true, fmt.Errorf("%q: %v", shown, err)
	}
	return n, q, true, nil
}

// envNameRe is an environment variable name.
var envNameRe = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// parseQuery reads the options of "sim:N?k=v&k=v". Unlike a URL query,
// '+' is itself, not a space: fault windows are written "die@1h+5m".
// %XX escapes are decoded.
func parseQuery(query string) (url.Values, error) {
	q := url.Values{}
	for _, kv := range strings.Split(query, "&") {
		if kv == "" {
			continue
		}
		k, v, _ := strings.Cut(kv, "=")
		key, err := url.PathUnescape(k)
		if err != nil {
			return nil, fmt.Errorf("option %q: %v", k, err)
		}
		val, err := url.PathUnescape(v)
		if err != nil {
			return nil, fmt.Errorf("option %s: %v", key, err)
		}
		q.Add(key, val)
	}
	return q, nil
}

// ConfigFromQuery turns the options of "sim:N?speed=…&faults=…" (see
// ParseURL) into a fleet config. apiKey reads the key in the environment
// variable api_key_env names; nil (at check time) only checks the name.
func ConfigFromQuery(n int, q url.Values, apiKey func(envName string) (string, error)) (Config, error) {
	p := queryParse{cfg: Config{Count: n}, lengths: "default", apiKey: apiKey}
	for _, k := range slices.Sorted(maps.Keys(q)) {
		p.option(k, q[k])
	}
	// A mean above its cap raises the cap with it, unless the cap was
	// given too (then the mismatch is reported when the fleet starts).
	thinkMaxSet, answerMaxSet := p.cfg.ThinkTokensMax != 0, p.cfg.AnswerTokensMax != 0
	if err := p.cfg.UseLengths(p.lengths); err != nil {
		p.errs = append(p.errs, "sim option lengths: "+err.Error())
	}
	if len(p.errs) > 0 {
		return p.cfg, errors.New(strings.Join(p.errs, "; "))
	}
	cfg := p.cfg
	if !thinkMaxSet && cfg.ThinkTokensMean > cfg.ThinkTokensMax {
		cfg.ThinkTokensMax = min(cfg.ThinkTokensMean*4, maxSpanLimit)
	}
	if !answerMaxSet && cfg.AnswerTokensMean > cfg.AnswerTokensMax {
		cfg.AnswerTokensMax = min(cfg.AnswerTokensMean*4, maxSpanLimit)
	}
	return cfg, nil
}

// queryParse is what ConfigFromQuery has read so far: the config, the
// lengths preset (applied after every option, so the options that
// override it may come in any order) and every problem found.
type queryParse struct {
	cfg     Config
	lengths string
	apiKey  func(envName string) (string, error)
	errs    []string
}

// option reads option k, given the values vs; each problem is appended
// to p.errs, so every one is reported at once.
func (p *queryParse) option(k string, vs []string) {
	if len(vs) > 1 {
		p.errs = append(p.errs, fmt.Sprintf("sim option %s is given %d times", k, len(vs)))
		return
	}
	v := vs[0]
	i := slices.IndexFunc(queryOptions, func(o queryOption) bool { return o.name == k })
	if i < 0 {
		p.errs = append(p.errs, fmt.Sprintf("unknown sim option %q (%s)", k, strings.Join(queryKeys, ", ")))
		return
	}
	if err := queryOptions[i].set(p, v); err != nil {
		p.errs = append(p.errs, fmt.Sprintf("sim option %s=%q: %v", k, v, err))
	}
}

// queryOption is one option of "sim:N?…". set reads its value into p; an
// error it returns is reported as `sim option k="v": error`. An option
// whose problems read otherwise appends them to p.errs and returns nil.
type queryOption struct {
	name string
	set  func(p *queryParse, v string) error
}

// queryOptions are the options of "sim:N?…", in the order an unknown
// one's error lists them.
var queryOptions = []queryOption{
	{"speed", floatOption(func(c *Config) *float64 { return &c.Speed })},
	{"max_running", intOption(func(c *Config) *int { return &c.MaxRunning })},
	{"kv_tokens", intOption(func(c *Config) *int { return &c.KVTokens })},
	{"context_length", intOption(func(c *Config) *int { return &c.ContextLength })},
	{"lengths", func(p *queryParse, v string) error { p.lengths = v; return nil }},
	{"think_mean", intOption(func(c *Config) *int { return &c.ThinkTokensMean })},
	{"think_max", intOption(func(c *Config) *int { return &c.ThinkTokensMax })},
	{"answer_mean", intOption(func(c *Config) *int { return &c.AnswerTokensMean })},
	{"answer_max", intOption(func(c *Config) *int { return &c.AnswerTokensMax })},
	{"length_sigma", floatOption(func(c *Config) *float64 { return &c.LengthSigma })},
	{"spec_accept", floatOption(func(c *Config) *float64 { return &c.SpecAcceptMean })},
	{"model", func(p *queryParse, v string) error { p.cfg.Model = v; return nil }},
	{"forced_thinking", func(p *queryParse, v string) (err error) {
		p.cfg.ForcedThinking, err = strconv.ParseBool(v)
		return err
	}},
	{"tool_calls", (*queryParse).toolCalls},
	{"tool_call_parser", func(p *queryParse, v string) error {
		p.cfg.ToolCallParser = v
		if v != "qwen25" && v != "qwen" {
			return errors.New("want qwen25 (Qwen3's <tool_call> format)")
		}
		return nil
	}},
	{"seed", func(p *queryParse, v string) (err error) {
		p.cfg.Seed, err = strconv.ParseUint(v, 10, 64)
		return err
	}},
	{"faults", (*queryParse).faults},
	{"api_key_env", (*queryParse).apiKeyEnv},
}

// queryKeys are the names of queryOptions, as an unknown option's error
// lists them.
var queryKeys = func() []string {
	keys := make([]string, len(queryOptions))
	for i, o := range queryOptions {
		keys[i] = o.name
	}
	return keys
}()

func intOption(field func(*Config) *int) func(*queryParse, string) error {
	return func(p *queryParse, v string) (err error) {
		*field(&p.cfg), err = strconv.Atoi(v)
		return err
	}
}

func floatOption(field func(*Config) *float64) func(*queryParse, string) error {
	return func(p *queryParse, v string) (err error) {
		*field(&p.cfg), err = strconv.ParseFloat(v, 64)
		return err
	}
}

// toolCalls reads tool_calls, a share in 0..1; 0 is stored as -1 (none),
// since Config's 0 means the default.
func (p *queryParse) toolCalls(v string) (err error) {
	p.cfg.ToolCalls, err = strconv.ParseFloat(v, 64)
	if err == nil && (p.cfg.ToolCalls < 0 || p.cfg.ToolCalls > 1) {
		err = errors.New("want a share in 0..1")
	}
	if p.cfg.ToolCalls == 0 {
		p.cfg.ToolCalls = -1
	}
	return err
}

// faults reads the faults option; each bad fault is reported by itself
// and the good ones are kept.
func (p *queryParse) faults(v string) error {
	for _, fs := range splitFaults(v) {
		f, err := ParseFault(fs)
		if err != nil {
			p.errs = append(p.errs, err.Error())
			continue
		}
		p.cfg.Faults = append(p.cfg.Faults, f)
	}
	return nil
}

// apiKeyEnv reads api_key_env, the name of the variable holding the key.
// Its errors never quote the value: it may be a key given by mistake.
func (p *queryParse) apiKeyEnv(v string) error {
	if !envNameRe.MatchString(v) {
		p.errs = append(p.errs, "sim option api_key_env: not an environment variable name (give the variable's name, not the key)")
		return nil
	}
	if p.apiKey == nil {
		return nil
	}
	key, err := p.apiKey(v)
	if err != nil {
		p.errs = append(p.errs, fmt.Sprintf("sim option api_key_env: %v", err))
		return nil
	}
	p.cfg.APIKey = key
	return nil
}

// splitFaults splits the faults option at commas, keeping a fault's list
// of servers whole: "503:0.1,die@1h+5m#0,1" is two faults, the second on
// servers 0 and 1.
func splitFaults(v string) []string {
	var out []string
	for _, p := range strings.Split(v, ",") {
		if n := len(out); n > 0 && strings.Contains(out[n-1], "#") && isServerIndex(p) {
			out[n-1] += "," + p
			continue
		}
		out = append(out, p)
	}
	return out
}

func isServerIndex(s string) bool {
	s = strings.TrimSpace(s)
	if s == "" {
		return false
	}
	_, err := strconv.Atoi(s)
	return err == nil
}
