// Package chat renders a model's Jinja chat template exactly as Hugging Face
// transformers' apply_chat_template does (Python jinja2 with trim_blocks,
// lstrip_blocks, loop controls, raise_exception, strftime_now and a tojson
// without ASCII escaping), on github.com/ardanlabs/jinja.
//
// It also finds where each assistant turn lies in the rendered text by
// rendering the conversation message by message (turns.go), for the
// training loss mask, and whether the template forces thinking.
package chat

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"sync"

	"github.com/ardanlabs/jinja"
)

// ChatMLSource is the generic ChatML template (transformers' historical
// default), used when a pipeline asks for template = "chatml".
const ChatMLSource = "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"

// Template is a compiled chat template. It is safe for concurrent use.
type Template struct {
	tmpl *jinja.Template
	vars map[string]jinja.Value

	headerOnce sync.Once // assistantHeader
	header     string
	headerErr  error
}

// Options are apply_chat_template's arguments.
type Options struct {
	// AddGenerationPrompt appends the assistant header (for generation; leave
	// false for training rows). Default false.
	AddGenerationPrompt bool
	// EnableThinking is passed as enable_thinking when not nil; nil leaves it
	// undefined, which Qwen3's template treats as thinking on.
	EnableThinking *bool
	// Tools is a JSON array of tool schemas passed as tools; nil passes None.
	Tools json.RawMessage
	// SystemPrompt, when not empty and the conversation does not start with a
	// system message, is prepended as one. Empty adds nothing: the template
	// decides (Qwen3 adds no default system prompt).
	SystemPrompt string
	// ParseToolArguments renders each assistant tool call's
	// function.arguments given as a JSON string as the object it encodes
	// (key order kept), as SGLang's chat API
	// (normalize_assistant_tool_call_arguments) and SpecForge's parser
	// (Parser._sanitize_message) do before applying the template: Qwen3
	// then prints it with tojson ({"a": 1}) instead of as given
	// ({"a":1}). A string that is not a JSON object is an error, as on
	// SGLang. Default false: apply_chat_template's rendering of the
	// arguments as given.
	ParseToolArguments bool
}

// tojsonCall matches uses of the tojson filter, which are redirected to ours
// (ardanlabs/jinja resolves built-in filters before template variables).
var tojsonCall = regexp.MustCompile(`\|\s*tojson\b`)

const ourTojson = "__pipe_tojson"

// New compiles a template source as transformers would load it. specialVars
// are the special-token variables the template may read (bos_token,
// eos_token, ..., additional_special_tokens: strings or lists of strings).
func New(source string, specialVars map[string]any) (*Template, error) {
	// jinja2's lexer turns \r\n and \r into \n and, without
	// keep_trailing_newline, drops one trailing newline.
	source = strings.ReplaceAll(source, "\r\n", "\n")
	source = strings.ReplaceAll(source, "\r", "\n")
	source = strings.TrimSuffix(source, "\n")
	source = tojsonCall.ReplaceAllString(source, "| "+ourTojson)
	tmpl, err := jinja.Compile(source)
	if err != nil {
		return nil, fmt.Errorf("chat template: %w", err)
	}
	t := &Template{tmpl: tmpl, vars: map[string]jinja.Value{}}
	for k, v := range specialVars {
		t.vars[k] = jinja.FromGoValue(v)
	}
	t.vars[ourTojson] = jinja.NewCallable("tojson", tojson)
	if err := t.addFilters(source); err != nil {
		return nil, err
	}
	return t, nil
}

// Render renders messages; there must be at least one (jinja2 fails on
// Qwen3's messages[0] otherwise). A template's raise_exception and errors
// are returned as errors, and so is an integer beyond 64 bits in a message
// or in opts.Tools. Known divergences from jinja2, none of which Qwen3's
// template meets with strings for content, names and string or object
// arguments:
//   - a null "content" is treated as empty by `in` and `+`, where Python
//     raises TypeError (Qwen3's template does `'</think>' in
//     message.content`): pass "" rather than null for tool-call turns, as
//     SpecForge's parser does (content or "");
//   - a value printed with {{ }} or joined with ~ that is not a string: a
//     null prints "" (Python "None"), a float with %g (1.0 as "1"). The
//     string and tojson filters print as Python does.
func (t *Template) Render(messages []Message, opts Options) (string, error) {
	if opts.SystemPrompt != "" && (len(messages) == 0 || messages[0].Role() != "system") {
		messages = append([]Message{NewMessage("system", opts.SystemPrompt)}, messages...)
	}
	items, err := values(messages, opts)
	if err != nil {
		return "", err
	}
	return t.render(items, opts)
}

// values converts messages for rendering, their tool calls' arguments
// parsed under opts.ParseToolArguments.
func values(messages []Message, opts Options) ([]jinja.Value, error) {
	items := make([]jinja.Value, len(messages))
	for i, m := range messages {
		if m.texts != nil {
			// What fromJSON reads from raw, without reading it.
			d := jinja.NewDict()
			for j := 0; j < len(m.texts); j += 2 {
				d.AsDict().Set(m.texts[j], jinja.NewString(m.texts[j+1]))
			}
			items[i] = d
			continue
		}
		v, err := fromJSON(m.object())
		if err != nil {
			return nil, fmt.Errorf("message %d: %w", i, err)
		}
		if opts.ParseToolArguments {
			if err := parseArguments(v); err != nil {
				return nil, fmt.Errorf("message %d: %w", i, err)
			}
		}
		items[i] = v
	}
	return items, nil
}

// render renders converted messages (opts.SystemPrompt already applied).
func (t *Template) render(items []jinja.Value, opts Options) (string, error) {
	if len(items) == 0 {
		return "", errors.New("no messages to render")
	}
	data := make(map[string]jinja.Value, len(t.vars)+6)
	for k, v := range t.vars {
		data[k] = v
	}
	data["messages"] = jinja.NewList(items[:len(items):len(items)]) // a prefix of a longer list: never grown into it
	data["add_generation_prompt"] = jinja.NewBool(opts.AddGenerationPrompt)
	data["documents"] = jinja.None()
	data["tools"] = jinja.None()
	if len(opts.Tools) > 0 && string(opts.Tools) != "null" {
		tools, err := fromJSON(opts.Tools)
		if err != nil {
			return "", fmt.Errorf("tools: %w", err)
		}
		if !tools.IsList() {
			return "", errors.New("tools: want a JSON array")
		}
		data["tools"] = tools
	}
	if opts.EnableThinking != nil {
		data["enable_thinking"] = jinja.NewBool(*opts.EnableThinking)
	}
	out, err := t.tmpl.RenderValues(data)
	if err != nil {
		return "", fmt.Errorf("chat template: %w", err)
	}
	return out, nil
}
