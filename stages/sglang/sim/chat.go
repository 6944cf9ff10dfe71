package sim

import (
	"bytes"
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
	Seed              *int64          `json:"seed"`
	SkipSpecialTokens *bool           `json:"skip_special_tokens"`
	RID               json.RawMessage `json:"rid"`
	ReturnMetaInfo    bool            `json:"return_meta_info"`
	// return_token_ids asks for choices[i].token_ids and
	// prompt_token_ids, return_prompt_token_ids for the latter only
	// (protocol.py, SGLang 2026-07); both are refused on a stream.
	ReturnTokenIDs       bool `json:"return_token_ids"`
	ReturnPromptTokenIDs bool `json:"return_prompt_token_ids"`
	// tools (OpenAI's list) and tool_choice ("none" turns the tool-call
	// parser off, as in serving_chat.py).
	Tools      json.RawMessage `json:"tools"`
	ToolChoice json.RawMessage `json:"tool_choice"`
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
	j, problem := l.chatJob(*body)
	if problem != "" {
		writeError(w, apiOpenAI, http.StatusBadRequest, problem)
		return
	}
	l.run(w, r, &j)
}

// chatJob reads a chat request into a job; problem, when not "", is the
// message of the 400 that refuses it, SGLang's for the same request.
func (l *life) chatJob(body []byte) (j job, problem string) {
	var req chatRequest
	if err := json.Unmarshal(body, &req); err != nil {
		return j, "invalid request body: " + err.Error()
	}
	var msgs []chatMessage
	if err := json.Unmarshal(req.Messages, &msgs); err != nil || len(msgs) == 0 {
		return j, "messages must be a non-empty list of {role, content}"
	}
	if req.Stream && (req.ReturnTokenIDs || req.ReturnPromptTokenIDs) {
		return j, "return_token_ids and return_prompt_token_ids are not supported for streaming chat completions."
	}
	j = l.chatOptions(&req)
	hasTools, problem := l.chatTools(&j, &req)
	if problem != "" {
		return j, problem
	}
	texts, problem := l.chatPrompt(&j, &req, &msgs, hasTools)
	if problem != "" {
		return j, problem
	}
	if req.ReturnTokenIDs || req.ReturnPromptTokenIDs {
		// The ids returned and the count in usage agree.
		j.promptIDs = l.chatPromptIDs(msgs, texts, j.thinking, j.forced)
		j.promptTokens = len(j.promptIDs)
	}
	j.hash = chatHash(&req, hasTools, j.thinking)
	j.maxNew = l.chatMaxNew(&req, j.promptTokens)
	if len(req.RID) > 0 && req.RID[0] == '"' {
		_ = json.Unmarshal(req.RID, &j.rid)
	}
	return j, ""
}

// chatOptions is the job of req before its prompt is read: the switches
// a chat request sets, each defaulting as in SGLang.
func (l *life) chatOptions(req *chatRequest) job {
	j := job{api: apiOpenAI, thinking: true, stream: req.Stream, model: req.Model,
		separate: l.cfg.ReasoningParser != "none", metaInfo: req.ReturnMetaInfo,
		outputIDs: req.ReturnTokenIDs}
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
	return j
}

// chatTools reads req's tools into j. hasTools is false without tools,
// for null and for an empty list; the parser runs only with tools, a
// configured parser and a tool_choice other than "none".
func (l *life) chatTools(j *job, req *chatRequest) (hasTools bool, problem string) {
	if len(req.Tools) == 0 || string(req.Tools) == "null" {
		return false, ""
	}
	if req.Tools[0] != '[' {
		return false, "tools must be a list of tools"
	}
	j.tools = parseToolList(req.Tools)
	hasTools = string(bytes.TrimSpace(req.Tools)) != "[]"
	j.toolParser = hasTools && l.cfg.ToolCallParser != "" && string(req.ToolChoice) != `"none"`
	return hasTools, ""
}

