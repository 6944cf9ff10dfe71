package stages

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/pipe-dev/pipe/pipeline/record"
)

// A prompt line: its shapes (messages, conversations, prompt; a batch
// request), its id, its turns and their content, read with jsontext
// without decoding the whole line. read-prompts reads prompts with it;
// read-completions and the tool-call rules read messages with it.

// promptLine judges one line of a prompts file, in any supported shape: its
// id (needID, or build) and, with build, its record; or what is wrong with
// it. A turn to answer that is empty or only whitespace is an empty_prompt
// problem: it would only spend GPU time (the record is returned with it when
// building, to be rejected). The line is read in place with jsontext (see
// eachIn), which checks it as strictly as encoding/json in the same pass;
// what is wrong with a line that is not JSON is said in encoding/json's
// words.
func promptLine(line []byte, idField string, build, needID bool) (*record.Record, string, *lineProblem) {
	pf, prob := scanPromptLine(line, idField)
	if prob != nil {
		return nil, "", prob
	}
	var buf [4]turnSpan
	turns, prob := pf.turns(buf[:0])
	if prob != nil {
		return nil, "", prob
	}
	if prob := checkHistoryCalls(turns, pf.tools); prob != nil {
		return nil, "", prob
	}
	idText, prob := promptID(pf.idRaw, idField)
	if prob != nil {
		return nil, "", prob
	}
	var id string
	if build || needID {
		id = string(idText)
	}
	var rec *record.Record
	if build || (needID && idText == nil) {
		rec = turnsRecord(id, turns)
		rec.Tools = pf.tools
		if idText == nil {
			id = contentID(rec.Messages, rec.Tools)
			rec.ID = id
		}
	}
	if build {
		pf.keepMeta(rec, line, idField)
	} else {
		rec = nil
	}
	for i := len(turns) - 1; i >= 0; i-- {
		if turns[i].role == "user" {
			if blankContent(turns[i].content) {
				return rec, id, &lineProblem{"empty_prompt", fmt.Sprintf("the user turn to answer (message %d) is empty", i+1)}
			}
			break
		}
	}
	return rec, id, nil
}

// checkHistoryCalls judges the tool calls of a conversation's earlier
// turns as the chat template will read them: arguments that are not a
// JSON object (or a string holding one) fail its rendering, and a call of
// a tool the conversation's tools do not declare teaches a call the model
// could not make.
func checkHistoryCalls(turns []turnSpan, tools json.RawMessage) *lineProblem {
	names, known := declaredToolNames(tools)
	known = known && len(names) > 0
	for n, t := range turns {
		for k, call := range t.toolCalls {
			if what := checkCallArguments(call.Function.Arguments); what != "" && what != "it has no arguments" {
				return badLine("turn %d: tool call %d (%s): %s", n+1, k+1, quoteClipped(call.Function.Name, 40), what)
			}
			if known && !slices.Contains(names, call.Function.Name) {
				return badLine("turn %d: tool call %d calls %s, which the conversation's tools do not declare (%s)", n+1, k+1,
					quoteClipped(call.Function.Name, 40), quoteNames(names, 5))
			}
		}
	}
	return nil
}

// badLine is a reasonBadLine problem.
func badLine(format string, a ...any) *lineProblem {
	return &lineProblem{reasonBadLine, fmt.Sprintf(format, a...)}
}

// promptFields are the raw JSON values of a prompt line's keys that
// promptLine reads: the prompt under each shape, the id, and a batch
// request's custom_id and body.
type promptFields struct {
	shapes                [3][]byte // messages, conversations, prompt
	idRaw, customID, body []byte
	tools                 json.RawMessage // checked and compact (parseTools)
	shape                 int             // the index in shapes of the prompt; -1: none
	batch                 bool            // an OpenAI/vLLM batch input line
}

