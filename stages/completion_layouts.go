package stages

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/pipe-dev/pipe/pipeline/record"
)

// The layouts read-completions reads, by the name it reports.
const (
	layoutPipe          = "pipe"                   // write-jsonl records: id, messages, completion
	layoutShards        = "pipe-shards"            // write-arrow Parquet/Arrow shards
	layoutConversations = "conversations"          // ShareGPT/OpenAI turns ending with the assistant's
	layoutSpecForge     = "specforge-regenerated"  // SpecForge scripts/regenerate_train_data.py output
	layoutChat          = "openai-chat-completion" // a /v1/chat/completions response
	layoutBatch         = "openai-batch-output"    // an OpenAI/vLLM Batch API output line
)

// layoutText says what each layout is, for the line that reports it.
var layoutText = map[string]string{
	layoutPipe:          "pipe's records (id, messages, completion)",
	layoutShards:        "write-arrow shards (Parquet or Arrow IPC)",
	layoutConversations: "conversations whose last turn is the assistant's answer",
	layoutSpecForge:     "SpecForge's regenerated conversations (status, conversations)",
	layoutChat:          "OpenAI chat completions (choices[0].message)",
	layoutBatch:         "OpenAI/vLLM batch output (custom_id, response.body.choices)",
}

// foreignLine is one line of any layout read-completions knows: pipe's
// record fields, and those of the others.
type foreignLine struct {
	record.Record
	// Messages (pipe's and OpenAI's) and Conversations (ShareGPT's
	// "from"/"value" or OpenAI's "role"/"content") are read turn by turn
	// as read-prompts reads them (parseTurn): every field carried, an
	// unknown one an error. They take the place of Record's messages.
	Messages      []json.RawMessage `json:"messages"`
	Conversations []json.RawMessage `json:"conversations"`
	// Tools is read as read-prompts reads it (parseTools).
	Tools json.RawMessage `json:"tools"`
	// SpecForge's regenerate_train_data.py (call_sglang, set_skipped):
	// "success", or "error"/"skipped" with the reason in error.
	Status string          `json:"status"`
	Error  json.RawMessage `json:"error"`
	// OpenAI Batch API output: custom_id, response.status_code, response.body.
	CustomID string `json:"custom_id"`
	Response *struct {
		StatusCode int             `json:"status_code"`
		Body       *chatCompletion `json:"body"`
	} `json:"response"`
	chatCompletion
}

// chatCompletion is the part of an OpenAI chat completion response read.
type chatCompletion struct {
	Object  string `json:"object"`
	Model   string `json:"model"`
	Choices []struct {
		Message struct {
			Role             string          `json:"role"`
			Content          string          `json:"content"`
			ReasoningContent string          `json:"reasoning_content"`
			ToolCalls        json.RawMessage `json:"tool_calls"`
		} `json:"message"`
		FinishReason string `json:"finish_reason"`
	} `json:"choices"`
	Usage *struct {
		PromptTokens            int `json:"prompt_tokens"`
		CompletionTokens        int `json:"completion_tokens"`
		CompletionTokensDetails *struct {
			ReasoningTokens int `json:"reasoning_tokens"`
		} `json:"completion_tokens_details"`
		ReasoningTokens int `json:"reasoning_tokens"`
	} `json:"usage"`
}

// readTurns are turns (raw JSON objects) as messages, checked as
// read-prompts checks them.
func readTurns(raw []json.RawMessage) ([]record.Message, error) {
	if raw == nil {
		return nil, nil
	}
	spans := make([]turnSpan, len(raw))
	for i, el := range raw {
		var err error
		if spans[i], err = parseTurn(i+1, el); err != nil {
			return nil, err
		}
	}
	return turnsRecord("", spans).Messages, nil
}

// turns reads the line's messages, conversations and tools into its record.
func (l *foreignLine) turns() error {
	var err error
	if l.Record.Messages, err = readTurns(l.Messages); err != nil {
		return fmt.Errorf("messages: %v", err)
	}
	if l.Record.Tools, err = parseTools(l.Tools); err != nil {
		return err
	}
	return nil
}

// toRecord turns the line into pipe's record, and names its layout.
func (l *foreignLine) toRecord() (*record.Record, string, error) {
	rec := &l.Record
	switch {
	case rec.Completion != nil:
		return rec, layoutPipe, nil
	case l.Response != nil || l.CustomID != "":
		return l.batchRecord()
	case len(l.Choices) > 0 || l.Object == "chat.completion":
		c, err := l.chatCompletion.completion()
		rec.Completion = c
		return rec, layoutChat, err
	}
	layout := layoutConversations
	if l.Status != "" {
		layout = layoutSpecForge
		if l.Status != "success" {
			return nil, layout, fmt.Errorf("SpecForge status %q (%s): not a completion (regenerate_train_data.py keeps these in its _error and _skipped files)", l.Status, errorText(l.Error))
		}
	}
	turns := rec.Messages
	if len(l.Conversations) > 0 {
		var err error
		if turns, err = readTurns(l.Conversations); err != nil {
			return nil, layout, err
		}
	}
	return l.lastTurnRecord(turns, layout)
}

