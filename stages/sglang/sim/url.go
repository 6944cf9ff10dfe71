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
	cfg := Config{Count: n}
	var errs []string
	lengths := "default"
	for _, k := range slices.Sorted(maps.Keys(q)) {
		v := q.Get(k)
		if vs := q[k]; len(vs) > 1 {
			errs = append(errs, fmt.Sprintf("sim option %s is given %d times", k, len(vs)))
			continue
		}
		var err error
		switch k {
		case "speed":
			cfg.Speed, err = strconv.ParseFloat(v, 64)
		case "max_running":
			cfg.MaxRunning, err = strconv.Atoi(v)
		case "kv_tokens":
			cfg.KVTokens, err = strconv.Atoi(v)
		case "context_length":
			cfg.ContextLength, err = strconv.Atoi(v)
		case "lengths":
			lengths = v
		case "think_mean":
			cfg.ThinkTokensMean, err = strconv.Atoi(v)
		case "think_max":
			cfg.ThinkTokensMax, err = strconv.Atoi(v)
		case "answer_mean":
			cfg.AnswerTokensMean, err = strconv.Atoi(v)
		case "answer_max":
			cfg.AnswerTokensMax, err = strconv.Atoi(v)
		case "length_sigma":
			cfg.LengthSigma, err = strconv.ParseFloat(v, 64)
		case "spec_accept":
			cfg.SpecAcceptMean, err = strconv.ParseFloat(v, 64)
		case "model":
			cfg.Model = v
		case "tool_calls":
			cfg.ToolCalls, err = strconv.ParseFloat(v, 64)
			if err == nil && (cfg.ToolCalls < 0 || cfg.ToolCalls > 1) {
				err = errors.New("want a share in 0..1")
			}
			if cfg.ToolCalls == 0 {
				cfg.ToolCalls = -1 // none; Config's 0 is the default
			}
		case "tool_call_parser":
			cfg.ToolCallParser = v
			if v != "qwen25" && v != "qwen" {
				err = errors.New("want qwen25 (Qwen3's <tool_call> format)")
			}
		case "forced_thinking":
			cfg.ForcedThinking, err = strconv.ParseBool(v)
		case "seed":
			var s uint64
			s, err = strconv.ParseUint(v, 10, 64)
			cfg.Seed = s
		case "api_key_env":
			if !envNameRe.MatchString(v) {
				errs = append(errs, "sim option api_key_env: not an environment variable name (give the variable's name, not the key)")
				continue
			}
			if apiKey != nil {
				key, kerr := apiKey(v)
				if kerr != nil {
					errs = append(errs, fmt.Sprintf("sim option api_key_env: %v", kerr))
					continue
				}
				cfg.APIKey = key
			}
		case "faults":
			for _, fs := range splitFaults(v) {
				f, ferr := ParseFault(fs)
				if ferr != nil {
					errs = append(errs, ferr.Error())
					continue
				}
				cfg.Faults = append(cfg.Faults, f)
			}
		default:
			errs = append(errs, fmt.Sprintf("unknown sim option %q (%s)", k, strings.Join(queryKeys, ", ")))
		}
		if err != nil {
			errs = append(errs, fmt.Sprintf("sim option %s=%q: %v", k, v, err))
		}
	}
	// A mean above its cap raises the cap with it, unless the cap was
	// given too (then the mismatch is reported when the fleet starts).
	thinkMaxSet, answerMaxSet := cfg.ThinkTokensMax != 0, cfg.AnswerTokensMax != 0
	if err := cfg.UseLengths(lengths); err != nil {
		errs = append(errs, "sim option lengths: "+err.Error())
	}
	if len(errs) > 0 {
		return cfg, errors.New(strings.Join(errs, "; "))
	}
	if !thinkMaxSet && cfg.ThinkTokensMean > cfg.ThinkTokensMax {
		cfg.ThinkTokensMax = min(cfg.ThinkTokensMean*4, maxSpanLimit)
	}
	if !answerMaxSet && cfg.AnswerTokensMean > cfg.AnswerTokensMax {
		cfg.AnswerTokensMax = min(cfg.AnswerTokensMean*4, maxSpanLimit)
	}
	return cfg, nil
}

// queryKeys are the options of "sim:N?…", as an unknown one's error lists
// them.
var queryKeys = []string{"speed", "max_running", "kv_tokens", "context_length",
	"lengths", "think_mean", "think_max", "answer_mean", "answer_max", "length_sigma",
	"spec_accept", "model", "forced_thinking", "tool_calls", "tool_call_parser", "seed", "faults", "api_key_env"}

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
