package chat

import (
	"bytes"
	"encoding/json"
	"fmt"
	"github.com/pipe-dev/pipe/internal/termsafe"

	"github.com/ardanlabs/jinja"
)

// ToolCall is one element of an assistant message's "tool_calls", in the
// OpenAI shape {"id", "type", "function": {"name", "arguments"}}. Qwen3's
// template reads tool_call.function.name and .arguments only.
type ToolCall struct {
	ID       string       `json:"id,omitempty"`
	Type     string       `json:"type,omitempty"` // "function" in OpenAI's API
	Function ToolFunction `json:"function"`
}

// ToolFunction is the function a ToolCall names.
type ToolFunction struct {
	Name string `json:"name"`
	// Arguments is the JSON value as given: a JSON string (OpenAI's API
	// sends the arguments encoded as a string, which Qwen3's template
	// prints as is, spacing and all) or an object (printed with tojson:
	// ", " and ": " separators, keys in their order). Nil is null.
	Arguments json.RawMessage `json:"arguments"`
}

// NewToolCalls returns {"role": "assistant", "content": content,
// "tool_calls": calls}. Pass "" rather than no content: Qwen3's template
// concatenates the content, which jinja2 refuses for null.
func NewToolCalls(content string, calls []ToolCall) Message {
	return NewMessage("assistant", content).With("tool_calls", calls)
}

// NewToolResult returns {"role": "tool", "content": content,
// "tool_call_id": id, "name": name}, the id and name left out when empty.
// Qwen3 renders the content alone, in <tool_response> inside a user turn.
func NewToolResult(content, id, name string) Message {
	m := NewMessage("tool", content)
	if id != "" {
		m = m.With("tool_call_id", id)
	}
	if name != "" {
		m = m.With("name", name)
	}
	return m
}

// ToolCalls returns the message's "tool_calls" (none when absent or null).
// An element that is not an object, or a function that is not one, is an
// error naming its index.
func (m Message) ToolCalls() ([]ToolCall, error) {
	raw := m.Get("tool_calls")
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var elems []json.RawMessage
	if err := json.Unmarshal(raw, &elems); err != nil {
		return nil, fmt.Errorf("tool_calls: want a list of objects")
	}
	calls := make([]ToolCall, len(elems))
	for i, e := range elems {
		if err := json.Unmarshal(e, &calls[i]); err != nil || !bytes.HasPrefix(bytes.TrimSpace(e), []byte("{")) {
			return nil, fmt.Errorf("tool_calls[%d]: want an object with a \"function\" object of \"name\" and \"arguments\"", i)
		}
	}
	return calls, nil
}

// parseArguments replaces, in a converted assistant message (a value of
// its own, not shared), each tool_calls[i].function.arguments that is a
// string with the JSON object it encodes (Options.ParseToolArguments).
// Calls without a "function" object are left as they are, as SGLang and
// SpecForge leave them.
func parseArguments(item jinja.Value) error {
	if role(item) != "assistant" {
		return nil
	}
	calls, ok := item.AsDict().Get("tool_calls")
	if !ok || !calls.IsList() {
		return nil
	}
	for i, c := range calls.AsList().Items {
		if !c.IsDict() {
			continue
		}
		fn, ok := c.AsDict().Get("function")
		if !ok || !fn.IsDict() {
			continue
		}
		args, ok := fn.AsDict().Get("arguments")
		if !ok || !args.IsString() {
			continue
		}
		v, err := fromJSON([]byte(args.AsString()))
		if err != nil || !v.IsDict() {
			return fmt.Errorf("tool_calls[%d].function.arguments: want a JSON object in the string, got %s", i, termsafe.Cut(args.AsString(), 60))
		}
		fn.AsDict().Set("arguments", v)
	}
	return nil
}
