package record

import (
	"encoding/json"
	"strings"
)

// ToolStep is one step of a conversation's tool use, as reports show it:
// a call an assistant turn makes (Call set; Name the tool, Text its
// arguments as given) or a tool's result (Name where the message gives
// one, Text its content).
type ToolStep struct {
	Call bool `json:"call,omitempty"`
	// Reply marks a call of the completion (the model's reply), not of
	// the given conversation.
	Reply bool   `json:"reply,omitempty"`
	Name  string `json:"name,omitempty"`
	Text  string `json:"text"`
}

// ToolSteps are the tool calls and results after the conversation's last
// user message (what the completion answers), then the completion's own
// parsed calls, in order; nil when there are none.
func (r *Record) ToolSteps() []ToolStep {
	from := 0
	for i, m := range r.Messages {
		if m.Role == "user" {
			from = i + 1
		}
	}
	var out []ToolStep
	for _, m := range r.Messages[from:] {
		switch {
		case m.Role == "tool":
			out = append(out, ToolStep{Name: m.Name, Text: m.Content})
		case len(m.ToolCalls) > 0:
			out = appendCalls(out, m.ToolCalls)
		}
	}
	if c := r.Completion; c != nil {
		n := len(out)
		out = appendCalls(out, c.ToolCalls)
		for i := n; i < len(out); i++ {
			out[i].Reply = true
		}
	}
	return out
}

func appendCalls(out []ToolStep, calls []ToolCall) []ToolStep {
	for _, c := range calls {
		args := string(c.Function.Arguments)
		var s string
		if json.Unmarshal(c.Function.Arguments, &s) == nil {
			args = s // OpenAI's form: the arguments' JSON as a string
		}
		out = append(out, ToolStep{Call: true, Name: c.Function.Name, Text: strings.TrimSpace(args)})
	}
	return out
}

// ToolNames are the names of the conversation's declared tools, in order
// (each schema's function.name, or name for a flat one).
func (r *Record) ToolNames() []string {
	var tools []struct {
		Name     string `json:"name"`
		Function *struct {
			Name string `json:"name"`
		} `json:"function"`
	}
	if len(r.Tools) == 0 || json.Unmarshal(r.Tools, &tools) != nil {
		return nil
	}
	names := make([]string, 0, len(tools))
	for _, t := range tools {
		if t.Function != nil {
			t.Name = t.Function.Name
		}
		names = append(names, t.Name)
	}
	return names
}