// scanPromptLine reads the keys of line, a JSON object, that promptLine
// needs, and finds the prompt's shape.
func scanPromptLine(line []byte, idField string) (*promptFields, *lineProblem) {
	pf := &promptFields{shape: -1}
	var toolsRaw []byte
	err := eachIn(line, '{', func(key string, v []byte) bool {
		for i, name := range promptShapes {
			if key == name {
				pf.shapes[i] = v
			}
		}
		switch key {
		case idField:
			pf.idRaw = v
		case "custom_id":
			pf.customID = v
		case "body":
			pf.body = v
		case "tools":
			toolsRaw = v
		}
		return true
	})
	switch {
	case err == nil:
	case json.Valid(line):
		return nil, badLine("not a JSON object")
	default:
		return nil, badLine("invalid JSON: %s", syntaxError(line))
	}
	for i := range pf.shapes {
		if pf.shapes[i] != nil {
			pf.shape = i
			break
		}
	}
	// An OpenAI/vLLM batch input line: {"custom_id", "method", "url",
	// "body": {"model", "messages", ...}} (the Batch API's request input
	// object); custom_id is the id, body.messages the prompt.
	pf.batch = pf.shape == -1 && pf.body != nil
	if pf.batch {
		if prob := pf.batchPrompt(idField, &toolsRaw); prob != nil {
			return nil, prob
		}
	}
	if toolsRaw != nil && idField != "tools" {
		var err error
		if pf.tools, err = parseTools(toolsRaw); err != nil {
			return nil, badLine("%v", err)
		}
	}
	return pf, nil
}

// batchPrompt takes a batch request's body.messages as the prompt, its
// body.tools as the tools, and its custom_id as the id unless the line has
// its own "id".
func (pf *promptFields) batchPrompt(idField string, tools *[]byte) *lineProblem {
	if kind(pf.body) != '{' {
		return badLine(`"body" must be an object (a batch request's body)`)
	}
	var bodyPrompt []byte
	eachIn(pf.body, '{', func(key string, v []byte) bool {
		switch key {
		case "messages":
			pf.shapes[0] = v
		case "prompt":
			bodyPrompt = v
		case "tools":
			*tools = v
		}
		return true
	})
	switch {
	case pf.shapes[0] != nil:
		pf.shape = 0
	case bodyPrompt != nil:
		return badLine(`batch request: body has "prompt", not "messages": a /v1/completions request is not supported; want /v1/chat/completions requests (body.messages)`)
	default:
		return badLine(`batch request: body has no "messages"; want /v1/chat/completions requests (body.messages)`)
	}
	if pf.idRaw == nil && idField == "id" {
		pf.idRaw = pf.customID
	}
	return nil
}

// turns checks the prompt and appends its turns to turns: a "prompt"
// string is one user turn.
func (pf *promptFields) turns(turns []turnSpan) ([]turnSpan, *lineProblem) {
	switch pf.shape {
	case -1:
		return nil, badLine(`no prompt: want "messages", "conversations" or "prompt" (or a batch request's "body"."messages")`)
	case 2:
		if k := kind(pf.shapes[2]); k != '"' && k != 'n' {
			return nil, badLine(`"prompt" must be a string`)
		}
		return append(turns, turnSpan{role: "user", content: pf.shapes[2]}), nil
	}
	turns, err := parseTurns(pf.shapes[pf.shape], turns)
	if err != nil {
		return nil, badLine("%v", err)
	}
	if len(turns) == 0 {
		return nil, badLine("%q is empty", promptShapes[pf.shape])
	}
	return turns, nil
}

// promptID is the text of the line's id (a string or a number), nil when
// it gives none.
func promptID(idRaw []byte, idField string) ([]byte, *lineProblem) {
	if idRaw == nil || kind(idRaw) == 'n' {
		return nil, nil
	}
	var idText []byte
	switch kind(idRaw) {
	case '"':
		idText = stringText(idRaw)
	case '0':
		idText = idRaw
	default:
		return nil, badLine("%q must be a string or a number", idField)
	}
	if len(idText) == 0 {
		return nil, badLine("%q is empty", idField)
	}
	return idText, nil
}

// turnsRecord is the record of id with turns as its messages.
func turnsRecord(id string, turns []turnSpan) *record.Record {
	rec := &record.Record{ID: id, Messages: make([]record.Message, len(turns))}
	for i, t := range turns {
		rec.Messages[i] = record.Message{Role: t.role, Content: string(turnText(t.content)), ReasoningContent: string(turnText(t.reasoning)),
			ToolCalls: t.toolCalls}
		if t.toolCallID != nil {
			rec.Messages[i].ToolCallID = string(turnText(t.toolCallID))
		}
		if t.name != nil {
			rec.Messages[i].Name = string(turnText(t.name))
		}
	}
	return rec
}

