package trainers

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"slices"
	"sort"
	"strings"
	"unicode"
)

// SpecForgeOptions are the settings of SpecForge's loader that change what
// it makes of a file.
type SpecForgeOptions struct {
	// MaxLength is data.max_length (specforge/config/schema.py DataConfig).
	MaxLength int
	// MinLossTokens is the algorithm's minimum_loss_tokens: 2 for DFlash
	// (algorithms/model_providers.py dflash_min_loss_tokens), 1 for EAGLE3.
	MinLossTokens int
	// Adjacent is DFlash's loss_mask_filter, has_consecutive_supervised_tokens
	// (specforge/data/loss_mask.py; algorithms/dflash/providers.py).
	Adjacent bool
}

// SpecForgePrompt is one pre-tokenized prompt task, {"payload":
// {"input_ids", "loss_mask"}} (prompt_builder.py _prompt_from_record).
type SpecForgePrompt struct {
	InputIDs []int64
	LossMask []int64
}

// SpecForgeMessage is one message as ThinkingParser renders it: the keys it
// keeps (parse.py ThinkingParser.standard_keys) after _normalize_message.
type SpecForgeMessage map[string]any

// SpecForgeLoad is what SpecForge's loader made of a file.
type SpecForgeLoad struct {
	// PreTokenized: the first record has input_ids and loss_mask.
	PreTokenized bool
	Prompts      []SpecForgePrompt // the pre-tokenized route's tasks, in order
	Dropped      int               // rows dropped without a word (too few loss tokens, the filter)
	// Conversations are the raw route's rows as the chat template gets
	// them (after GeneralParser.parse's normalizing and checks), by id.
	Conversations map[string][]SpecForgeMessage
	// TemplateKwargs are the columns the raw route passes into
	// apply_chat_template as keyword arguments.
	TemplateKwargs []string
	// Tools are the raw route's tools as apply_chat_template gets them
	// (tools=...), by id; absent for a row whose tools are None (no tools
	// column, null, empty, or what SpecForge fails to parse).
	Tools map[string]any
	// Warnings are what SpecForge warns of while it drops or empties a
	// value (tools or tool calls it cannot parse), in order.
	Warnings []string
}

// LoadSpecForge reads path as SpecForge does (specforge/data/prompt_builder.py
// prepare_prompt_tasks). An error is one SpecForge would raise.
func LoadSpecForge(path string, o SpecForgeOptions) (*SpecForgeLoad, error) {
	recs, lines, err := iterRecords(path)
	if err != nil {
		return nil, err
	}
	out := &SpecForgeLoad{}
	if len(recs) == 0 {
		return out, nil // prepare_prompt_tasks: no first record, []
	}
	_, hasIDs := recs[0]["input_ids"]
	_, hasMask := recs[0]["loss_mask"]
	if hasIDs != hasMask {
		return nil, fmt.Errorf("pre-tokenized prompt record must contain both input_ids and loss_mask in %q", path)
	}
	if hasIDs {
		out.PreTokenized = true
		for i, rec := range recs {
			p, err := promptFromRecord(rec, fmt.Sprintf("%s:%d", path, lines[i]), o)
			if err != nil {
				return nil, err
			}
			if p == nil || (o.Adjacent && !hasConsecutive(p.LossMask)) {
				out.Dropped++
				continue
			}
			out.Prompts = append(out.Prompts, *p)
		}
		return out, nil
	}
	return out, rawRoute(recs, out)
}

// iterRecords is prompt_builder.py _iter_records: a JSON array, or one
// JSON object per non-blank line.
func iterRecords(path string) ([]map[string]json.RawMessage, []int, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, err
	}
	trimmed := bytes.TrimLeftFunc(data, unicode.IsSpace)
	if len(trimmed) > 0 && trimmed[0] == '[' {
		var recs []map[string]json.RawMessage
		if err := json.Unmarshal(data, &recs); err != nil {
			return nil, nil, fmt.Errorf("invalid JSON array in %q: %w", path, err)
		}
		lines := make([]int, len(recs))
		for i := range lines {
			lines[i] = i + 1
		}
		return recs, lines, nil
	}
	var recs []map[string]json.RawMessage
	var lines []int
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, 1<<30)
	for n := 1; sc.Scan(); n++ {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		if line[0] != '{' {
			return nil, nil, fmt.Errorf("JSON record in %q at line %d must be an object", path, n)
		}
		var rec map[string]json.RawMessage
		if err := json.Unmarshal(line, &rec); err != nil {
			return nil, nil, fmt.Errorf("invalid JSON in %q at line %d: %w", path, n, err)
		}
		recs = append(recs, rec)
		lines = append(lines, n)
	}
	return recs, lines, sc.Err()
}

