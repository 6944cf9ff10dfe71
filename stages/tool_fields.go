package stages

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/pipe-dev/pipe/pipeline/record"
)

// The tool-use fields of a conversation, as the readers of prompts and
// conversations take them (read-prompts, read-completions):
//
//   - "tools" beside the messages: a JSON array of objects (OpenAI's
//     [{"type": "function", "function": {...}}], or whatever objects the
//     chat template reads), or a string holding one (LLaMA-Factory's
//     ShareGPT, and what SpecForge's loader also parses); kept as the
//     array, compact, key order and numbers as written. null: none.
//   - a message's "tool_calls" (assistant turns only): a list of
//     {"id", "type", "function": {"name", "arguments"}}, or a string
//     holding one (pipe's conversations layout writes it so); a call written
//     flat, {"name", "arguments"}, is kept in that form with type
//     "function". arguments stay as given: a JSON string that string, an
//     object that object.
//   - a message's "tool_call_id" (tool turns only) and "name" (any turn).
//   - ShareGPT's {"from": "function_call", "value": "<JSON of a call or a
//     list of calls>"} turn is an assistant turn with those tool_calls and
//     no content; "observation", "tool" and "function" turns are tool turns.
//
// Any other key of a message, a call or its function is an error naming it:
// pipe carries every field of a message or refuses the line.

// messageKeys are the keys a message may have, for the error that names
// one it may not.
const messageKeys = "role, content, reasoning_content, tool_calls, tool_call_id, name (or ShareGPT's from, value)"

// unknownMessageField is the error for a key of the n-th turn pipe does not carry.
func unknownMessageField(n int, key string) error {
	return fmt.Errorf("turn %d: field %q is not one pipe carries (a message has %s); remove it or rename it", n, key, messageKeys)
}

// parseTools reads a line's "tools" (raw JSON): the compact array, nil
// for null or absent.
func parseTools(raw []byte) (json.RawMessage, error) {
	switch kind(raw) {
	case 0, 'n':
		return nil, nil
	case '"':
		s := stringText(raw)
		if len(bytes.TrimSpace(s)) == 0 {
			return nil, nil
		}
		if !json.Valid(s) || kind(bytes.TrimSpace(s)) != '[' {
			return nil, errors.New(`"tools" is a string that does not hold a JSON array of tool schemas`)
		}
		raw = bytes.TrimSpace(s)
	case '[':
	default:
		return nil, errors.New(`"tools" must be a list of tool schemas (objects), or a string holding one`)
	}
	var err error
	i := 0
	eachIn(raw, '[', func(_ string, el []byte) bool {
		if kind(el) != '{' {
			err = fmt.Errorf(`"tools"[%d] must be an object (a tool schema)`, i)
			return false
		}
		i++
		return true
	})
	if err != nil {
		return nil, err
	}
	if i == 0 {
		return nil, nil
	}
	return compactJSON(raw), nil
}

// compactJSON is valid JSON raw without white space outside strings, in
// new memory.
func compactJSON(raw []byte) json.RawMessage {
	var b bytes.Buffer
	b.Grow(len(raw))
	if json.Compact(&b, raw) != nil {
		return json.RawMessage(bytes.Clone(raw))
	}
	return b.Bytes()
}

// parseToolCalls reads the n-th turn's tool_calls (raw JSON): a list of
// calls, a string holding one (as the conversations layout writes it and
// SpecForge's _sanitize_message reads it), or null.
func parseToolCalls(n int, raw []byte) ([]record.ToolCall, error) {
	if kind(raw) == '"' {
		if s := bytes.TrimSpace(stringText(raw)); json.Valid(s) && kind(s) == '[' {
			raw = s
		}
	}
	switch kind(raw) {
	case 0, 'n':
		return nil, nil
	case '[':
	default:
		return nil, fmt.Errorf("turn %d: tool_calls must be a list of {id, type, function: {name, arguments}} objects", n)
	}
	var calls []record.ToolCall
	var err error
	eachIn(raw, '[', func(_ string, el []byte) bool {
		var c record.ToolCall
		if c, err = parseToolCall(fmt.Sprintf("turn %d: tool_calls[%d]", n, len(calls)), el); err != nil {
			return false
		}
		calls = append(calls, c)
		return true
	})
	return calls, err
}

// parseToolCall reads one call, OpenAI's {"id", "type", "function":
// {"name", "arguments"}} or the flat {"name", "arguments"}; where names
// it in errors.
func parseToolCall(where string, raw []byte) (record.ToolCall, error) {
	var c record.ToolCall
	if kind(raw) != '{' {
		return c, fmt.Errorf("%s must be an object {id, type, function: {name, arguments}}", where)
	}
	function, name, arguments, err := readCallFields(where, raw, &c)
	if err != nil {
		return c, err
	}
	switch {
	case function != nil && (name != nil || arguments != nil):
		return c, fmt.Errorf("%s has both \"function\" and a flat name/arguments", where)
	case function != nil:
		if name, arguments, err = readFunctionFields(where, function); err != nil {
			return c, err
		}
		where += ".function"
	case c.Type == "":
		c.Type = "function" // the flat form, kept in OpenAI's
	}
	c.Function, err = callFunction(where, name, arguments)
	return c, err
}

