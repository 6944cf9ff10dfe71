package stages

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/pipe-dev/pipe/pipeline"
)

func init() {
	pipeline.Register(pipeline.Spec{
		Kind:    "read-prompts",
		Summary: "stream prompts from a JSONL file (messages, ShareGPT conversations or prompt)",
		Description: `Each line is one prompt in one of the common shapes:
  {"id": "a1", "messages": [{"role": "user", "content": "..."}]}        (OpenAI)
  {"id": "a1", "conversations": [{"from": "human", "value": "..."}]}    (ShareGPT)
  {"id": "a1", "prompt": "..."}
The id comes from id_field; a row without one gets a hash of its
conversation, so the same prompt has the same id in every run. Other fields
are kept in the record's meta. The file is streamed, never loaded whole.
A malformed line stops the run with its file and line (on_bad_line = "fail"),
or is counted and written to RUN_DIR/rejected/STAGE.jsonl ("skip").`,
		Source:   true,
		Config:   readPromptsConfig{},
		Outputs:  []string{"out"},
		Produces: []string{pipeline.FieldMessages},
		KeySettings: func(c any) string {
			cfg := c.(*readPromptsConfig)
			s := pipeline.DisplayPath(cfg.Path)
			if cfg.Limit > 0 {
				s += fmt.Sprintf(", limit %d", cfg.Limit)
			}
			return s
		},
		Example: `[[stage]]
id   = "prompts"
kind = "read-prompts"
path = "prompts.jsonl"
on_bad_line = "skip"

[[stage]]
id    = "out"
kind  = "write-jsonl"
input = "prompts"
path  = "out/prompts.jsonl"
`,
		New: func(c any) (pipeline.Stage, error) { return &readPrompts{cfg: *c.(*readPromptsConfig)}, nil },
	})
}

type readPromptsConfig struct {
	// Path is the JSONL file, relative to the pipeline file. Required.
	Path string `toml:"path" op:"true" required:"true" path:"in" doc:"JSONL file of prompts, relative to the pipeline file"`
	// IDField names the field holding the record id. Default "id".
	IDField string `toml:"id_field" default:"id" doc:"field holding the prompt id; rows without it get a content hash"`
	// OnBadLine is "fail" (default) or "skip".
	OnBadLine string `toml:"on_bad_line" op:"true" default:"fail" enum:"fail|skip" doc:"what a malformed line does: stop the run, or be counted and set aside"`
	// Limit stops after this many prompts; 0 (default) reads all.
	Limit int64 `toml:"limit" op:"true" default:"0" min:"0" doc:"read at most this many prompts; 0 reads all"`
	// AllowEmpty lets a file with no prompt end the run well. Default false.
	AllowEmpty bool `toml:"allow_empty" op:"true" default:"false" doc:"a file with no prompt is fine (default false: it fails the run, as an empty or truncated input usually is a mistake)"`
}

type readPrompts struct {
	cfg readPromptsConfig
}

var _ pipeline.Source = (*readPrompts)(nil)

func (r *readPrompts) Read(ctx context.Context, out pipeline.Emitter) error {
	src := jsonlSource{Path: r.cfg.Path, OnBadLine: r.cfg.OnBadLine, Limit: r.cfg.Limit,
		Parse:      func(line []byte) (*pipeline.Record, error) { return parsePromptLine(line, r.cfg.IDField) },
		QuickID:    func(line []byte) (string, bool) { return leadingID(line, r.cfg.IDField) },
		Check:      emptyPrompt,
		AllowEmpty: r.cfg.AllowEmpty}
	return src.Read(ctx, out)
}

// parsePromptLine decodes one prompt in any supported shape.
func parsePromptLine(line []byte, idField string) (*pipeline.Record, error) {
	var row map[string]json.RawMessage
	if err := json.Unmarshal(line, &row); err != nil {
		return nil, fmt.Errorf("invalid JSON: %v", jsonErrText(err))
	}
	rec := &pipeline.Record{}
	var shape string
	var err error
	switch {
	case row["messages"] != nil:
		shape = "messages"
		rec.Messages, err = parseMessages(row["messages"])
	case row["conversations"] != nil:
		shape = "conversations"
		rec.Messages, err = parseMessages(row["conversations"])
	case row["prompt"] != nil:
		shape = "prompt"
		var p string
		if err = json.Unmarshal(row["prompt"], &p); err != nil {
			err = errors.New(`"prompt" must be a string`)
		}
		rec.Messages = []pipeline.Message{{Role: "user", Content: p}}
	default:
		return nil, errors.New(`no prompt: want "messages", "conversations" or "prompt"`)
	}
	if err != nil {
		return nil, err
	}
	if len(rec.Messages) == 0 {
		return nil, fmt.Errorf("%q is empty", shape)
	}
	if raw, ok := row[idField]; ok && string(raw) != "null" {
		var s string
		if json.Unmarshal(raw, &s) == nil {
			rec.ID = s
		} else if _, err := strconv.ParseFloat(string(raw), 64); err == nil {
			rec.ID = string(raw)
		} else {
			return nil, fmt.Errorf("%q must be a string or a number", idField)
		}
		if rec.ID == "" {
			return nil, fmt.Errorf("%q is empty", idField)
		}
	} else {
		rec.ID = contentID(rec.Messages)
	}
	for k, v := range row {
		if k == shape || k == idField {
			continue
		}
		if rec.Meta == nil {
			rec.Meta = map[string]any{}
		}
		rec.Meta[k] = v
	}
	return rec, nil
}

