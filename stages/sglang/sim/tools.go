package sim

import (
	"bytes"
	"encoding/json"
	"io"
	"regexp"
	"strconv"
	"strings"
)

// Tool calls. A prompt declares tools through the chat API's "tools"
// member, or on /generate through the Qwen3 tools block its rendered
// prompt holds ("<tools>\n" + one JSON tool per line + "\n</tools>"; an
// input_ids prompt is read through Config.Tokenizer, so without one its
// tools go unseen). An answer to such a prompt calls one of them with
// probability Config.ToolCalls (drawn from the prompt's content and the
// seed, like the lengths): after the thinking, optionally a short answer
// and "\n\n", then Qwen3's
//
//	<tool_call>
//	{"name": "NAME", "arguments": {"city": "word", "days": 3}}
//	</tool_call>
//
// and EOS, NAME one of the declared tools and the arguments one value
// per property of its parameters schema (at most maxToolArgs; a string a
// corpus word, an integer 1..9, a number, a boolean, [] or {} by the
// property's "type"), written as json.dumps writes them (", " and ": ").
// FaultBadToolCall makes it a malformed call instead: not JSON (its
// closing brace missing) or naming an undeclared tool, one or the other
// by the prompt's content.
//
// On the chat API with Config.ToolCallParser "qwen25" (SGLang's
// --tool-call-parser) and a request with tools whose tool_choice is not
// "none", the answer's content goes through SGLang's Qwen25Detector
// (function_call/qwen25_detector.py, 2026) when it holds "<tool_call>\n":
// the content becomes the text before the first block, stripped; each
// "<tool_call>\n…\n</tool_call>" block whose JSON parses and names a
// declared tool becomes message.tool_calls[i] = {"id": "call_" + 24 hex
// digits (a function of the prompt, the seed and i, where SGLang draws a
// uuid), "index": i, "type": "function", "function": {"name", "arguments":
// the arguments as json.dumps text}}, the others are dropped; and
// finish_reason "stop" becomes "tool_calls" with matched_stop null
// (serving_chat.py _process_tool_calls), even when every call was
// dropped. Without the parser the blocks stay in content as the model
// wrote them.

// toolSpec is one declared tool: its name and its parameters' properties
// in the schema's order.
type toolSpec struct {
	name   string
	params []toolParam
}

type toolParam struct{ name, typ string }

const (
	maxTools    = 256 // declared tools read from one prompt
	maxToolArgs = 6   // arguments of a simulated call
)

// Qwen3's tool-call markers (added tokens of its tokenizer).
const (
	idToolCallStart = 151657 // <tool_call>
	idToolCallEnd   = 151658 // </tool_call>
)

// parseToolList reads a JSON array of tools (OpenAI's {"type":
// "function", "function": {"name", "parameters"}}, or {"name",
// "parameters"}); an element without a name is skipped.
func parseToolList(raw []byte) []toolSpec {
	var elems []json.RawMessage
	if json.Unmarshal(raw, &elems) != nil {
		return nil
	}
	var out []toolSpec
	for _, e := range elems {
		if t, ok := parseTool(e); ok && len(out) < maxTools {
			out = append(out, t)
		}
	}
	return out
}

func parseTool(raw []byte) (toolSpec, bool) {
	var t struct {
		Name       string          `json:"name"`
		Parameters json.RawMessage `json:"parameters"`
		Function   *struct {
			Name       string          `json:"name"`
			Parameters json.RawMessage `json:"parameters"`
		} `json:"function"`
	}
	if json.Unmarshal(raw, &t) != nil {
		return toolSpec{}, false
	}
	if f := t.Function; f != nil {
		t.Name, t.Parameters = f.Name, f.Parameters
	}
	if t.Name == "" {
		return toolSpec{}, false
	}
	return toolSpec{name: t.Name, params: schemaProperties(t.Parameters)}, true
}

// schemaProperties are the properties of a JSON schema object, in order.
func schemaProperties(raw []byte) []toolParam {
	var s struct {
		Properties json.RawMessage `json:"properties"`
	}
	if json.Unmarshal(raw, &s) != nil || len(s.Properties) == 0 || s.Properties[0] != '{' {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(s.Properties))
	if _, err := dec.Token(); err != nil {
		return nil
	}
	var out []toolParam
	for dec.More() && len(out) < maxToolArgs {
		k, err := dec.Token()
		if err != nil {
			return out
		}
		var p struct {
			Type json.RawMessage `json:"type"`
		}
		if dec.Decode(&p) != nil {
			return out
		}
		var typ string
		if json.Unmarshal(p.Type, &typ) != nil {
			var types []string // ["string", "null"]
			if json.Unmarshal(p.Type, &types) == nil && len(types) > 0 {
				typ = types[0]
			}
		}
		name, _ := k.(string)
		out = append(out, toolParam{name, typ})
	}
	return out
}

