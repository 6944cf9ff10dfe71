package sglang

import (
	"strconv"
	"unicode/utf8"
)

// API selects the endpoint requests go to.
type API string

const (
	// APIChat is the OpenAI-compatible POST /v1/chat/completions: the server
	// renders the chat template.
	APIChat API = "chat"
	// APIGenerate is the native POST /generate: the caller sends text or
	// token ids it rendered itself.
	APIGenerate API = "generate"
)

// Sampling holds the generation settings sent with every request. A nil
// pointer or empty slice is not sent, so the server's default applies.
type Sampling struct {
	// MaxOutputTokens bounds thinking + answer. It is always sent: the
	// server's own default (128) silently truncates.
	MaxOutputTokens   int
	Temperature       *float64
	TopP              *float64
	TopK              *int
	MinP              *float64
	Seed              *int
	Stop              []string
	StopTokenIDs      []int
	RepetitionPenalty *float64
	PresencePenalty   *float64
	FrequencyPenalty  *float64
	// EnableThinking is sent as chat_template_kwargs.enable_thinking on the
	// chat API (with separate_reasoning); nil sends neither. On the native
	// API the caller's rendering decides.
	EnableThinking *bool
}

// Message is one chat turn as sent.
type Message struct {
	Role    string
	Content string
}

// Request is one generation: Messages on the chat API; Text or InputIDs on
// the native API.
type Request struct {
	Messages []Message
	Text     string
	InputIDs []int
}

// settings renders the constant part of a request body once, so the hot path
// only appends the prompt and a rid. The returned map is what the run
// records as "the exact request settings".
type settings struct {
	api   API
	model string
	// body is the settings as JSON members without braces, e.g.
	// `"max_tokens":4096,"temperature":0.6`; for the native API they belong
	// inside "sampling_params".
	body []byte
	// record is what Completion.Request records; shared by all completions
	// and never modified.
	record map[string]any
}

func newSettings(api API, model string, s Sampling) *settings {
	st := &settings{api: api, model: model, record: map[string]any{"api": string(api)}}
	var b []byte
	add := func(key string, val any, enc func([]byte) []byte) {
		if len(b) > 0 {
			b = append(b, ',')
		}
		b = appendString(b, key)
		b = append(b, ':')
		b = enc(b)
		st.record[key] = val
	}
	addF := func(key string, p *float64) {
		if p != nil {
			v := *p
			add(key, v, func(b []byte) []byte { return strconv.AppendFloat(b, v, 'g', -1, 64) })
		}
	}
	addI := func(key string, p *int) {
		if p != nil {
			v := *p
			add(key, v, func(b []byte) []byte { return strconv.AppendInt(b, int64(v), 10) })
		}
	}
	maxKey, seedKey := "max_tokens", "seed"
	// The model is recorded on both APIs (on the native one it is what the
	// servers reported: /generate takes no model).
	st.record["model"] = model
	if api == APIGenerate {
		// SGLang's SamplingParams names; sampling_seed exists only on newer
		// servers, so it is sent only when a seed is configured.
		maxKey, seedKey = "max_new_tokens", "sampling_seed"
		if s.EnableThinking != nil {
			// Not sent: the caller rendered the prompt with it.
			st.record["enable_thinking"] = *s.EnableThinking
		}
	}
	mx := s.MaxOutputTokens
	add(maxKey, mx, func(b []byte) []byte { return strconv.AppendInt(b, int64(mx), 10) })
	addF("temperature", s.Temperature)
	addF("top_p", s.TopP)
	addI("top_k", s.TopK)
	addF("min_p", s.MinP)
	addI(seedKey, s.Seed)
	if len(s.Stop) > 0 {
		stop := append([]string(nil), s.Stop...)
		add("stop", stop, func(b []byte) []byte {
			b = append(b, '[')
			for i, x := range stop {
				if i > 0 {
					b = append(b, ',')
				}
				b = appendString(b, x)
			}
			return append(b, ']')
		})
	}
	if len(s.StopTokenIDs) > 0 {
		ids := append([]int(nil), s.StopTokenIDs...)
		add("stop_token_ids", ids, func(b []byte) []byte { return appendInts(b, ids) })
	}
	addF("repetition_penalty", s.RepetitionPenalty)
	addF("presence_penalty", s.PresencePenalty)
	addF("frequency_penalty", s.FrequencyPenalty)
	if api == APIChat && s.EnableThinking != nil {
		on := *s.EnableThinking
		add("chat_template_kwargs", map[string]any{"enable_thinking": on}, func(b []byte) []byte {
			return append(strconv.AppendBool(append(b, `{"enable_thinking":`...), on), '}')
		})
		add("separate_reasoning", true, func(b []byte) []byte { return append(b, "true"...) })
	}
	st.body = b
	return st
}

// path is the endpoint of the settings' API.
func (st *settings) path() string {
	if st.api == APIGenerate {
		return "/generate"
	}
	return "/v1/chat/completions"
}

// appendBody appends the JSON body of req with request id rid.
func (st *settings) appendBody(b []byte, req *Request, rid string) []byte {
	if st.api == APIGenerate {
		b = append(b, '{')
		if req.InputIDs != nil {
			b = append(b, `"input_ids":`...)
			b = appendInts(b, req.InputIDs)
		} else {
			b = append(b, `"text":`...)
			b = appendString(b, req.Text)
		}
		b = append(b, `,"sampling_params":{`...)
		b = append(b, st.body...)
		b = append(b, `},"rid":`...)
		b = appendString(b, rid)
		return append(b, `,"stream":false}`...)
	}
	b = append(b, `{"model":`...)
	b = appendString(b, st.model)
	b = append(b, `,"messages":[`...)
	for i, m := range req.Messages {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"role":`...)
		b = appendString(b, m.Role)
		b = append(b, `,"content":`...)
		b = appendString(b, m.Content)
		b = append(b, '}')
	}
	b = append(b, "],"...)
	b = append(b, st.body...)
	b = append(b, `,"rid":`...)
	b = appendString(b, rid)
	// meta_info per choice (load, speculative figures) comes only when
	// asked for (serving_chat.py, SGLang 2026); older servers ignore it.
	return append(b, `,"return_meta_info":true,"stream":false}`...)
}

func appendInts(b []byte, xs []int) []byte {
	b = append(b, '[')
	for i, x := range xs {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendInt(b, int64(x), 10)
	}
	return append(b, ']')
}

const hexDigits = "0123456789abcdef"

// appendString appends s as a JSON string, escaping like encoding/json
// (without its HTML escaping, which servers do not need): invalid UTF-8
// becomes U+FFFD, U+2028 and U+2029 are escaped.
func appendString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