// keepMeta keeps the line's other keys in rec.Meta, as raw JSON: all but
// the id and the prompt; of a batch request, its body's settings without
// the prompt already taken.
func (pf *promptFields) keepMeta(rec *record.Record, line []byte, idField string) {
	eachIn(line, '{', func(key string, v []byte) bool {
		if key == idField || key == promptShapes[pf.shape] || (pf.batch && key == "custom_id") || (key == "tools" && pf.tools != nil) {
			return true
		}
		if pf.batch && key == "body" {
			// The request's settings, without the prompt already taken.
			var b map[string]json.RawMessage
			if json.Unmarshal(v, &b) == nil {
				delete(b, "messages")
				if pf.tools != nil {
					delete(b, "tools")
				}
				if rest, err := json.Marshal(b); err == nil {
					if rec.Meta == nil {
						rec.Meta = map[string]any{}
					}
					rec.Meta["body"] = json.RawMessage(rest)
				}
			}
			return true
		}
		if rec.Meta == nil {
			rec.Meta = map[string]any{}
		}
		rec.Meta[key] = json.RawMessage(bytes.Clone(v))
		return true
	})
}

// promptShapes are the keys a prompt can be under, in order of precedence.
var promptShapes = [3]string{"messages", "conversations", "prompt"}

// turnSpan is one checked turn of a conversation: its role, and the raw
// JSON of its content (a string, a list of text parts, or null),
// reasoning, tool_call_id and name (each a string or null; nil when
// absent); and its tool calls, read.
type turnSpan struct {
	role                                 string
	content, reasoning, toolCallID, name []byte
	toolCalls                            []record.ToolCall
}

var errTurns = errors.New("messages must be a list of {role, content} objects")

// parseTurns checks a list of OpenAI (role/content) or ShareGPT
// (from/value) turns and appends them to turns. As encoding/json matches
// struct fields, the keys' case does not matter.
func parseTurns(raw []byte, turns []turnSpan) ([]turnSpan, error) {
	switch kind(raw) {
	case 'n':
		return turns, nil
	case '[':
	default:
		return nil, errTurns
	}
	var err error
	eachIn(raw, '[', func(_ string, el []byte) bool {
		var t turnSpan
		if t, err = parseTurn(len(turns)+1, el); err != nil {
			return false
		}
		turns = append(turns, t)
		return true
	})
	if err != nil {
		return nil, err
	}
	return turns, nil
}

// parseTurn checks el, the n-th turn (from 1), an OpenAI (role/content)
// or ShareGPT (from/value) object, and returns its role (normalized),
// content and reasoning.
func parseTurn(n int, el []byte) (turnSpan, error) {
	if kind(el) != '{' {
		return turnSpan{}, errTurns
	}
	var r rawTurn
	var unknown string
	eachIn(el, '{', func(key string, v []byte) bool {
		if !r.set(key, v) {
			unknown = key
			return false
		}
		return true
	})
	if unknown != "" {
		return turnSpan{}, unknownMessageField(n, unknown)
	}
	norm, err := turnRole(n, r.role, r.from)
	if err != nil {
		return turnSpan{}, err
	}
	content := r.content
	if content == nil {
		content = r.value
	}
	t := turnSpan{role: norm, reasoning: r.reasoning, toolCallID: r.toolCallID, name: r.name}
	if content, err = t.readCalls(n, content, r.toolCalls); err != nil {
		return turnSpan{}, err
	}
	if err := t.checkCallRoles(n); err != nil {
		return turnSpan{}, err
	}
	if t.content, err = turnContent(n, content, t.toolCalls != nil); err != nil {
		return turnSpan{}, err
	}
	if err := t.checkStrings(n); err != nil {
		return turnSpan{}, err
	}
	return t, nil
}

// rawTurn is a turn object's fields as raw JSON; nil when absent.
type rawTurn struct {
	role, from, content, value, reasoning, toolCalls, toolCallID, name []byte
}

// set keeps v as the field key names (in any case); false when a turn
// has no such field.
func (r *rawTurn) set(key string, v []byte) bool {
	switch {
	case strings.EqualFold(key, "role"):
		r.role = v
	case strings.EqualFold(key, "from"):
		r.from = v
	case strings.EqualFold(key, "content"):
		r.content = v
	case strings.EqualFold(key, "value"):
		r.value = v
	case strings.EqualFold(key, "reasoning_content"):
		r.reasoning = v
	case strings.EqualFold(key, "tool_calls"):
		r.toolCalls = v
	case strings.EqualFold(key, "tool_call_id"):
		r.toolCallID = v
	case strings.EqualFold(key, "name"):
		r.name = v
	default:
		return false
	}
	return true
}