// toolsInText reads the tools of Qwen3's tools block in a rendered prompt.
func toolsInText(text string) []toolSpec {
	i := strings.LastIndex(text, "<tools>\n")
	if i < 0 {
		return nil
	}
	block := text[i+len("<tools>\n"):]
	j := strings.Index(block, "\n</tools>")
	if j < 0 {
		return nil
	}
	var out []toolSpec
	for _, line := range strings.Split(block[:j], "\n") {
		if t, ok := parseTool([]byte(line)); ok && len(out) < maxTools {
			out = append(out, t)
		}
	}
	return out
}

// qwen3ToolsSystem is the system turn's text Qwen3's template renders for
// tools (each element printed by tojson, as pyDumps does), after the
// system message's own text when there is one.
func qwen3ToolsSystem(system string, hasSystem bool, tools []byte) string {
	var b strings.Builder
	if hasSystem {
		b.WriteString(system + "\n\n")
	}
	b.WriteString("# Tools\n\nYou may call one or more functions to assist with the user query.\n\n" +
		"You are provided with function signatures within <tools></tools> XML tags:\n<tools>")
	var elems []json.RawMessage
	_ = json.Unmarshal(tools, &elems)
	for _, e := range elems {
		b.WriteString("\n" + pyDumps(e))
	}
	b.WriteString("\n</tools>\n\nFor each function call, return a json object with function name and arguments within " +
		"<tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": <args-json-object>}\n</tool_call>")
	return b.String()
}

// toolCall is the call an answer makes: its text, "<tool_call>\n" + JSON +
// "\n</tool_call>".
type toolCall struct{ text string }

// drawToolCall decides whether the answer of the prompt whose seeded hash
// is h calls a tool, and writes the call; nil for none.
func drawToolCall(cfg *Config, h uint64, tools []toolSpec, faults faultSet) *toolCall {
	if len(tools) == 0 {
		return nil
	}
	bad := faults.has(FaultBadToolCall)
	if !bad && unitFloat(mix(h, 20)) >= cfg.toolCallShare() {
		return nil
	}
	t := tools[mix(h, 21)%uint64(len(tools))]
	name := t.name
	if bad && mix(h, 22)%2 == 1 {
		name = undeclaredName(tools)
	}
	var b strings.Builder
	b.WriteString(`<tool_call>` + "\n" + `{"name": `)
	b.WriteString(pyString(name))
	b.WriteString(`, "arguments": {`)
	for k, p := range t.params {
		if k > 0 {
			b.WriteString(", ")
		}
		b.WriteString(pyString(p.name) + ": " + argValue(p.typ, mix(h, 23, uint64(k))))
	}
	b.WriteString("}")
	if !(bad && name == t.name) {
		b.WriteString("}") // a bad call with a declared name is not JSON: its last brace is missing
	}
	b.WriteString("\n</tool_call>")
	return &toolCall{b.String()}
}

// undeclaredName is a tool name none of tools has.
func undeclaredName(tools []toolSpec) string {
	name := "undeclared_tool"
	for taken := true; taken; {
		taken = false
		for _, t := range tools {
			if t.name == name {
				name += "_"
				taken = true
			}
		}
	}
	return name
}

// argValue is a simulated argument of a JSON schema type.
func argValue(typ string, h uint64) string {
	switch typ {
	case "integer":
		return strconv.Itoa(1 + int(h%9))
	case "number":
		return strconv.Itoa(1+int(h%9)) + ".5"
	case "boolean":
		return strconv.FormatBool(h%2 == 0)
	case "array":
		return "[" + pyString(words[h%uint64(len(words))]) + "]"
	case "object":
		return "{}"
	}
	return pyString(words[h%uint64(len(words))])
}

// toolCallCorpus is a call's text as tokens: without a tokenizer
// "<tool_call>" and "</tool_call>" by Qwen3's ids, "\n" 198, and each
// space-led piece of the JSON a hashed id as corpus words are (a
// tokenizer re-encodes the whole output anyway).
func toolCallCorpus(c *toolCall) *corpus {
	cp := newCorpus()
	body := strings.TrimSuffix(strings.TrimPrefix(c.text, "<tool_call>\n"), "\n</tool_call>")
	cp.add("<tool_call>", idToolCallStart)
	cp.add("\n", idNewline)
	for len(body) > 0 {
		n := strings.IndexByte(body[1:], ' ') + 1
		if n == 0 {
			n = len(body)
		}
		cp.add(body[:n], wordID(body[:n]))
		body = body[n:]
	}
	cp.add("\n", idNewline)
	cp.add("</tool_call>", idToolCallEnd)
	return cp
}

