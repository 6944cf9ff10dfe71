//go:build e2e

package tokenize

import (
	"encoding/json"
	"testing"

	"github.com/pipe-dev/pipe/stages/tokenize/internal/corpus"
)

// TestChatTemplateEdgesLikeJinja2 renders conversations the Qwen3 template
// treats specially or rejects, and requires Go to fail exactly where
// jinja2 fails and to render the same text elsewhere. (A null content is
// the one known divergence: see chat.Template.Render.)
func TestChatTemplateEdgesLikeJinja2(t *testing.T) {
	t.Parallel()
	tok := qwen3(t)
	tmpl, err := tok.Chat("")
	if err != nil {
		t.Fatal(err)
	}
	cases := []string{
		`[]`,
		`[{"role": "user", "content": ["a", "b"]}]`,
		`[{"role": "tool", "content": "r1"}, {"role": "tool", "content": "r2"}]`,
		`[{"role": "user", "content": "q"}, {"role": "system", "content": "late"}, {"role": "assistant", "content": "a"}]`,
		`[{"role": "narrator", "content": "ignored?"}, {"role": "user", "content": "q"}]`,
		`[{"role": "user", "content": "<tool_response>x</tool_response>"}, {"role": "assistant", "content": "<think>t</think>a"}]`,
		`[{"role": "user", "content": "q"}, {"role": "assistant", "content": "a", "reasoning_content": "r"}, {"role": "user", "content": "<tool_response>x</tool_response>"}, {"role": "assistant", "content": "b", "reasoning_content": "r2"}]`,
		`[{"role": "user", "content": "q"}, {"role": "assistant", "content": "\n\nlead</think>\n\nx"}]`,
		`[{"role": "user", "content": "q"}, {"role": "assistant", "content": "", "tool_calls": [{"function": {"name": "f", "arguments": "{\"a\": 1}"}}, {"name": "g", "arguments": {"b": [1.5, null]}}]}]`,
		`[{"role": "user"}]`,
		`[{"content": "no role"}]`,
	}
	convs := make([]corpus.Conversation, len(cases))
	for i, c := range cases {
		convs[i] = corpus.Conversation{Messages: json.RawMessage(c)}
	}
	want, wantErr := pyRender(t, tok, convs)
	for i, c := range convs {
		got, err := renderConv(tmpl, c)
		switch {
		case wantErr[i] != "" && err == nil:
			t.Errorf("case %d %s: jinja2 fails (%s), Go renders %q", i, cases[i], wantErr[i], got)
		case wantErr[i] == "" && err != nil:
			t.Errorf("case %d %s: jinja2 renders %q, Go fails: %v", i, cases[i], want[i], err)
		case err == nil && got != want[i]:
			t.Errorf("case %d %s:\n%s", i, cases[i], diffText(got, want[i]))
		}
	}
}