// chatPrompt counts j's prompt tokens as Qwen3's template renders the
// messages, and returns each message's text. With tools, the tools block
// joins the system turn, which is added to *msgs if there was none.
func (l *life) chatPrompt(j *job, req *chatRequest, msgs *[]chatMessage, hasTools bool) (texts []string, problem string) {
	texts = make([]string, len(*msgs))
	for i, m := range *msgs {
		text, ok := messageText(m.Content)
		if !ok {
			return nil, "message content must be a string or a list of text parts"
		}
		texts[i] = text
		j.promptTokens += chatTokensPerMessage + l.countTokens(text)
	}
	if hasTools {
		texts = l.chatToolsTurn(j, req, msgs, texts)
	}
	j.promptTokens += chatTokensGenPrompt
	if !j.thinking {
		j.promptTokens += chatTokensNoThink
	}
	return texts, ""
}

// chatToolsTurn puts the tools block in the system turn, after the system
// message's own text, as Qwen3's template does, and returns the texts.
func (l *life) chatToolsTurn(j *job, req *chatRequest, msgs *[]chatMessage, texts []string) []string {
	ms := *msgs
	block := qwen3ToolsSystem(firstText(ms, texts), len(ms) > 0 && ms[0].Role == "system", req.Tools)
	if ms[0].Role == "system" {
		j.promptTokens -= chatTokensPerMessage + l.countTokens(texts[0])
		texts[0] = block
	} else {
		*msgs = append([]chatMessage{{Role: "system"}}, ms...)
		texts = append([]string{block}, texts...)
	}
	j.promptTokens += chatTokensPerMessage + l.countTokens(block)
	return texts
}

// chatHash is the request content that seeds the output: the messages,
// the tools, the thinking switch and the request's own seed.
func chatHash(req *chatRequest, hasTools, thinking bool) uint64 {
	h := fnv64(3, req.Messages)
	if hasTools {
		h = mix(h, fnv64(5, req.Tools))
	}
	if !thinking {
		h = mix(h, 4)
	}
	return seeded(h, req.Seed)
}

// chatMaxNew is the request's max_completion_tokens, else its max_tokens,
// else the rest of the context after the prompt.
func (l *life) chatMaxNew(req *chatRequest, promptTokens int) int {
	switch {
	case req.MaxCompletionTokens != nil:
		return *req.MaxCompletionTokens
	case req.MaxTokens != nil:
		return *req.MaxTokens
	}
	return max(l.cfg.ContextLength-promptTokens-1, 0)
}

// firstText is the first message's text, "" without messages.
func firstText(msgs []chatMessage, texts []string) string {
	if len(msgs) == 0 {
		return ""
	}
	return texts[0]
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

// Ids of the approximate prompt without a tokenizer: Qwen3's role tokens,
// others hashed like corpus words.
var roleIDs = map[string]int{"system": 8948, "user": 872, "assistant": 77091}

// chatPromptIDs are the ids of the prompt as Qwen3's template renders
// plain-text messages: "<|im_start|>ROLE\nCONTENT<|im_end|>\n" each, then
// "<|im_start|>assistant\n", then "<think>\n\n</think>\n\n" with
// thinking off or "<think>\n" when the template forces thinking. With a
// tokenizer they are its encoding of that text; without, the documented
// approximation: template tokens by their Qwen3 ids and one hashed id per
// 4 bytes of content, as many as the prompt count.
func (l *life) chatPromptIDs(msgs []chatMessage, texts []string, thinking, forced bool) []int {
	if tok := l.cfg.Tokenizer; tok != nil {
		var b strings.Builder
		for i, m := range msgs {
			b.WriteString("<|im_start|>" + m.Role + "\n" + texts[i] + "<|im_end|>\n")
		}
		b.WriteString("<|im_start|>assistant\n")
		switch {
		case !thinking:
			b.WriteString(noThinkSuffix)
		case forced:
			b.WriteString(forcedSuffix)
		}
		return tok.Encode(b.String())
	}
	var ids []int
	role := func(r string) int {
		if id, ok := roleIDs[r]; ok {
			return id
		}
		return int(wordID(r))
	}
	for i, m := range msgs {
		ids = append(ids, idImStart, role(m.Role), idNewline)
		for t := texts[i]; t != ""; {
			n := min(4, len(t))
			ids = append(ids, int(wordID(t[:n])))
			t = t[n:]
		}
		ids = append(ids, idImEnd, idNewline)
	}
	ids = append(ids, idImStart, roleIDs["assistant"], idNewline)
	switch {
	case !thinking:
		ids = append(ids, noThinkIDs...)
	case forced:
		ids = append(ids, forcedIDs...)
	}
	return ids
}