// pyString is s as Python's json.dumps(s, ensure_ascii=False) writes it.
func pyString(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch r {
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		case '\t':
			b.WriteString(`\t`)
		case '\b':
			b.WriteString(`\b`)
		case '\f':
			b.WriteString(`\f`)
		default:
			if r < 0x20 {
				b.WriteString(`\u00` + string("0123456789abcdef"[r>>4]) + string("0123456789abcdef"[r&15]))
			} else {
				b.WriteRune(r)
			}
		}
	}
	b.WriteByte('"')
	return b.String()
}

// pyDumps is the JSON value raw as Python's json.dumps(v,
// ensure_ascii=False) writes it (", " and ": " separators, keys in their
// order), numbers as written; "" when raw is not JSON.
func pyDumps(raw []byte) string {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var b strings.Builder
	var stack []pyContainer
	for {
		tok, err := dec.Token()
		if err == io.EOF && len(stack) == 0 {
			return b.String()
		}
		if err != nil {
			return ""
		}
		if d, ok := tok.(json.Delim); ok && (d == '}' || d == ']') {
			stack = stack[:len(stack)-1]
			b.WriteRune(rune(d))
			continue
		}
		if n := len(stack); n > 0 {
			stack[n-1].separate(&b)
		}
		if d, ok := tok.(json.Delim); ok {
			b.WriteRune(rune(d))
			stack = append(stack, pyContainer{obj: d == '{'})
			continue
		}
		writePyScalar(&b, tok)
	}
}

// pyContainer is an object or list pyDumps is inside; count is how many
// tokens of it were written (an object's keys and values both count).
type pyContainer struct {
	obj   bool
	count int
}

// separate writes what json.dumps puts before the container's next token:
// ": " before a value, ", " before any other token but the first.
func (c *pyContainer) separate(b *strings.Builder) {
	switch {
	case c.obj && c.count%2 == 1:
		b.WriteString(": ")
	case c.count > 0:
		b.WriteString(", ")
	}
	c.count++
}

// writePyScalar writes a string, number, bool or null token as json.dumps
// does.
func writePyScalar(b *strings.Builder, tok json.Token) {
	switch v := tok.(type) {
	case string:
		b.WriteString(pyString(v))
	case json.Number:
		b.WriteString(v.String())
	case bool:
		b.WriteString(strconv.FormatBool(v))
	case nil:
		b.WriteString("null")
	}
}

// parsedCall is a call SGLang's parser took out of the content.
type parsedCall struct{ name, arguments string }

var toolBlockRe = regexp.MustCompile(`(?s)<tool_call>\n(.*?)\n</tool_call>`)

// parseQwen25 is SGLang's Qwen25Detector.detect_and_parse over content
// (see the comment at the top): the text before the first block,
// stripped, and the calls that parse and name a declared tool.
func parseQwen25(content string, tools []toolSpec) (normal string, calls []parsedCall) {
	idx := strings.Index(content, "<tool_call>\n")
	normal = strings.TrimSpace(content[:idx])
	for _, m := range toolBlockRe.FindAllStringSubmatch(content, -1) {
		var act struct {
			Name       *string         `json:"name"`
			Parameters json.RawMessage `json:"parameters"`
			Arguments  json.RawMessage `json:"arguments"`
		}
		if json.Unmarshal([]byte(strings.TrimSpace(m[1])), &act) != nil || act.Name == nil || !declared(tools, *act.Name) {
			continue
		}
		args := act.Parameters
		if len(args) == 0 || isFalsy(args) {
			args = act.Arguments
		}
		if len(args) == 0 {
			args = []byte("{}")
		}
		calls = append(calls, parsedCall{*act.Name, pyDumps(args)})
	}
	return normal, calls
}

// isFalsy says whether a JSON value is one Python's "or" skips.
func isFalsy(v []byte) bool {
	switch string(bytes.TrimSpace(v)) {
	case "null", "false", "0", `""`, "{}", "[]":
		return true
	}
	return false
}

func declared(tools []toolSpec, name string) bool {
	for _, t := range tools {
		if t.name == name && name != "" {
			return true
		}
	}
	return false
}

// toolCallID is the id of the answer's i-th parsed call: "call_" and 24
// hex digits, as SGLang's (a uuid4's first 24), here a function of the
// prompt and the seed.
func toolCallID(h uint64, i int) string {
	const hex = "0123456789abcdef"
	var b [24]byte
	x, y := mix(h, 31, uint64(i)), mix(h, 32, uint64(i))
	for k := 0; k < 16; k++ {
		b[k] = hex[(x>>(4*k))&15]
	}
	for k := 16; k < 24; k++ {
		b[k] = hex[(y>>(4*(k-16)))&15]
	}
	return "call_" + string(b[:])
}