// batchRecord is the record of an OpenAI/vLLM batch output line: custom_id
// names the prompt, response.body is a chat completion.
func (l *foreignLine) batchRecord() (*record.Record, string, error) {
	rec := &l.Record
	if l.Response == nil {
		return nil, layoutBatch, fmt.Errorf("batch output %q has no response (error: %s)", l.CustomID, errorText(l.Error))
	}
	if l.Response.StatusCode != 200 || l.Response.Body == nil {
		return nil, layoutBatch, fmt.Errorf("batch output %q: the request failed (status %d): %s", l.CustomID, l.Response.StatusCode, errorText(l.Error))
	}
	if rec.ID == "" || strings.HasPrefix(rec.ID, "batch_req_") {
		rec.ID = l.CustomID // the Batch API's own line id names no prompt
	}
	c, err := l.Response.Body.completion()
	rec.Completion = c
	return rec, layoutBatch, err
}

// lastTurnRecord makes the record of a conversation ending with the
// assistant's answer: the turns before it are the prompt, it the
// completion.
func (l *foreignLine) lastTurnRecord(turns []record.Message, layout string) (*record.Record, string, error) {
	rec := &l.Record
	if len(turns) == 0 {
		return nil, "", errors.New(`no completion: want "completion" (pipe's records), "conversations" or "messages" ending with an assistant turn, "choices" (a chat completion) or "custom_id" and "response" (batch output)`)
	}
	last := turns[len(turns)-1]
	if last.Role != "assistant" && len(l.Conversations) == 0 {
		return nil, "", fmt.Errorf("no \"completion\" (the messages end with a %q turn, not an assistant's answer; set require_completion = false to read prompts-only records)", last.Role)
	}
	if last.Role != "assistant" {
		return nil, layout, fmt.Errorf("no \"completion\", and the last turn is %q, not an assistant's answer (want a final assistant turn; set require_completion = false to read prompts-only records)", last.Role)
	}
	if last.Name != "" {
		return nil, layout, fmt.Errorf("the final assistant turn has a name (%q), which a completion does not carry", last.Name)
	}
	rec.Messages = turns[:len(turns)-1]
	rec.Completion = splitThink(last.Content, last.ReasoningContent)
	rec.Completion.ToolCalls = last.ToolCalls
	if rec.ID == "" {
		rec.ID = contentID(rec.Messages, rec.Tools) // as read-prompts names the same prompt
	}
	return rec, layout, nil
}

// completion is the first choice of a chat completion.
func (c *chatCompletion) completion() (*record.Completion, error) {
	switch len(c.Choices) {
	case 0:
		return nil, errors.New("chat completion has no choices")
	case 1:
	default:
		return nil, fmt.Errorf("chat completion has %d choices: one completion a record (n = 1) is supported", len(c.Choices))
	}
	ch := c.Choices[0]
	out := splitThink(ch.Message.Content, ch.Message.ReasoningContent)
	calls, err := parseToolCalls(1, ch.Message.ToolCalls)
	if err != nil {
		return nil, fmt.Errorf("choices[0].message: %v", strings.TrimPrefix(err.Error(), "turn 1: "))
	}
	out.ToolCalls = calls
	out.FinishReason = ch.FinishReason
	if u := c.Usage; u != nil {
		out.PromptTokens, out.CompletionTokens, out.ReasoningTokens = u.PromptTokens, u.CompletionTokens, u.ReasoningTokens
		if d := u.CompletionTokensDetails; d != nil && d.ReasoningTokens > 0 {
			out.ReasoningTokens = d.ReasoningTokens
		}
	}
	if c.Model != "" {
		out.Request = map[string]any{"model": c.Model}
	}
	return out, nil
}

// splitThink is an answer with its reasoning: given apart (a reasoning
// parser's reasoning_content), or inside <think>…</think> at the start of
// the content, as a server without a reasoning parser returns it. An
// unclosed <think> is left in the answer, where validate-thinking rejects it.
func splitThink(content, reasoning string) *record.Completion {
	c := &record.Completion{Answer: content, Reasoning: reasoning}
	if reasoning != "" {
		return c
	}
	body := strings.TrimLeft(content, " \t\r\n")
	if rest, ok := strings.CutPrefix(body, "<think>"); ok {
		if think, answer, closed := strings.Cut(rest, "</think>"); closed {
			c.Reasoning = strings.Trim(think, "\n")
			c.Answer = strings.TrimLeft(answer, "\n")
		}
	}
	return c
}

// errorText is a JSON error field as text: a string, an object's
// message, or the JSON.
func errorText(raw json.RawMessage) string {
	if len(raw) == 0 || string(raw) == "null" {
		return "no error given"
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var o struct {
		Message string `json:"message"`
	}
	if json.Unmarshal(raw, &o) == nil && o.Message != "" {
		return o.Message
	}
	return string(raw)
}
