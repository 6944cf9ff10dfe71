package stages

// The request settings a completion records (record.Completion.Request),
// as generate writes them and validate-thinking and tokenize-and-mask read
// them back.

// RequestRowMaxLength is the request setting, recorded with a completion,
// that says its output was bounded by the room the trainer's max_length
// (its value) left after the prompt.
const RequestRowMaxLength = "row_max_length"

// ReasonNoCompletion rejects a record that reaches a stage reading its
// completion without one (validate-thinking, tokenize-and-mask).
const ReasonNoCompletion = "no_completion"

// requestInt reads an integer request setting, as recorded (an int) or
// read back from JSON (a float64).
func requestInt(req map[string]any, key string) (int, bool) {
	switch n := req[key].(type) {
	case int:
		return n, true
	case int64:
		return int(n), true
	case float64:
		return int(n), true
	}
	return 0, false
}

func requestIntOr0(req map[string]any, key string) int { n, _ := requestInt(req, key); return n }

// requestThinking reads enable_thinking from recorded request settings, top
// level or inside chat_template_kwargs.
func requestThinking(req map[string]any) (bool, bool) {
	if b, ok := req["enable_thinking"].(bool); ok {
		return b, true
	}
	if kw, ok := req["chat_template_kwargs"].(map[string]any); ok {
		if b, ok := kw["enable_thinking"].(bool); ok {
			return b, true
		}
	}
	return false, false
}

// requestForced reads thinking_forced from recorded request settings (set
// by generate when the chat template forces thinking).
func requestForced(req map[string]any) bool {
	b, _ := req["thinking_forced"].(bool)
	return b
}