// promptFromRecord is prompt_builder.py _prompt_from_record; nil is a row
// dropped for too few loss tokens after the cut to max_length.
func promptFromRecord(rec map[string]json.RawMessage, source string, o SpecForgeOptions) (*SpecForgePrompt, error) {
	rawIDs, ok1 := rec["input_ids"]
	rawMask, ok2 := rec["loss_mask"]
	if !ok1 || !ok2 {
		return nil, fmt.Errorf("%s must contain both input_ids and loss_mask", source)
	}
	ids, err := intSequence(rawIDs, "input_ids", source, false)
	if err != nil {
		return nil, err
	}
	mask, err := intSequence(rawMask, "loss_mask", source, true)
	if err != nil {
		return nil, err
	}
	if len(ids) != len(mask) {
		return nil, fmt.Errorf("%s has mismatched input_ids/loss_mask lengths: %d != %d", source, len(ids), len(mask))
	}
	if len(ids) == 0 {
		return nil, fmt.Errorf("%s contains an empty token sequence", source)
	}
	if o.MaxLength > 0 && len(ids) > o.MaxLength {
		ids, mask = ids[:o.MaxLength], mask[:o.MaxLength]
	}
	var sum int64
	for _, m := range mask {
		sum += m
	}
	if sum < int64(o.MinLossTokens) {
		return nil, nil
	}
	return &SpecForgePrompt{InputIDs: ids, LossMask: mask}, nil
}

// intSequence is prompt_builder.py _normalize_integer_sequence on a JSON
// value: a list (a single nested list is unwrapped) of integers — a JSON
// number with a fraction or exponent is a Python float, not Integral; a
// JSON bool is Python's bool, refused in input_ids — and 0/1 if binary.
func intSequence(raw json.RawMessage, field, source string, binary bool) ([]int64, error) {
	var list []json.RawMessage
	if err := json.Unmarshal(raw, &list); err != nil {
		return nil, fmt.Errorf("%s field %s must be a sequence", source, field)
	}
	if len(list) == 1 && bytes.HasPrefix(bytes.TrimSpace(list[0]), []byte("[")) {
		if err := json.Unmarshal(list[0], &list); err != nil {
			return nil, fmt.Errorf("%s field %s must be a sequence", source, field)
		}
	}
	out := make([]int64, len(list))
	for i, item := range list {
		v, err := intItem(item, source, field, i, binary)
		if err != nil {
			return nil, err
		}
		out[i] = v
	}
	return out, nil
}

// intItem is item i of intSequence's list.
func intItem(item json.RawMessage, source, field string, i int, binary bool) (int64, error) {
	s := strings.TrimSpace(string(item))
	switch {
	case strings.HasPrefix(s, "["):
		return 0, fmt.Errorf("%s field %s must be one-dimensional", source, field)
	case s == "true" || s == "false":
		if field == "input_ids" {
			return 0, fmt.Errorf("%s field %s[%d] must be an integer, got bool", source, field, i)
		}
		if s == "true" {
			return 1, nil
		}
		return 0, nil
	}
	var n json.Number
	if err := json.Unmarshal(item, &n); err != nil || strings.ContainsAny(s, ".eE") {
		return 0, fmt.Errorf("%s field %s[%d] must be an integer, got %s", source, field, i, s)
	}
	v, err := n.Int64()
	if err != nil {
		return 0, fmt.Errorf("%s field %s[%d] must be an integer, got %s", source, field, i, s)
	}
	if binary && v != 0 && v != 1 {
		return 0, fmt.Errorf("%s field %s[%d] must be 0 or 1, got %d", source, field, i, v)
	}
	return v, nil
}

