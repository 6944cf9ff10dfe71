package stages

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Tool calls in a model's text, as Qwen3 writes them (its chat template's
// system prompt asks for them so, and it renders earlier calls so): one
// block per call, after the turn's content,
//
//	<tool_call>
//	{"name": "get_weather", "arguments": {"city": "Paris"}}
//	</tool_call>
//
// blocks separated by a newline. On the native /generate API they stay in
// the answer's text; on the chat API SGLang's qwen25 tool-call parser
// (python/sglang/srt/function_call/qwen25_detector.py) takes them out:
// it finds "<tool_call>\n" … "\n</tool_call>" (the first close after an
// open ends the block), json.loads the body stripped of white space and
// keeps a call whose "name" is one of the request's tools; the content is
// the text before the first block, and text after or between blocks is
// dropped. What pipe takes for a well-formed call is what both agree on:
//
//   - the block has Qwen3's layout: a newline right after <tool_call> and
//     right before </tool_call> (SGLang's parser does not see a call
//     written otherwise, and would leave it in the content);
//   - its body is one JSON object (a list of calls, which SGLang's parser
//     would take, is never what Qwen3 writes) with a non-empty string
//     "name" and an "arguments" object. Arguments given as a string
//     holding an object are refused: Qwen3's template asks for
//     <args-json-object> and always renders one, and SGLang's parser
//     passes a string on as it is, so the chat API's arguments would be
//     the string encoded twice (a client's json.loads gets a string, not
//     the arguments). "parameters" instead of "arguments" (which SGLang's
//     parser also reads) is refused: Qwen3's format has no such key.
//     Other keys are let be (the parser ignores them);
//   - only white space between and after the blocks, every <tool_call>
//     closed, and no </tool_call> that closes nothing.
//
// The calls the chat API gives apart from the text (completion.tool_calls,
// OpenAI's form) have arguments as an object or as a string holding one.

const (
	toolCallOpen  = "<tool_call>"
	toolCallClose = "</tool_call>"
)

// textToolCall is one well-formed <tool_call> block of a text.
type textToolCall struct {
	// Start and End are the block's bytes in the text, tags included.
	Start, End int
	Name       string
	// Arguments is the arguments object as written.
	Arguments json.RawMessage
}

// toolCallProblem is what is wrong with a text's tool calls.
type toolCallProblem struct {
	// Call is the 1-based index of the call, 0 for text outside any call.
	Call int
	// Name is the call's name, when it has one.
	Name string
	What string
}

func (p *toolCallProblem) Error() string {
	if p.Call == 0 {
		return p.What
	}
	s := "tool call " + strconv.Itoa(p.Call)
	if p.Name != "" {
		s += " (" + quoteClipped(p.Name, 64) + ")"
	}
	return s + ": " + p.What
}

// mentionsToolCall reports whether text has a <tool_call> or </tool_call>
// tag: one scan, so that a text without tool calls costs next to nothing.
func mentionsToolCall(text string) bool {
	return strings.Contains(text, "tool_call>")
}

// splitTextToolCalls splits text as Qwen3 writes a turn that calls tools:
// the content before the first <tool_call>, and the calls. It stops at the
// first problem. cut says the text was cut by a length limit: a last block
// the cut left open is no problem, and is not among the calls.
func splitTextToolCalls(text string, cut bool) (content string, calls []textToolCall, problem *toolCallProblem) {
	i := strings.Index(text, toolCallOpen)
	if i < 0 {
		return text, nil, strayClose(text, 0)
	}
	content = text[:i]
	if p := strayClose(content, 0); p != nil {
		return content, nil, p
	}
	for n := 1; ; n++ {
		call, open, p := readToolCallBlock(text, i, n)
		if open && cut {
			return content, calls, nil
		}
		if p != nil {
			return content, calls, p
		}
		calls = append(calls, call)
		k, p := afterToolCall(text, call, n, cut)
		if p != nil || k < 0 {
			return content, calls, p
		}
		i = call.End + k
	}
}

