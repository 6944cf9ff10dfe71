package corpus

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Conversation is one apply_chat_template call: its messages and tools as
// JSON (key order as written) and its options.
type Conversation struct {
	Messages            json.RawMessage `json:"messages"`
	Tools               json.RawMessage `json:"tools,omitempty"`
	AddGenerationPrompt bool            `json:"add_generation_prompt"`
	EnableThinking      *bool           `json:"enable_thinking,omitempty"`
	// ParseToolArguments renders string tool-call arguments as the objects
	// they encode (chat.Options.ParseToolArguments).
	ParseToolArguments bool `json:"parse_tool_arguments,omitempty"`
}

// obj builds a JSON object with keys in the given order.
type obj []kv

type kv struct {
	k string
	v any
}

func (o obj) MarshalJSON() ([]byte, error) {
	var sb strings.Builder
	sb.WriteByte('{')
	for i, f := range o {
		if i > 0 {
			sb.WriteByte(',')
		}
		k, _ := json.Marshal(f.k)
		v, err := json.Marshal(f.v)
		if err != nil {
			return nil, err
		}
		sb.Write(k)
		sb.WriteByte(':')
		sb.Write(v)
	}
	sb.WriteByte('}')
	return []byte(sb.String()), nil
}

// rawNum is a JSON number written exactly, so 1.0 stays a float.
type rawNum string

func (n rawNum) MarshalJSON() ([]byte, error) { return []byte(n), nil }

// Conversations returns n conversations from a fixed seed covering what the
// Qwen3 template branches on: system prompts, multi-turn history (reasoning
// dropped from earlier turns), reasoning_content given, null or inline in
// <think>, tool schemas and tool calls (arguments as objects with ints,
// floats, nesting, Unicode, or as strings), tool responses, enable_thinking
// on/off/unset and the generation prompt.
func Conversations(n int) []Conversation {
	rng := rand.New(rand.NewPCG(7, 2026))
	texts := Generated(300)
	text := func() string {
		s := texts[rng.IntN(len(texts))]
		if len(s) > 600 {
			s = s[:600]
			for len(s) > 0 && !utf8.ValidString(s) {
				s = s[:len(s)-1]
			}
		}
		// Replies that start with a newline merge it with the header's
		// newline, and turn markers inside a reply end the turn for the
		// model too; the mask tests cover those cases on their own.
		s = strings.NewReplacer("<|im_start|>", "", "<|im_end|>", "").Replace(s)
		return strings.TrimLeftFunc(s, unicode.IsSpace)
	}
	prose := []string{"Hello!", "What is 2+2?", "Explain BPE in one line.", "你好，世界", "Résumé naïve café 👍🏽", "", "  spaced  ", "line1\nline2\n"}
	pick := func() string {
		if rng.IntN(3) == 0 {
			return prose[rng.IntN(len(prose))]
		}
		return text()
	}
	out := make([]Conversation, 0, n)
	for i := 0; i < n; i++ {
		out = append(out, conversation(rng, pick))
	}
	return out
}

// conversation draws one conversation from rng, its texts from pick.
func conversation(rng *rand.Rand, pick func() string) Conversation {
	var msgs []any
	var tools []any
	if rng.IntN(4) == 0 {
		tools = []any{toolSchema(rng, "get_weather"), toolSchema(rng, "search_web")}
	}
	if rng.IntN(2) == 0 {
		msgs = append(msgs, obj{{"role", "system"}, {"content", pick()}})
	}
	turns := 1 + rng.IntN(4)
	for t := 0; t < turns; t++ {
		msgs = append(msgs, obj{{"role", "user"}, {"content", pick()}})
		if tools != nil && rng.IntN(2) == 0 {
			msgs = append(msgs, toolCallTurn(rng, pick()))
			for k, m := 0, 1+rng.IntN(2); k < m; k++ {
				msgs = append(msgs, obj{{"role", "tool"}, {"content", fmt.Sprintf(`{"result": %d, "note": %q}`, rng.IntN(100), pick())}})
			}
		}
		if t == turns-1 && rng.IntN(4) == 0 {
			break // ends on a user turn: a generation prompt
		}
		msgs = append(msgs, assistantTurn(rng, pick(), pick()))
	}
	c := Conversation{AddGenerationPrompt: rng.IntN(4) == 0}
	switch rng.IntN(3) {
	case 1:
		c.EnableThinking = new(bool)
		*c.EnableThinking = true
	case 2:
		c.EnableThinking = new(bool)
	}
	c.Messages, _ = json.Marshal(msgs)
	if tools != nil {
		c.Tools, _ = json.Marshal(tools)
	}
	return c
}

func assistantTurn(rng *rand.Rand, answer, thinking string) obj {
	switch rng.IntN(5) {
	case 0:
		return obj{{"role", "assistant"}, {"content", answer}}
	case 1:
		return obj{{"role", "assistant"}, {"content", answer}, {"reasoning_content", thinking}}
	case 2:
		return obj{{"role", "assistant"}, {"content", answer}, {"reasoning_content", nil}}
	case 3:
		return obj{{"role", "assistant"}, {"content", "<think>\n" + thinking + "\n</think>\n\n" + answer}}
	default:
		return obj{{"role", "assistant"}, {"reasoning_content", ""}, {"content", answer}}
	}
}

func toolCallTurn(rng *rand.Rand, content string) obj {
	args := obj{{"city", "Zürich"}, {"days", rng.IntN(10)}, {"scale", rawNum([]string{"1.0", "0.5", "1e-7", "2.5e+20", "-0.0", "100"}[rng.IntN(6)])},
		{"opts", obj{{"units", "metric"}, {"tags", []any{"a", "b\"c", "\u2028", nil, true}}}}}
	var call any = obj{{"type", "function"}, {"function", obj{{"name", "get_weather"}, {"arguments", args}}}}
	if rng.IntN(3) == 0 {
		call = obj{{"name", "search_web"}, {"arguments", `{"q": "tokenizers"}`}}
	}
	if rng.IntN(2) == 0 {
		content = ""
	}
	return obj{{"role", "assistant"}, {"content", content}, {"tool_calls", []any{call}}}
}

func toolSchema(rng *rand.Rand, name string) obj {
	return obj{{"type", "function"}, {"function", obj{
		{"name", name},
		{"description", "Looks things up — fast & <safe>, \"quoted\", 日本語."},
		{"parameters", obj{
			{"type", "object"},
			{"properties", obj{
				{"city", obj{{"type", "string"}, {"description", "City name\twith tab"}}},
				{"days", obj{{"type", "integer"}, {"minimum", 1}, {"maximum", 14}, {"default", rawNum("7")}}},
				{"scale", obj{{"type", "number"}, {"default", rawNum([]string{"1.0", "0.001", "1e16", "3.14"}[rng.IntN(4)])}}},
			}},
			{"required", []string{"city"}},
		}},
	}}}
}