// hasConsecutive is loss_mask.py has_consecutive_supervised_tokens.
func hasConsecutive(mask []int64) bool {
	for i := 1; i < len(mask); i++ {
		if mask[i-1] != 0 && mask[i] != 0 {
			return true
		}
	}
	return false
}

// rawRoute is the raw route: load_dataset("json") makes one column per key
// of any row (prompt_builder.py _prepare_raw_prompts), and
// preprocessing.py build_eagle3_dataset's preprocess_function needs
// "conversations", pops "id" and "tools" (a string is parsed as JSON, a
// list taken as it is, anything else is []; parse.py passes tools=None for
// an empty one) and passes the other columns into apply_chat_template
// (preprocess_conversations **kwargs); each conversation goes through
// parse.py GeneralParser.parse.
func rawRoute(recs []map[string]json.RawMessage, out *SpecForgeLoad) error {
	cols := map[string]bool{}
	for _, r := range recs {
		for k := range r {
			cols[k] = true
		}
	}
	if !cols["conversations"] {
		keys := make([]string, 0, len(cols))
		for k := range cols {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		//lint:ignore ST1005 SpecForge's own message, word for word, so a user can search for it
		return fmt.Errorf("Expected 'conversations' column for is_preformatted=False, but found columns: %v", keys)
	}
	for k := range cols {
		if k != "conversations" && k != "id" && k != "tools" {
			out.TemplateKwargs = append(out.TemplateKwargs, k)
		}
	}
	sort.Strings(out.TemplateKwargs)
	out.Conversations = map[string][]SpecForgeMessage{}
	out.Tools = map[string]any{}
	for i, r := range recs {
		var id string
		json.Unmarshal(r["id"], &id)
		if id == "" {
			id = fmt.Sprintf("#%d", i)
		}
		if tools := out.rowTools(r["tools"]); tools != nil {
			out.Tools[id] = tools
		}
		var conv []map[string]any
		if err := json.Unmarshal(r["conversations"], &conv); err != nil {
			return fmt.Errorf("row %s: conversations is not a list of objects: %w", id, err)
		}
		if len(conv) == 0 {
			continue // preprocess_conversations: `if not source: continue`
		}
		out.Conversations[id] = out.parseConversation(conv)
	}
	return nil
}

// rowTools is preprocessing.py's reading of a row's tools column, and
// parse.py's `tools=tool if tool else None`: nil is None.
func (out *SpecForgeLoad) rowTools(raw json.RawMessage) any {
	var v any
	if len(raw) == 0 || json.Unmarshal(raw, &v) != nil {
		return nil
	}
	switch t := v.(type) {
	case string:
		var parsed any
		if err := json.Unmarshal([]byte(t), &parsed); err != nil {
			out.Warnings = append(out.Warnings, fmt.Sprintf("Failed to parse tools JSON string: %.100s...", t))
			return nil
		}
		v = parsed
	case []any, nil:
	default:
		out.Warnings = append(out.Warnings, fmt.Sprintf("Unexpected tools type: %T, using empty list", t))
		return nil
	}
	if truthy(v) {
		return v
	}
	return nil
}

// truthy is Python's bool(v) for a JSON value.
func truthy(v any) bool {
	switch t := v.(type) {
	case nil:
		return false
	case bool:
		return t
	case float64:
		return t != 0
	case string:
		return t != ""
	case []any:
		return len(t) > 0
	case map[string]any:
		return len(t) > 0
	}
	return true
}

// sanitizeToolCalls is parse.py Parser._sanitize_message on a message's
// tool_calls: a string is parsed as JSON (unparseable: the key removed,
// keep false); a list keeps of each dict call its id (default ""), type
// (default "function") and function's name (default "") and arguments
// (default {}; a string parsed as JSON, {} when it is not); anything else
// is left as it is.
func (out *SpecForgeLoad) sanitizeToolCalls(v any) (_ any, keep bool) {
	if s, ok := v.(string); ok {
		if err := json.Unmarshal([]byte(s), &v); err != nil {
			out.Warnings = append(out.Warnings, "Failed to parse tool_calls JSON string, removing tool_calls")
			return nil, false
		}
	}
	list, ok := v.([]any)
	if !ok {
		return v, true
	}
	calls := []any{}
	for _, item := range list {
		tc, ok := item.(map[string]any)
		if !ok {
			continue
		}
		clean := map[string]any{"id": getOr(tc, "id", ""), "type": getOr(tc, "type", "function")}
		if fn, ok := getOr(tc, "function", map[string]any{}).(map[string]any); ok {
			name := getOr(fn, "name", "")
			args := getOr(fn, "arguments", map[string]any{})
			if s, ok := args.(string); ok {
				if err := json.Unmarshal([]byte(s), &args); err != nil {
					out.Warnings = append(out.Warnings, fmt.Sprintf("Failed to parse arguments for tool '%v': %.100s...", name, s))
					args = map[string]any{}
				}
			}
			clean["function"] = map[string]any{"name": name, "arguments": args}
		}
		calls = append(calls, clean)
	}
	return calls, true
}

// getOr is Python's dict.get(key, def).
func getOr(m map[string]any, key string, def any) any {
	if v, ok := m[key]; ok {
		return v
	}
	return def
}

// thinkingKeys is parse.py ThinkingParser.standard_keys.
var thinkingKeys = []string{"role", "content", "tool_calls", "reasoning_content", "name", "tool_call_id"}

// parseConversation is GeneralParser.parse before the render: messages
// normalized (_normalize_message), a leading system message kept, other
// leading non-user messages dropped, the conversation cut where the roles
// stop alternating as it requires, each message sanitized
// (_sanitize_message with ThinkingParser's keys).
func (out *SpecForgeLoad) parseConversation(conv []map[string]any) []SpecForgeMessage {
	norm := make([]map[string]any, len(conv))
	for i, m := range conv {
		norm[i] = normalizeMessage(m)
	}
	var msgs []SpecForgeMessage
	if norm[0]["role"] == "system" {
		msgs = append(msgs, SpecForgeMessage{"role": "system", "content": norm[0]["content"]})
		norm = norm[1:]
	}
	for len(norm) > 0 && norm[0]["role"] != "user" {
		norm = norm[1:]
	}
	for j, m := range norm {
		if j > 0 && !followsRole(m["role"], norm[j-1]["role"]) {
			break
		}
		msgs = append(msgs, out.sanitizeMessage(m))
	}
	return msgs
}

// normalizeMessage is _normalize_message: a copy of m with role (or
// from) as "user" or "assistant" for ShareGPT's "human" and "gpt", and
// content (or value; "" without either) in place of from and value.
func normalizeMessage(m map[string]any) map[string]any {
	n := maps.Clone(m)
	if n == nil {
		n = map[string]any{}
	}
	role, ok := m["role"].(string)
	if !ok {
		role, _ = m["from"].(string)
	}
	switch role {
	case "human", "user":
		role = "user"
	case "gpt", "assistant":
		role = "assistant"
	}
	content := m["content"]
	if s, _ := content.(string); s == "" {
		content = m["value"]
		if s, _ := content.(string); s == "" {
			content = ""
		}
	}
	n["role"], n["content"] = role, content
	delete(n, "from")
	delete(n, "value")
	return n
}

// followsRole reports whether a message of role may follow one of prev:
// a tool message only an assistant or tool one, an assistant message only
// a user or tool one; others any.
func followsRole(role, prev any) bool {
	switch role {
	case "tool":
		return prev == "assistant" || prev == "tool"
	case "assistant":
		return prev == "user" || prev == "tool"
	}
	return true
}

// sanitizeMessage is _sanitize_message with ThinkingParser's keys: m's
// thinkingKeys only, its tool calls sanitized (dropped when none is kept).
func (out *SpecForgeLoad) sanitizeMessage(m map[string]any) SpecForgeMessage {
	clean := SpecForgeMessage{}
	for k, v := range m {
		if slices.Contains(thinkingKeys, k) {
			clean[k] = v
		}
	}
	if tc, ok := clean["tool_calls"]; ok {
		if tc, keep := out.sanitizeToolCalls(tc); keep {
			clean["tool_calls"] = tc
		} else {
			delete(clean, "tool_calls")
		}
	}
	return clean
}