// strayClose is the problem of a </tool_call> in s that closes nothing,
// s starting at byte base of the text; nil when s has none.
func strayClose(s string, base int) *toolCallProblem {
	j := strings.Index(s, toolCallClose)
	if j < 0 {
		return nil
	}
	return &toolCallProblem{What: fmt.Sprintf("%s at byte %d closes no %s", toolCallClose, base+j, toolCallOpen)}
}

// readToolCallBlock reads the n-th call's block, whose <tool_call> is at
// byte i of text. open says the block is never closed; the problem then
// says so.
func readToolCallBlock(text string, i, n int) (call textToolCall, open bool, p *toolCallProblem) {
	bodyStart := i + len(toolCallOpen)
	rest := text[bodyStart:]
	end := strings.Index(rest, toolCallClose)
	if end < 0 {
		return call, true, &toolCallProblem{Call: n, What: fmt.Sprintf("%s at byte %d is never closed (no %s after it)", toolCallOpen, i, toolCallClose)}
	}
	if next := strings.Index(rest[:end], toolCallOpen); next >= 0 {
		return call, false, &toolCallProblem{Call: n, What: fmt.Sprintf("another %s at byte %d opens before it is closed", toolCallOpen, bodyStart+next)}
	}
	body := rest[:end]
	name, args, what := parseToolCallBody(body)
	if what == "" && (!strings.HasPrefix(body, "\n") || !strings.HasSuffix(body, "\n")) {
		what = fmt.Sprintf("not in Qwen3's layout %q…%q (SGLang's tool-call parser does not see it): %s",
			toolCallOpen+"\n", "\n"+toolCallClose, quoteClipped(toolCallOpen+body+toolCallClose, 80))
	}
	if what != "" {
		return call, false, &toolCallProblem{Call: n, Name: name, What: what}
	}
	return textToolCall{Start: i, End: bodyStart + end + len(toolCallClose), Name: name, Arguments: args}, false, nil
}

// afterToolCall checks the text between the n-th call and the next
// <tool_call>, or the end: white space only, or with cut the start of a
// tag the cut left. It returns where the next block starts, from the
// call's end; -1 when none does.
func afterToolCall(text string, call textToolCall, n int, cut bool) (int, *toolCallProblem) {
	after := text[call.End:]
	k := strings.Index(after, toolCallOpen)
	between := after
	if k >= 0 {
		between = after[:k]
	}
	if t := strings.TrimSpace(between); t != "" && !(cut && k < 0 && strings.HasPrefix(toolCallOpen, t)) {
		if p := strayClose(between, call.End); p != nil {
			return k, p
		}
		return k, &toolCallProblem{Call: n, Name: call.Name, What: fmt.Sprintf("text after it, %s (SGLang's parser drops it; Qwen3's template writes the content before the calls)", quoteClipped(t, 60))}
	}
	return k, nil
}

// parseToolCallBody reads the body of a <tool_call> block: one JSON
// object with a non-empty string "name" and an "arguments" object. what
// says what is wrong, "" when nothing is; name is set when it could be read.
func parseToolCallBody(body string) (name string, args json.RawMessage, what string) {
	b := strings.TrimSpace(body)
	switch {
	case b == "":
		return "", nil, "its body is empty"
	case b[0] == '[':
		return "", nil, "its body is a JSON list, not one call object (Qwen3 writes one call per " + toolCallOpen + "): " + quoteClipped(b, 80)
	case b[0] != '{':
		return "", nil, "its body is not a JSON object: " + quoteClipped(b, 80)
	}
	// The members read in place (the last of a repeated name wins, as
	// in Python's json.loads); encoding/json words what is wrong.
	var rawName, params []byte
	err := eachIn([]byte(b), '{', func(key string, v []byte) bool {
		switch key {
		case "name":
			rawName = v
		case "arguments":
			args = v
		case "parameters":
			params = v
		}
		return true
	})
	if err != nil {
		var v any
		var se *json.SyntaxError
		if err := json.Unmarshal([]byte(b), &v); errors.As(err, &se) {
			return "", nil, fmt.Sprintf("its body is not valid JSON: %v at byte %d of %s", se, se.Offset, quoteClipped(b, 80))
		}
		return "", nil, "its body is not valid JSON: " + quoteClipped(b, 80)
	}
	switch kind(rawName) {
	case 0:
		return "", nil, `it has no "name": ` + quoteClipped(b, 80)
	case '"':
		name = string(stringText(rawName))
	default:
		return "", nil, `its "name" is not a string: ` + quoteClipped(string(rawName), 60)
	}
	if name == "" {
		return "", nil, `its "name" is empty`
	}
	switch kind(args) {
	case '{':
	case 0:
		if params != nil {
			return name, nil, `it has "parameters", not "arguments" (Qwen3's format is {"name": …, "arguments": {…}})`
		}
		return name, nil, `it has no "arguments" (Qwen3 writes {} for a call without any)`
	case '"':
		return name, nil, `its "arguments" is a string, not an object (Qwen3 writes the object itself; SGLang would pass the string on encoded twice): ` + quoteClipped(string(args), 60)
	default:
		return name, nil, `its "arguments" is not an object: ` + quoteClipped(string(args), 60)
	}
	return name, args, ""
}