// readCalls reads the n-th turn's tool calls into t and returns what is
// left of content as its text. A ShareGPT function_call turn's value is
// its call: it becomes an assistant turn with no text.
func (t *turnSpan) readCalls(n int, content, toolCalls []byte) ([]byte, error) {
	var err error
	if t.role != roleFunctionCall {
		t.toolCalls, err = parseToolCalls(n, toolCalls)
		return content, err
	}
	t.role = "assistant"
	if t.toolCalls, err = shareGPTCalls(n, content); err != nil {
		return nil, err
	}
	if toolCalls != nil {
		return nil, fmt.Errorf("turn %d: a function_call turn with tool_calls too", n)
	}
	return nil, nil
}

// checkCallRoles checks that only an assistant turn calls tools and only a
// tool turn answers a call.
func (t *turnSpan) checkCallRoles(n int) error {
	switch {
	case t.toolCalls != nil && t.role != "assistant":
		return fmt.Errorf("turn %d: tool_calls on a %s turn (only an assistant turn calls tools)", n, t.role)
	case kind(t.toolCallID) != 0 && kind(t.toolCallID) != 'n' && t.role != "tool":
		return fmt.Errorf("turn %d: tool_call_id on a %s turn (only a tool turn answers a call)", n, t.role)
	}
	return nil
}

// turnContent is the n-th turn's text, checked. A turn that calls tools
// may have none (OpenAI's content null).
func turnContent(n int, content []byte, calls bool) ([]byte, error) {
	if k := kind(content); calls && (k == 0 || k == 'n') {
		return nil, nil
	}
	if e := checkContent(content); e != nil {
		return nil, fmt.Errorf("turn %d: %v", n, e)
	}
	return content, nil
}

// checkStrings checks that the n-th turn's reasoning_content, tool_call_id
// and name are strings, null or absent.
func (t *turnSpan) checkStrings(n int) error {
	for _, f := range [...]struct {
		name string
		raw  []byte
	}{{"reasoning_content", t.reasoning}, {"tool_call_id", t.toolCallID}, {"name", t.name}} {
		if k := kind(f.raw); k != 0 && k != '"' && k != 'n' {
			return fmt.Errorf("turn %d: %s must be a string", n, f.name)
		}
	}
	return nil
}

// roleFunctionCall is the normalized role of a ShareGPT function_call
// turn, which parseTurn makes an assistant turn with tool_calls.
const roleFunctionCall = "function_call"

// turnRole is the n-th turn's role, normalized: the first non-empty of its
// role and from (raw JSON strings, or absent or null).
func turnRole(n int, role, from []byte) (string, error) {
	var name []byte
	for _, r := range [2][]byte{role, from} {
		switch kind(r) {
		case 0, 'n':
			continue
		case '"':
		default:
			return "", fmt.Errorf("turn %d: role must be a string", n)
		}
		if name = stringText(r); len(name) > 0 {
			break
		}
	}
	norm, ok := shareGPTRoles[string(name)]
	if !ok {
		norm, ok = shareGPTRoles[strings.ToLower(string(name))]
	}
	if !ok {
		return "", fmt.Errorf("turn %d: unknown role %q (want system, user, assistant, tool; or human, gpt, function_call, observation)", n, name)
	}
	return norm, nil
}

var errContent = errors.New("content must be a string or a list of text parts")

// checkContent accepts a string or a list of {"type":"text","text":...} parts.
func checkContent(raw []byte) error {
	switch kind(raw) {
	case 0, 'n':
		return errors.New("no content")
	case '"':
		return nil
	case '[':
	default:
		return errContent
	}
	var err error
	eachIn(raw, '[', func(_ string, el []byte) bool {
		if kind(el) != '{' {
			err = errContent
			return false
		}
		eachIn(el, '{', func(key string, v []byte) bool {
			switch k := kind(v); {
			case strings.EqualFold(key, "type"):
				switch {
				case k == 'n':
				case k != '"':
					err = errContent
				default:
					if t := stringText(v); len(t) > 0 && string(t) != "text" {
						err = fmt.Errorf("content part of type %q is not supported (text only)", t)
					}
				}
			case strings.EqualFold(key, "text"):
				if k != '"' && k != 'n' {
					err = errContent
				}
			}
			return err == nil
		})
		return err == nil
	})
	return err
}

// blankContent reports whether checked content has no text but white
// space. A string whose first byte past its white space is neither an
// escape nor its end holds text, and is judged without decoding it.
func blankContent(raw []byte) bool {
	if kind(raw) == '"' {
		if t := bytes.TrimSpace(raw[1 : len(raw)-1]); len(t) > 0 && t[0] != '\\' {
			return false
		}
	}
	return len(bytes.TrimSpace(turnText(raw))) == 0
}

