package stages

import (
	"github.com/pipe-dev/pipe/pipeline/record"
	"github.com/pipe-dev/pipe/stages/tokenize/chat"
)

// chatMessage is m as the model's chat template reads it: role and
// content, and its reasoning, tool calls, tool_call_id and name where it
// has them. generate renders prompts and tokenize-and-mask rows with it,
// so the two see one conversation.
func chatMessage(m record.Message) chat.Message {
	var cm chat.Message
	if m.ReasoningContent != "" {
		cm = chat.NewReply(m.Role, m.Content, m.ReasoningContent)
	} else {
		cm = chat.NewMessage(m.Role, m.Content)
	}
	if len(m.ToolCalls) > 0 {
		cm = cm.With("tool_calls", m.ToolCalls)
	}
	if m.ToolCallID != "" {
		cm = cm.With("tool_call_id", m.ToolCallID)
	}
	if m.Name != "" {
		cm = cm.With("name", m.Name)
	}
	return cm
}

// withTools sets the conversation's tools in opts, as
// apply_chat_template(messages, tools=...) passes them. String tool-call
// arguments render as the objects they encode: SGLang's chat API
// (normalize_assistant_tool_call_arguments) and SpecForge's parser
// (Parser._sanitize_message) render them so, and a prompt, its training
// row and SpecForge's own render of the raw conversation must agree.
func withTools(opts chat.Options, rec *record.Record) chat.Options {
	opts.Tools = rec.Tools
	opts.ParseToolArguments = true
	return opts
}
