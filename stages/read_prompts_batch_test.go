package stages

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/pipe-dev/pipe/pipeline/record"
)

// An OpenAI/vLLM batch input line (the Batch API's request input object:
// custom_id, method, url, body) is a prompt: custom_id the id,
// body.messages the conversation, the body's other settings kept in meta.
func TestBatchInputLineIsAPrompt(t *testing.T) {
	line := `{"custom_id":"request-1","method":"POST","url":"/v1/chat/completions","body":{"model":"Qwen/Qwen3-32B","messages":[{"role":"system","content":"S"},{"role":"user","content":"What is 2+2?"}],"max_tokens":1000}}`
	rec, id, prob := promptLine([]byte(line), "id", true, true)
	if prob != nil {
		t.Fatal(prob)
	}
	if id != "request-1" || rec.ID != "request-1" {
		t.Fatalf("id %q (record %q), want request-1 (custom_id)", id, rec.ID)
	}
	want := []record.Message{{Role: "system", Content: "S"}, {Role: "user", Content: "What is 2+2?"}}
	if len(rec.Messages) != 2 || !reflect.DeepEqual(rec.Messages, want) {
		t.Fatalf("messages %+v, want %+v", rec.Messages, want)
	}
	var body map[string]any
	json.Unmarshal(rec.Meta["body"].(json.RawMessage), &body)
	if body["model"] != "Qwen/Qwen3-32B" || body["max_tokens"] != 1000.0 || body["messages"] != nil {
		t.Fatalf("meta body %v: want the request's settings without the prompt", body)
	}
	if rec.Meta["url"] == nil || rec.Meta["custom_id"] != nil {
		t.Fatalf("meta %v: want url kept, custom_id used as the id", rec.Meta)
	}
	// An id given beside custom_id wins, as id_field says.
	if _, id, _ := promptLine([]byte(`{"id":"mine","custom_id":"c","body":{"messages":[{"role":"user","content":"q"}]}}`), "id", false, true); id != "mine" {
		t.Fatalf("id %q, want mine", id)
	}

	for _, c := range []struct{ line, want string }{
		{`{"custom_id":"r","url":"/v1/completions","body":{"model":"m","prompt":"2+2="}}`,
			`batch request: body has "prompt", not "messages": a /v1/completions request is not supported; want /v1/chat/completions requests (body.messages)`},
		{`{"custom_id":"r","url":"/v1/embeddings","body":{"model":"m","input":"x"}}`,
			`batch request: body has no "messages"; want /v1/chat/completions requests (body.messages)`},
		{`{"custom_id":"r","body":"x"}`, `"body" must be an object (a batch request's body)`},
		{`{"custom_id":"r","body":{"messages":[]}}`, `"messages" is empty`},
	} {
		_, _, prob := promptLine([]byte(c.line), "id", true, true)
		if prob == nil || prob.Reason != "bad_line" || prob.Detail != c.want {
			t.Errorf("%s: problem %+v, want bad_line %q", c.line, prob, c.want)
		}
	}
}