// turnText is the text of checked content (see checkContent) or reasoning:
// a string's, or the parts' joined; nil for null or absent.
func turnText(raw []byte) []byte {
	switch kind(raw) {
	case '"':
		return stringText(raw)
	case '[':
		var b []byte
		eachIn(raw, '[', func(_ string, el []byte) bool {
			eachIn(el, '{', func(key string, v []byte) bool {
				if strings.EqualFold(key, "text") && kind(v) == '"' {
					b, _ = jsontext.AppendUnquote(b, v)
				}
				return true
			})
			return true
		})
		return b
	}
	return nil
}

// lineOptions make jsontext accept what encoding/json accepts: a name twice
// in an object (the last one counts), and bytes that are not UTF-8 (the
// reader rejects those itself, naming the byte) or unpaired surrogate
// escapes (decoded as U+FFFD).
var lineOptions = []jsontext.Options{jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true)}

// decoders are reused across lines: the reader and the pass ahead of it
// judge lines at the same time, each with its own.
var decoders = sync.Pool{New: func() any { return jsontext.NewDecoder(new(bytes.Buffer)) }}

var errNotOpen = errors.New("not the value wanted")

// eachIn calls fn with each member (name, value) of the object, or each
// element ("", value) of the array, that raw holds, open being '{' or '['
// for which one it must be, until fn returns false. The values are raw's
// own bytes, without the white space around them. Unless fn stopped it, it
// checks that raw is exactly one valid JSON value; an error if not.
//
// A Decoder over a bytes.Buffer reads the bytes in place, and where a value
// ends is its InputOffset, so nothing is copied.
func eachIn(raw []byte, open byte, fn func(name string, v []byte) bool) error {
	d := decoders.Get().(*jsontext.Decoder)
	defer decoders.Put(d)
	d.Reset(bytes.NewBuffer(raw), lineOptions...)
	tok, err := d.ReadToken()
	if err != nil {
		return err
	}
	if byte(tok.Kind()) != open {
		return errNotOpen
	}
	for {
		if k := d.PeekKind(); k == '}' || k == ']' {
			break
		}
		var name string
		if open == '{' {
			tok, err := d.ReadToken()
			if err != nil {
				return err
			}
			name = tok.String()
		}
		v, err := d.ReadValue()
		if err != nil {
			return err
		}
		end := int(d.InputOffset())
		if !fn(name, raw[end-len(v):end]) {
			return nil
		}
	}
	if _, err := d.ReadToken(); err != nil {
		return err
	}
	if _, err := d.ReadToken(); err != io.EOF {
		return errors.New("more after the value")
	}
	return nil
}

// kind is the kind of a raw JSON value: '{', '[', '"', 't', 'f', 'n', or
// '0' for any number; 0 for an absent one.
func kind(raw []byte) byte { return byte(jsontext.Value(raw).Kind()) }

// stringText is the text of a raw, valid JSON string.
func stringText(raw []byte) []byte {
	b, _ := jsontext.AppendUnquote(nil, raw)
	return b
}

// syntaxError says what is wrong with a line that is not JSON, in
// encoding/json's words.
func syntaxError(line []byte) string {
	var v any
	if err := json.Unmarshal(line, &v); err != nil {
		return jsonErrText(err)
	}
	return "not one JSON value"
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

var shareGPTRoles = map[string]string{
	"human": "user", "user": "user", "gpt": "assistant", "assistant": "assistant",
	"chatgpt": "assistant", "bing": "assistant", "bard": "assistant", "model": "assistant",
	"system": "system", "tool": "tool", "function": "tool", "observation": "tool",
	"function_call": roleFunctionCall,
}

// contentID is a stable id from the conversation itself, so the same prompt
// gets the same id in every run and every input shape. Tool-use fields
// count where there are any (two prompts that differ in their tools are
// two prompts); a conversation without them has the id it always had.
func contentID(msgs []record.Message, tools json.RawMessage) string {
	h := sha256.New()
	for i := range msgs {
		m := &msgs[i]
		fmt.Fprintf(h, "%d:%s%d:%s", len(m.Role), m.Role, len(m.Content), m.Content)
		hashTools(h, m)
	}
	if len(tools) > 0 {
		fmt.Fprintf(h, "t%d:%s", len(tools), tools)
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil)[:16])
}