// emptyPrompt rejects a prompt whose turn to be answered (the last user
// message) is empty or only whitespace: it would only spend GPU time.
func emptyPrompt(rec *pipeline.Record) (string, string) {
	for i := len(rec.Messages) - 1; i >= 0; i-- {
		if m := rec.Messages[i]; m.Role == "user" {
			if strings.TrimSpace(m.Content) == "" {
				return "empty_prompt", fmt.Sprintf("the user turn to answer (message %d) is empty", i+1)
			}
			return "", ""
		}
	}
	return "", ""
}

// leadingID reads the id of a line whose first key is field, e.g.
// {"id":"a1",...} or {"id": 17, ...}, without parsing the rest; it gives up
// (false) on anything else, such as an escaped string, and the full parse
// decides.
func leadingID(line []byte, field string) (string, bool) {
	rest, ok := bytes.CutPrefix(line, []byte(`{"`+field+`"`))
	if !ok {
		return "", false
	}
	rest = bytes.TrimLeft(rest, " \t")
	if rest, ok = bytes.CutPrefix(rest, []byte(":")); !ok {
		return "", false
	}
	rest = bytes.TrimLeft(rest, " \t")
	switch {
	case len(rest) > 0 && rest[0] == '"':
		end := bytes.IndexByte(rest[1:], '"')
		if end <= 0 || bytes.IndexByte(rest[1:end+1], '\\') >= 0 {
			return "", false
		}
		return string(rest[1 : end+1]), true
	case len(rest) > 0 && (rest[0] == '-' || ('0' <= rest[0] && rest[0] <= '9')):
		end := bytes.IndexAny(rest, ",} \t")
		if end < 0 {
			return "", false
		}
		return string(rest[:end]), true
	}
	return "", false
}

// wireMessage accepts OpenAI (role/content) and ShareGPT (from/value) turns;
// content may be a string or a list of {"type":"text","text":...} parts.
type wireMessage struct {
	Role             string          `json:"role"`
	From             string          `json:"from"`
	Content          json.RawMessage `json:"content"`
	Value            json.RawMessage `json:"value"`
	ReasoningContent string          `json:"reasoning_content"`
}

var shareGPTRoles = map[string]string{
	"human": "user", "user": "user", "gpt": "assistant", "assistant": "assistant",
	"chatgpt": "assistant", "bing": "assistant", "bard": "assistant", "model": "assistant",
	"system": "system", "tool": "tool", "function": "tool", "observation": "tool",
}

// plainMessage is the common case, decoded without the RawMessage copies
// wireMessage needs for content parts.
type plainMessage struct {
	Role             string `json:"role"`
	From             string `json:"from"`
	Content          string `json:"content"`
	Value            string `json:"value"`
	ReasoningContent string `json:"reasoning_content"`
}

func parseMessages(raw json.RawMessage) ([]pipeline.Message, error) {
	var plain []plainMessage
	if json.Unmarshal(raw, &plain) == nil {
		out := make([]pipeline.Message, 0, len(plain))
		ok := true
		for _, w := range plain {
			role := w.Role
			if role == "" {
				role = w.From
			}
			norm, known := shareGPTRoles[strings.ToLower(role)]
			content := w.Content
			if content == "" {
				content = w.Value
			}
			if !known || content == "" {
				ok = false // the slow path gives the precise error, or handles null content
				break
			}
			out = append(out, pipeline.Message{Role: norm, Content: content, ReasoningContent: w.ReasoningContent})
		}
		if ok {
			return out, nil
		}
	}
	var wire []wireMessage
	if err := json.Unmarshal(raw, &wire); err != nil {
		return nil, fmt.Errorf("messages must be a list of {role, content} objects: %v", jsonErrText(err))
	}
	out := make([]pipeline.Message, 0, len(wire))
	for i, w := range wire {
		role := w.Role
		if role == "" {
			role = w.From
		}
		norm, ok := shareGPTRoles[strings.ToLower(role)]
		if !ok {
			return nil, fmt.Errorf("turn %d: unknown role %q (want system, user, assistant, tool; or human, gpt)", i+1, role)
		}
		content := w.Content
		if content == nil {
			content = w.Value
		}
		text, err := contentText(content)
		if err != nil {
			return nil, fmt.Errorf("turn %d: %v", i+1, err)
		}
		out = append(out, pipeline.Message{Role: norm, Content: text, ReasoningContent: w.ReasoningContent})
	}
	return out, nil
}

func contentText(raw json.RawMessage) (string, error) {
	if raw == nil || string(raw) == "null" {
		return "", errors.New("no content")
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, nil
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if err := json.Unmarshal(raw, &parts); err != nil {
		return "", errors.New("content must be a string or a list of text parts")
	}
	var b strings.Builder
	for _, p := range parts {
		if p.Type != "text" && p.Type != "" {
			return "", fmt.Errorf("content part of type %q is not supported (text only)", p.Type)
		}
		b.WriteString(p.Text)
	}
	return b.String(), nil
}

// contentID is a stable id from the conversation itself, so the same prompt
// gets the same id in every run and every input shape.
func contentID(msgs []pipeline.Message) string {
	h := sha256.New()
	for _, m := range msgs {
		fmt.Fprintf(h, "%d:%s%d:%s", len(m.Role), m.Role, len(m.Content), m.Content)
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil)[:16])
}

func jsonErrText(err error) string {
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return fmt.Sprintf("%v (at byte %d)", se, se.Offset)
	}
	return err.Error()
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