// readCallFields reads a call object's fields: its id and type into c,
// and its function, or the flat form's name and arguments, as raw JSON.
func readCallFields(where string, raw []byte, c *record.ToolCall) (function, name, arguments []byte, err error) {
	eachIn(raw, '{', func(key string, v []byte) bool {
		switch {
		case strings.EqualFold(key, "id"):
			c.ID, err = optString(where, "id", v)
		case strings.EqualFold(key, "type"):
			c.Type, err = optString(where, "type", v)
		case strings.EqualFold(key, "function"):
			function = v
		case strings.EqualFold(key, "name"):
			name = v
		case strings.EqualFold(key, "arguments"):
			arguments = v
		default:
			err = fmt.Errorf("%s: field %q is not one pipe carries (a tool call has id, type, function: {name, arguments})", where, key)
		}
		return err == nil
	})
	return function, name, arguments, err
}

// readFunctionFields reads a call's function object {name, arguments}
// as raw JSON.
func readFunctionFields(where string, function []byte) (name, arguments []byte, err error) {
	if kind(function) != '{' {
		return nil, nil, fmt.Errorf("%s: function must be an object {name, arguments}", where)
	}
	eachIn(function, '{', func(key string, v []byte) bool {
		switch {
		case strings.EqualFold(key, "name"):
			name = v
		case strings.EqualFold(key, "arguments"):
			arguments = v
		default:
			err = fmt.Errorf("%s.function: field %q is not one pipe carries (a function has name, arguments)", where, key)
		}
		return err == nil
	})
	return name, arguments, err
}

// callFunction checks a call's name (a non-empty string) and arguments (a
// JSON string or an object, kept as given).
func callFunction(where string, name, arguments []byte) (record.FunctionCall, error) {
	var f record.FunctionCall
	if kind(name) != '"' || len(stringText(name)) == 0 {
		return f, fmt.Errorf("%s: name must be a non-empty string", where)
	}
	f.Name = string(stringText(name))
	switch kind(arguments) {
	case '"', '{':
		f.Arguments = compactJSON(arguments)
	default:
		return f, fmt.Errorf("%s: arguments must be a JSON string or an object (as given)", where)
	}
	return f, nil
}

// optString is a string field's text; null is "".
func optString(where, field string, v []byte) (string, error) {
	switch kind(v) {
	case 'n':
		return "", nil
	case '"':
		return string(stringText(v)), nil
	}
	return "", fmt.Errorf("%s: %s must be a string", where, field)
}

// shareGPTCalls reads the value of a ShareGPT function_call turn: a
// string holding a call or a list of calls ({"name", "arguments"}), or
// such an object or list itself.
func shareGPTCalls(n int, value []byte) ([]record.ToolCall, error) {
	raw := value
	if kind(value) == '"' {
		raw = bytes.TrimSpace(stringText(value))
		if !json.Valid(raw) {
			return nil, fmt.Errorf("turn %d: a function_call turn's value must hold the call as JSON ({\"name\", \"arguments\"})", n)
		}
	}
	switch kind(raw) {
	case '{':
		c, err := parseToolCall(fmt.Sprintf("turn %d: function_call", n), raw)
		if err != nil {
			return nil, err
		}
		return []record.ToolCall{c}, nil
	case '[':
		calls, err := parseToolCalls(n, raw)
		if err == nil && len(calls) == 0 {
			err = fmt.Errorf("turn %d: a function_call turn with no call", n)
		}
		return calls, err
	}
	return nil, fmt.Errorf("turn %d: a function_call turn's value must hold the call as JSON ({\"name\", \"arguments\"})", n)
}

// hashTools adds a conversation's tool-use fields to a content id's hash
// (contentID): nothing for a conversation without them, so such ids are
// what they were before pipe carried tools.
func hashTools(h interface{ Write([]byte) (int, error) }, m *record.Message) {
	if !m.HasToolFields() {
		return
	}
	// A letter first: a message's own part starts with a digit, so the
	// two cannot be read one for the other.
	fmt.Fprintf(h, "n%d:%si%d:%s", len(m.Name), m.Name, len(m.ToolCallID), m.ToolCallID)
	for _, c := range m.ToolCalls {
		fmt.Fprintf(h, "c%d:%s%d:%s%d:%s%d:%s", len(c.ID), c.ID, len(c.Type), c.Type, len(c.Function.Name), c.Function.Name, len(c.Function.Arguments), c.Function.Arguments)
	}
}
