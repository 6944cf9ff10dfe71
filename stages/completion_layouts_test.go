package stages

import (
	"bytes"
	"reflect"
	"strings"
	"testing"

	"github.com/pipe-dev/pipe/pipeline/record"
)

// read-completions reads the layouts other tools write, says which it
// found, and names what it cannot read.
func TestReadCompletionsLayouts(t *testing.T) {
	user := []record.Message{{Role: "user", Content: "What is 2+2?"}}
	for _, c := range []struct {
		name, line, layout string
		id                 string
		msgs               []record.Message
		reasoning, answer  string
		finish             string
		tokens             [3]int // prompt, completion, reasoning
	}{
		{"pipe records", `{"id":"a","messages":[{"role":"user","content":"What is 2+2?"}],"completion":{"reasoning":"R","answer":"4","finish_reason":"stop"}}`,
			layoutPipe, "a", user, "R", "4", "stop", [3]int{}},
		{"sharegpt with think tags", `{"id":"s1","conversations":[{"from":"human","value":"What is 2+2?"},{"from":"gpt","value":"<think>\nadd them\n</think>\n\n4"}]}`,
			layoutConversations, "s1", user, "add them", "4", "", [3]int{}},
		{"conversations with reasoning_content", `{"id":"s2","conversations":[{"role":"system","content":"S"},{"role":"user","content":"What is 2+2?"},{"role":"assistant","content":"4","reasoning_content":"add"}]}`,
			layoutConversations, "s2", []record.Message{{Role: "system", Content: "S"}, user[0]}, "add", "4", "", [3]int{}},
		{"messages ending with the answer, no id", `{"messages":[{"role":"user","content":"What is 2+2?"},{"role":"assistant","content":"4"}]}`,
			layoutConversations, contentID(user, nil), user, "", "4", "", [3]int{}},
		{"specforge regenerated", `{"id":"sf","conversations":[{"role":"user","content":"What is 2+2?"},{"role":"assistant","content":"4","reasoning_content":"add"}],"status":"success"}`,
			layoutSpecForge, "sf", user, "add", "4", "", [3]int{}},
		{"chat completion", `{"id":"chatcmpl-1","object":"chat.completion","model":"Qwen/Qwen3-32B","messages":[{"role":"user","content":"What is 2+2?"}],"choices":[{"index":0,"message":{"role":"assistant","content":"4","reasoning_content":"add"},"finish_reason":"length"}],"usage":{"prompt_tokens":12,"completion_tokens":30,"completion_tokens_details":{"reasoning_tokens":25}}}`,
			layoutChat, "chatcmpl-1", user, "add", "4", "length", [3]int{12, 30, 25}},
		{"batch output", `{"id":"batch_req_123","custom_id":"request-1","response":{"status_code":200,"request_id":"r","body":{"id":"chatcmpl-9","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"<think>add</think>4"},"finish_reason":"stop"}],"usage":{"prompt_tokens":5,"completion_tokens":7}}},"error":null}`,
			layoutBatch, "request-1", nil, "add", "4", "stop", [3]int{5, 7, 0}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var notice bytes.Buffer
			r := &readCompletions{cfg: readCompletionsConfig{RequireCompletion: true, Path: "in.jsonl"}, id: "completions", notice: &notice}
			rec, err := r.parse([]byte(c.line))
			if err != nil {
				t.Fatal(err)
			}
			if want := "layout " + c.layout + ": " + layoutText[c.layout]; !strings.Contains(notice.String(), want) {
				t.Errorf("notice %q, want it to say %q", notice.String(), want)
			}
			r.parse([]byte(c.line))
			if n := strings.Count(notice.String(), "layout"); n != 1 {
				t.Errorf("the layout was said %d times, want once", n)
			}
			if rec.ID != c.id {
				t.Errorf("id %q, want %q", rec.ID, c.id)
			}
			if len(rec.Messages) != len(c.msgs) {
				t.Fatalf("messages %+v, want %+v", rec.Messages, c.msgs)
			}
			for i := range c.msgs {
				if !reflect.DeepEqual(rec.Messages[i], c.msgs[i]) {
					t.Errorf("message %d: %+v, want %+v", i, rec.Messages[i], c.msgs[i])
				}
			}
			got := rec.Completion
			if got.Reasoning != c.reasoning || got.Answer != c.answer || got.FinishReason != c.finish {
				t.Errorf("completion reasoning %q answer %q finish %q, want %q %q %q", got.Reasoning, got.Answer, got.FinishReason, c.reasoning, c.answer, c.finish)
			}
			if [3]int{got.PromptTokens, got.CompletionTokens, got.ReasoningTokens} != c.tokens {
				t.Errorf("tokens %d/%d/%d, want %v", got.PromptTokens, got.CompletionTokens, got.ReasoningTokens, c.tokens)
			}
		})
	}

	for _, c := range []struct{ line, want string }{
		{`{"id":"x","conversations":[{"from":"human","value":"Q"}]}`,
			`conversations: no "completion", and the last turn is "user", not an assistant's answer (want a final assistant turn; set require_completion = false to read prompts-only records)`},
		{`{"id":"x","conversations":[{"from":"wizard","value":"Q"}]}`, `conversations: turn 1: unknown role "wizard" (want system, user, assistant, tool; or human, gpt, function_call, observation)`},
		{`{"id":"x","conversations":[{"role":"user","content":"Q"}],"status":"error","error":"Data starts with an assistant message"}`,
			`specforge-regenerated: SpecForge status "error" (Data starts with an assistant message): not a completion (regenerate_train_data.py keeps these in its _error and _skipped files)`},
		{`{"id":"batch_req_1","custom_id":"r7","response":{"status_code":400,"body":null},"error":{"code":"bad","message":"context too long"}}`,
			`openai-batch-output: batch output "r7": the request failed (status 400): context too long`},
		{`{"id":"batch_req_1","custom_id":"r7","response":null,"error":{"message":"expired"}}`,
			`openai-batch-output: batch output "r7" has no response (error: expired)`},
		{`{"id":"c","object":"chat.completion","choices":[]}`, `openai-chat-completion: chat completion has no choices`},
		{`{"id":"c","choices":[{"message":{"content":"a"}},{"message":{"content":"b"}}]}`,
			`openai-chat-completion: chat completion has 2 choices: one completion a record (n = 1) is supported`},
		{`{"id":"c","text":"hello"}`,
			`no completion: want "completion" (pipe's records), "conversations" or "messages" ending with an assistant turn, "choices" (a chat completion) or "custom_id" and "response" (batch output)`},
		{`{"id":"c","conversations":[{"from":"human","value":"Q"},{"from":"gpt","value":"A","weight":0}]}`,
			`conversations: turn 2: field "weight" is not one pipe carries (a message has ` + messageKeys + `); remove it or rename it`},
		{`{"id":"c","messages":[{"role":"user","content":"Q"},{"role":"assistant","content":"A","foo":1}]}`,
			`messages: turn 2: field "foo" is not one pipe carries (a message has ` + messageKeys + `); remove it or rename it`},
	} {
		r := &readCompletions{cfg: readCompletionsConfig{RequireCompletion: true}}
		if _, err := r.parse([]byte(c.line)); err == nil || err.Error() != c.want {
			t.Errorf("%s:\n got %v\nwant %s", c.line, err, c.want)
		}
	}
}
