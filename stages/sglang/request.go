package sglang

import (
	"bytes"
	"cmp"
	"fmt"
	"slices"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/pipe-dev/pipe/pipeline/record"
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

// Message is one chat turn as sent. The tool fields are sent only when
// set, so a message without them is sent as {"role","content"} as before.
type Message struct {
	Role string
	// Content is sent as a string, "" included: an assistant turn that
	// only calls tools is sent with "content": "", which SGLang's
	// ChatCompletionMessageGenericParam accepts (it also takes null) and
	// which chat templates read as they read null, so the server renders
	// the turn as pipe's own rendering of the record does.
	Content string
	// ReasoningContent is an earlier assistant turn's thinking, sent as
	// "reasoning_content" when there is some (SGLang's
	// ChatCompletionMessageGenericParam takes it and passes it to the
	// template, which decides whether to render it: Qwen3's keeps it for
	// the turns after the last user message, a tool-call chain's).
	ReasoningContent string
	// ToolCalls are an assistant turn's calls, sent as "tool_calls": each
	// {"id", "type", "function": {"name", "arguments"}}, the id and type
	// left out when empty (SGLang's ToolCall defaults type to
	// "function" and takes id as optional) and the arguments the JSON
	// value given (a string stays that string; an object keeps its key
	// order and number spelling, only the whitespace between its tokens
	// is dropped, the body being compact; SGLang's chat API parses a
	// string into the object its template prints,
	// normalize_assistant_tool_call_arguments, and refuses one that is
	// not a JSON object with 400). Nil arguments are sent as null.
	ToolCalls []record.ToolCall
	// ToolCallID is a tool turn's "tool_call_id", the call it answers.
	ToolCallID string
	// Name is a tool turn's (or a participant's) "name".
	Name string
}

// Request is one generation: Messages on the chat API; Text or InputIDs on
// the native API.
type Request struct {
	Messages []Message
	// Tools are the conversation's tool schemas on the chat API, the JSON
	// array as given (record.Record.Tools: key order and number spelling
	// kept, whitespace between tokens dropped), sent as the request's "tools"
	// member when not empty; the server's template renders them (Qwen3:
	// the "# Tools" block of the system turn) and, with
	// --tool-call-parser, the answer's calls come back parsed in
	// Result.ToolCalls. It must be a JSON array: anything else fails the
	// request before it is sent. On the native API the caller renders
	// the tools into its prompt and Tools is not sent.
	Tools    []byte
	Text     string
	InputIDs []int
	// MaxOutputTokens, when above 0, bounds this request's output in place
	// of Sampling.MaxOutputTokens (e.g. what a training row can still
	// hold).
	MaxOutputTokens int
	// Per, when not nil, replaces sampling settings for this request
	// alone: a prompt's own temperature, a sample's seed.
	Per *PerRequest
}

// PerRequest are the sampling settings one request may set for itself; a
// nil field keeps the client's.
type PerRequest struct {
	Temperature, TopP *float64
	TopK, Seed        *int
}

// settings renders the constant part of a request body once, so the hot path
// only adds the prompt and a rid. The returned map is what the run records
// as "the exact request settings".
type settings struct {
	api   API
	model string
	// body is the settings as one JSON object, e.g.
	// {"max_tokens":4096,"temperature":0.6}: the request's members on the
	// chat API, its "sampling_params" on the native API.
	body jsontext.Value
	// sent is what body encodes, for a request that changes a member of
	// it (Request.MaxOutputTokens).
	sent sent
	// record is what Completion.Request records; shared by all completions
	// and never modified.
	record map[string]any
}

// sent are the settings as sent: a nil pointer or slice is not, so the
// server's default applies. The names are the chat API's, or SGLang's
// SamplingParams' on the native API (max_new_tokens; sampling_seed, which
// exists only on newer servers, so it is sent only when a seed is set).
// A non-finite float, which TOML allows, is sent as the string "NaN" or
// "Infinity" for the server to refuse, keeping the body valid JSON.
type sent struct {
	MaxTokens          *int     `json:"max_tokens,omitzero"`
	MaxNewTokens       *int     `json:"max_new_tokens,omitzero"`
	Temperature        *float64 `json:"temperature,omitzero,format:nonfinite"`
	TopP               *float64 `json:"top_p,omitzero,format:nonfinite"`
	TopK               *int     `json:"top_k,omitzero"`
	MinP               *float64 `json:"min_p,omitzero,format:nonfinite"`
	Seed               *int     `json:"seed,omitzero"`
	SamplingSeed       *int     `json:"sampling_seed,omitzero"`
	Stop               []string `json:"stop,omitzero"`
	StopTokenIDs       []int    `json:"stop_token_ids,omitzero"`
	RepetitionPenalty  *float64 `json:"repetition_penalty,omitzero,format:nonfinite"`
	PresencePenalty    *float64 `json:"presence_penalty,omitzero,format:nonfinite"`
	FrequencyPenalty   *float64 `json:"frequency_penalty,omitzero,format:nonfinite"`
	ChatTemplateKwargs *struct {
		EnableThinking bool `json:"enable_thinking"`
	} `json:"chat_template_kwargs,omitzero"`
	SeparateReasoning bool `json:"separate_reasoning,omitzero"`
}

// requestOpts: invalid UTF-8 in a prompt is sent as U+FFFD, as
// encoding/json does, rather than failing the request.
var requestOpts = jsontext.AllowInvalidUTF8(true)

func newSettings(api API, model string, s Sampling) *settings {
	// The model is recorded on both APIs (on the native one it is what the
	// servers reported: /generate takes no model).
	st := &settings{api: api, model: model, record: map[string]any{"api": string(api), "model": model}}
	mx := s.MaxOutputTokens
	out := sent{
		Temperature: s.Temperature, TopP: s.TopP, TopK: s.TopK, MinP: s.MinP,
		RepetitionPenalty: s.RepetitionPenalty, PresencePenalty: s.PresencePenalty, FrequencyPenalty: s.FrequencyPenalty,
	}
	if len(s.Stop) > 0 {
		out.Stop = slices.Clone(s.Stop)
	}
	if len(s.StopTokenIDs) > 0 {
		out.StopTokenIDs = slices.Clone(s.StopTokenIDs)
	}
	if api == APIGenerate {
		out.MaxNewTokens, out.SamplingSeed = &mx, s.Seed
		if s.EnableThinking != nil {
			// Not sent: the caller rendered the prompt with it.
			st.record["enable_thinking"] = *s.EnableThinking
		}
	} else {
		out.MaxTokens, out.Seed = &mx, s.Seed
		if s.EnableThinking != nil {
			out.ChatTemplateKwargs = &struct {
				EnableThinking bool `json:"enable_thinking"`
			}{*s.EnableThinking}
			out.SeparateReasoning = true
		}
	}
	body, err := json.Marshal(&out, requestOpts)
	if err != nil {
		panic("sglang: encoding the request settings: " + err.Error()) // no field of sent can fail
	}
	st.body, st.sent = body, out
	st.recordSent(&out)
	return st
}

// recordSent adds what is sent to the record, with Go values (ints,
// float64s, a []string, a map), under the names sent.
func (st *settings) recordSent(out *sent) {
	put := func(key string, set bool, v any) {
		if set {
			st.record[key] = v
		}
	}
	putF := func(key string, p *float64) {
		if p != nil {
			st.record[key] = *p
		}
	}
	putI := func(key string, p *int) {
		if p != nil {
			st.record[key] = *p
		}
	}
	putI("max_tokens", out.MaxTokens)
	putI("max_new_tokens", out.MaxNewTokens)
	putF("temperature", out.Temperature)
	putF("top_p", out.TopP)
	putI("top_k", out.TopK)
	putF("min_p", out.MinP)
	putI("seed", out.Seed)
	putI("sampling_seed", out.SamplingSeed)
	put("stop", out.Stop != nil, out.Stop)
	put("stop_token_ids", out.StopTokenIDs != nil, out.StopTokenIDs)
	putF("repetition_penalty", out.RepetitionPenalty)
	putF("presence_penalty", out.PresencePenalty)
	putF("frequency_penalty", out.FrequencyPenalty)
	if k := out.ChatTemplateKwargs; k != nil {
		st.record["chat_template_kwargs"] = map[string]any{"enable_thinking": k.EnableThinking}
	}
	put("separate_reasoning", out.SeparateReasoning, true)
}

// path is the endpoint of the settings' API.
func (st *settings) path() string {
	if st.api == APIGenerate {
		return "/generate"
	}
	return "/v1/chat/completions"
}

// nativeRequest is POST /generate's body: input_ids, or text when there
// are none.
type nativeRequest struct {
	InputIDs       []int          `json:"input_ids,omitzero"`
	Text           *string        `json:"text,omitzero"`
	SamplingParams jsontext.Value `json:"sampling_params"`
	RID            string         `json:"rid"`
	Stream         bool           `json:"stream"`
}

// chatRequest is POST /v1/chat/completions' body; the settings are members
// of it.
type chatRequest struct {
	Model    string        `json:"model"`
	Messages []chatMessage `json:"messages"`
	// tools only when the conversation has some: a request without them
	// is byte for byte what it was before tools were carried.
	Tools    jsontext.Value `json:"tools,omitzero"`
	Settings jsontext.Value `json:",inline"`
	RID      string         `json:"rid"`
	// meta_info per choice (load, speculative figures) comes only when
	// asked for (serving_chat.py, SGLang 2026); older servers ignore it.
	ReturnMetaInfo bool `json:"return_meta_info"`
	// return_token_ids asks for choices[i].token_ids, the sampled ids
	// as /generate's output_ids, and choices[i].prompt_token_ids (SGLang
	// 2026-07, PR #30917). Older servers ignore it: their request models
	// are pydantic's default, which drops unknown fields. Servers that
	// know it refuse it on a streamed chat request, and this one is never
	// streamed.
	ReturnTokenIDs bool `json:"return_token_ids"`
	Stream         bool `json:"stream"`
}

type chatMessage struct {
	Role       string         `json:"role"`
	Content    string         `json:"content"`
	Reasoning  string         `json:"reasoning_content,omitzero"`
	ToolCalls  []chatToolCall `json:"tool_calls,omitzero"`
	ToolCallID string         `json:"tool_call_id,omitzero"`
	Name       string         `json:"name,omitzero"`
}

// chatToolCall is a record.ToolCall on the wire: the arguments are raw
// JSON written as given.
type chatToolCall struct {
	ID       string `json:"id,omitzero"`
	Type     string `json:"type,omitzero"`
	Function struct {
		Name      string         `json:"name"`
		Arguments jsontext.Value `json:"arguments"`
	} `json:"function"`
}

// chatMessages are msgs as sent, or an error naming a message whose tool
// call's arguments are not one JSON value.
func chatMessages(msgs []Message) ([]chatMessage, error) {
	out := make([]chatMessage, len(msgs))
	for i, m := range msgs {
		out[i] = chatMessage{Role: m.Role, Content: m.Content, Reasoning: m.ReasoningContent, ToolCallID: m.ToolCallID, Name: m.Name}
		if len(m.ToolCalls) == 0 {
			continue
		}
		calls := make([]chatToolCall, len(m.ToolCalls))
		for k, tc := range m.ToolCalls {
			c := &calls[k]
			c.ID, c.Type, c.Function.Name = tc.ID, tc.Type, tc.Function.Name
			args := jsontext.Value(tc.Function.Arguments)
			if len(args) == 0 {
				args = jsontext.Value("null")
			} else if !args.IsValid() {
				return nil, fmt.Errorf("message %d: tool call %d (%q): arguments are not valid JSON", i+1, k+1, tc.Function.Name)
			}
			c.Function.Arguments = args
		}
		out[i].ToolCalls = calls
	}
	return out, nil
}

// checkTools reports whether tools is empty or one JSON array.
func checkTools(tools []byte) error {
	if len(tools) == 0 {
		return nil
	}
	v := jsontext.Value(tools)
	if !v.IsValid() || v.Kind() != '[' {
		return fmt.Errorf("the conversation's tools are not a JSON array")
	}
	return nil
}

// bodyFor is the settings' body for req: the one rendered once, or, when
// req bounds its own output or sets its own sampling, that body with them.
func (st *settings) bodyFor(req *Request) jsontext.Value {
	mx := req.MaxOutputTokens
	if mx <= 0 && req.Per == nil {
		return st.body
	}
	out := st.sent
	switch {
	case mx <= 0:
	case st.api == APIGenerate:
		out.MaxNewTokens = &mx
	default:
		out.MaxTokens = &mx
	}
	if p := req.Per; p != nil {
		out.Temperature = cmp.Or(p.Temperature, out.Temperature)
		out.TopP = cmp.Or(p.TopP, out.TopP)
		out.TopK = cmp.Or(p.TopK, out.TopK)
		if p.Seed != nil && st.api == APIGenerate {
			out.SamplingSeed = p.Seed
		} else if p.Seed != nil {
			out.Seed = p.Seed
		}
	}
	body, err := json.Marshal(&out, requestOpts)
	if err != nil {
		panic("sglang: encoding the request settings: " + err.Error()) // as in newSettings
	}
	return body
}

// checkRequest reports what in req cannot be sent: tools that are not a
// JSON array, tool-call arguments that are not JSON. appendBody sends
// only a request it accepted.
func (st *settings) checkRequest(req *Request) error {
	if st.api == APIGenerate {
		return nil
	}
	if err := checkTools(req.Tools); err != nil {
		return err
	}
	_, err := chatMessages(req.Messages)
	return err
}

// appendBody appends the JSON body of req with request id rid. req must
// have passed checkRequest.
func (st *settings) appendBody(b []byte, req *Request, rid string) []byte {
	var v any
	body := st.bodyFor(req)
	if st.api == APIGenerate {
		r := &nativeRequest{InputIDs: req.InputIDs, SamplingParams: body, RID: rid}
		if req.InputIDs == nil {
			r.Text = &req.Text
		}
		v = r
	} else {
		msgs, err := chatMessages(req.Messages)
		if err != nil || checkTools(req.Tools) != nil {
			panic(fmt.Sprintf("sglang: a request that checkRequest refuses (%v)", err))
		}
		var tools jsontext.Value
		if len(req.Tools) > 0 {
			tools = req.Tools
		}
		v = &chatRequest{Model: st.model, Messages: msgs, Tools: tools, Settings: body, RID: rid, ReturnMetaInfo: true, ReturnTokenIDs: true}
	}
	buf := bytes.NewBuffer(b)
	if err := json.MarshalWrite(buf, v, requestOpts); err != nil {
		panic("sglang: encoding a request: " + err.Error()) // strings, ints and valid JSON cannot fail
	}
	return buf.Bytes()
}
