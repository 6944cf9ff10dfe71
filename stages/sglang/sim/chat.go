package sim

import (
	"encoding/json"
	"net/http"
	"strings"
)

type chatRequest struct {
	Messages            json.RawMessage `json:"messages"`
	Model               string          `json:"model"`
	MaxTokens           *int            `json:"max_tokens"`
	MaxCompletionTokens *int            `json:"max_completion_tokens"`
	Stream              bool            `json:"stream"`
	StreamOptions       *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
	ChatTemplateKwargs struct {
		EnableThinking *bool `json:"enable_thinking"`
	} `json:"chat_template_kwargs"`
	SeparateReasoning *bool           `json:"separate_reasoning"`
	SkipSpecialTokens *bool           `json:"skip_special_tokens"`
	RID               json.RawMessage `json:"rid"`
	ReturnMetaInfo    bool            `json:"return_meta_info"`
}

type chatMessage struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

// Prompt tokens of a chat request: Qwen3's template puts
// "<|im_start|>ROLE\n" before and "<|im_end|>\n" after each message
// (≈5 tokens), "<|im_start|>assistant\n" (3) at the end, and with thinking
// off the empty "<think>\n\n</think>\n\n" (4).
const (
	chatTokensPerMessage = 5
	chatTokensGenPrompt  = 3
	chatTokensNoThink    = 4
)

func (l *life) chat(w http.ResponseWriter, r *http.Request) {
	body, err := readBody(r)
	defer putBuf(body)
	if err != nil {
		return
	}
	var req chatRequest
	if err := json.Unmarshal(*body, &req); err != nil {
		writeError(w, apiOpenAI, http.StatusBadRequest, "invalid request body: "+err.Error())
		return
	}
	var msgs []chatMessage
	if err := json.Unmarshal(req.Messages, &msgs); err != nil || len(msgs) == 0 {
		writeError(w, apiOpenAI, http.StatusBadRequest, "messages must be a non-empty list of {role, content}")
		return
	}
	j := job{api: apiOpenAI, thinking: true, stream: req.Stream, model: req.Model,
		separate: l.cfg.ReasoningParser != "none", metaInfo: req.ReturnMetaInfo}
	if p := req.ChatTemplateKwargs.EnableThinking; p != nil {
		j.thinking = *p
	}
	j.forced = j.thinking && l.cfg.ForcedThinking
	if p := req.SeparateReasoning; p != nil && !*p {
		j.separate = false
	}
	if p := req.SkipSpecialTokens; p != nil {
		j.keepEOS = !*p
	}
	if req.StreamOptions != nil {
		j.includeUsage = req.StreamOptions.IncludeUsage
	}
	for _, m := range msgs {
		text, ok := messageText(m.Content)
		if !ok {
			writeError(w, apiOpenAI, http.StatusBadRequest, "message content must be a string or a list of text parts")
			return
		}
		j.promptTokens += chatTokensPerMessage + l.countTokens(text)
	}
	j.promptTokens += chatTokensGenPrompt
	if !j.thinking {
		j.promptTokens += chatTokensNoThink
	}
	j.hash = fnv64(3, req.Messages)
	if !j.thinking {
		j.hash = mix(j.hash, 4)
	}
	switch {
	case req.MaxCompletionTokens != nil:
		j.maxNew = *req.MaxCompletionTokens
	case req.MaxTokens != nil:
		j.maxNew = *req.MaxTokens
	default:
		j.maxNew = max(l.cfg.ContextLength-j.promptTokens-1, 0)
	}
	if len(req.RID) > 0 && req.RID[0] == '"' {
		_ = json.Unmarshal(req.RID, &j.rid)
	}
	l.run(w, r, &j)
}

// messageText returns a message's text: a string, null, or a list of
// {"type":"text","text":…} parts joined.
func messageText(raw json.RawMessage) (string, bool) {
	if len(raw) == 0 || string(raw) == "null" {
		return "", true
	}
	var s string
	if raw[0] == '"' {
		return s, json.Unmarshal(raw, &s) == nil
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if json.Unmarshal(raw, &parts) != nil {
		return "", false
	}
	var b strings.Builder
	for _, p := range parts {
		b.WriteString(p.Text)
	}
	return b.String(), true
}