// checkCallArguments says what is wrong with a parsed call's arguments
// (OpenAI's form: an object, or a string holding one), "" when nothing is.
func checkCallArguments(raw json.RawMessage) string {
	b := strings.TrimSpace(string(raw))
	if b == "" || b == "null" {
		return "it has no arguments"
	}
	if b[0] == '"' {
		var s string
		if err := json.Unmarshal([]byte(b), &s); err != nil {
			return "its arguments are not valid JSON: " + quoteClipped(b, 60)
		}
		if t := strings.TrimSpace(s); t == "" || t[0] != '{' || !json.Valid([]byte(t)) {
			return "its arguments are a string that does not hold a JSON object: " + quoteClipped(s, 60)
		}
		return ""
	}
	if b[0] != '{' || !json.Valid([]byte(b)) {
		return "its arguments are not a JSON object: " + quoteClipped(b, 60)
	}
	return ""
}

// toolCallBlockIndex is the byte offset in text of the first <tool_call>
// that opens a call (the next character but white space is "{"), or -1.
// A mention of the tag in prose ("wrap it in <tool_call> tags") is none.
func toolCallBlockIndex(text string) int {
	for off := 0; ; {
		i := strings.Index(text[off:], toolCallOpen)
		if i < 0 {
			return -1
		}
		at := off + i
		off = at + len(toolCallOpen)
		if rest := strings.TrimLeft(text[off:], " \t\r\n"); strings.HasPrefix(rest, "{") {
			return at
		}
	}
}

// declaredToolNames reads the names of a conversation's tools (each
// schema's function.name, or name for a flat one {"name", "parameters"}).
// ok is false when some schema has neither: the names a call may use are
// then not known.
func declaredToolNames(tools json.RawMessage) (names []string, ok bool) {
	if len(tools) == 0 {
		return nil, true
	}
	ok = true
	err := eachIn(tools, '[', func(_ string, schema []byte) bool {
		var name, fn []byte
		if eachIn(schema, '{', func(key string, v []byte) bool {
			switch key {
			case "name":
				name = v
			case "function":
				fn = v
			}
			return true
		}) != nil {
			ok = false
			return false
		}
		if kind(fn) == '{' {
			name = nil
			eachIn(fn, '{', func(key string, v []byte) bool {
				if key == "name" {
					name = v
				}
				return true
			})
		}
		if kind(name) != '"' || len(name) == 2 {
			ok = false
			return false
		}
		names = append(names, string(stringText(name)))
		return true
	})
	if err != nil || !ok {
		return nil, false
	}
	return names, true
}

// quoteClipped is s quoted as Go quotes strings (control characters and
// other unprintable runes escaped: safe on a terminal), cut to about n
// bytes at a rune's start, with "…" where it was cut.
func quoteClipped(s string, n int) string {
	if len(s) <= n {
		return strconv.Quote(s)
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return strconv.Quote(s[:n]) + "…"
}

// quoteNames lists names quoted, at most max of them, saying how many
// more there are.
func quoteNames(names []string, max int) string {
	var b strings.Builder
	for i, n := range names {
		if i == max {
			fmt.Fprintf(&b, " and %d more", len(names)-max)
			break
		}
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(quoteClipped(n, 40))
	}
	return b.String()
}
