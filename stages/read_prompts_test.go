package stages

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/pipe-dev/pipe/pipeline/record"
)

func TestParsePromptLineShapes(t *testing.T) {
	user := []record.Message{{Role: "user", Content: "What is 2+2?"}}
	hash := contentID(user, nil)
	tests := []struct {
		name, line, idField string
		wantID              string
		wantMsgs            []record.Message
		wantMeta            string // a key expected in meta
		wantErr             string
	}{
		{name: "openai", line: `{"id":"a1","messages":[{"role":"user","content":"What is 2+2?"}],"source":"x"}`, wantID: "a1", wantMsgs: user, wantMeta: "source"},
		{name: "sharegpt", line: `{"id":"a2","conversations":[{"from":"human","value":"What is 2+2?"}]}`, wantID: "a2", wantMsgs: user},
		{name: "sharegpt roles", line: `{"conversations":[{"from":"system","value":"S"},{"from":"human","value":"Q"},{"from":"gpt","value":"A"}]}`,
			wantMsgs: []record.Message{{Role: "system", Content: "S"}, {Role: "user", Content: "Q"}, {Role: "assistant", Content: "A"}}},
		{name: "prompt", line: `{"id":"a3","prompt":"What is 2+2?"}`, wantID: "a3", wantMsgs: user},
		{name: "numeric id", line: `{"id":17,"prompt":"What is 2+2?"}`, wantID: "17", wantMsgs: user},
		{name: "id field", line: `{"uid":"u9","id":"ignored","prompt":"What is 2+2?"}`, idField: "uid", wantID: "u9", wantMsgs: user, wantMeta: "id"},
		{name: "hash id same for every shape", line: `{"prompt":"What is 2+2?"}`, wantID: hash, wantMsgs: user},
		{name: "hash id sharegpt", line: `{"conversations":[{"from":"human","value":"What is 2+2?"}]}`, wantID: hash, wantMsgs: user},
		{name: "content parts", line: `{"messages":[{"role":"user","content":[{"type":"text","text":"What is "},{"type":"text","text":"2+2?"}]}]}`, wantID: hash, wantMsgs: user},
		{name: "empty system content kept", line: `{"messages":[{"role":"system","content":""},{"role":"user","content":"Q"}]}`,
			wantMsgs: []record.Message{{Role: "system", Content: ""}, {Role: "user", Content: "Q"}}},
		{name: "invalid json", line: `{"prompt": "x"`, wantErr: "invalid JSON"},
		{name: "no prompt", line: `{"text":"x"}`, wantErr: `no prompt: want "messages", "conversations" or "prompt"`},
		{name: "unknown role", line: `{"messages":[{"role":"robot","content":"x"}]}`, wantErr: `turn 1: unknown role "robot"`},
		{name: "empty messages", line: `{"messages":[]}`, wantErr: `"messages" is empty`},
		{name: "image part", line: `{"messages":[{"role":"user","content":[{"type":"image_url","image_url":"x"}]}]}`, wantErr: `content part of type "image_url" is not supported`},
		{name: "bad id", line: `{"id":{"a":1},"prompt":"x"}`, wantErr: `"id" must be a string or a number`},
		{name: "prompt not string", line: `{"prompt":5}`, wantErr: `"prompt" must be a string`},
		{name: "escapes decoded", line: `{"id":"e\u0031","prompt":"What is \u0032+2?"}`, wantID: "e1", wantMsgs: user},
		{name: "keys of a turn in any case", line: `{"messages":[{"Role":"USER","Content":"What is 2+2?"}]}`, wantID: hash, wantMsgs: user},
		{name: "reasoning kept", line: `{"messages":[{"role":"user","content":"Q"},{"role":"assistant","content":"A","reasoning_content":"R\n"},{"role":"user","content":"Q2"}]}`,
			wantMsgs: []record.Message{{Role: "user", Content: "Q"}, {Role: "assistant", Content: "A", ReasoningContent: "R\n"}, {Role: "user", Content: "Q2"}}},
		{name: "meta kept as written", line: `{"id":"m","prompt":"What is 2+2?","tags":["a", "b"],"n":1.50}`, wantID: "m", wantMsgs: user, wantMeta: "tags"},
		{name: "not an object", line: `["prompt"]`, wantErr: "not a JSON object"},
		{name: "trailing garbage", line: `{"prompt":"x"} {}`, wantErr: "invalid JSON"},
		{name: "null content", line: `{"messages":[{"role":"user","content":null}]}`, wantErr: "turn 1: no content"},
		{name: "turn not an object", line: `{"messages":["hi"]}`, wantErr: "messages must be a list of {role, content} objects"},
		{name: "messages not a list", line: `{"messages":{"role":"user"}}`, wantErr: "messages must be a list of {role, content} objects"},
		{name: "role not a string", line: `{"messages":[{"role":1,"content":"x"}]}`, wantErr: "turn 1: role must be a string"},
		{name: "empty id", line: `{"id":"","prompt":"x"}`, wantErr: `"id" is empty`},
		{name: "reasoning not a string", line: `{"messages":[{"role":"user","content":"x","reasoning_content":[1]}]}`, wantErr: "turn 1: reasoning_content must be a string"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			idField := tt.idField
			if idField == "" {
				idField = "id"
			}
			rec, id, prob := promptLine([]byte(tt.line), idField, true, true)
			if tt.wantErr != "" {
				if prob == nil || prob.Reason != "bad_line" || !strings.Contains(prob.Detail, tt.wantErr) {
					t.Fatalf("problem = %+v, want a bad_line %q", prob, tt.wantErr)
				}
				// Judging without building finds the same.
				if _, _, p := promptLine([]byte(tt.line), idField, false, false); p == nil || *p != *prob {
					t.Fatalf("without building: problem = %+v, want %+v", p, prob)
				}
				return
			}
			if prob != nil {
				t.Fatal(prob)
			}
			if id != rec.ID {
				t.Errorf("id %q, record's %q", id, rec.ID)
			}
			if tt.wantID != "" && rec.ID != tt.wantID {
				t.Errorf("id = %q, want %q", rec.ID, tt.wantID)
			}
			if len(rec.Messages) != len(tt.wantMsgs) {
				t.Fatalf("messages = %+v, want %+v", rec.Messages, tt.wantMsgs)
			}
			for i := range rec.Messages {
				if !reflect.DeepEqual(rec.Messages[i], tt.wantMsgs[i]) {
					t.Errorf("message %d = %+v, want %+v", i, rec.Messages[i], tt.wantMsgs[i])
				}
			}
			if tt.wantMeta != "" {
				if _, ok := rec.Meta[tt.wantMeta]; !ok {
					t.Errorf("meta %v lacks %q", rec.Meta, tt.wantMeta)
				}
			}
			// Meta holds the other fields' JSON as written, and nothing else.
			var row map[string]json.RawMessage
			if err := json.Unmarshal([]byte(tt.line), &row); err != nil {
				t.Fatal(err)
			}
			for k, v := range rec.Meta {
				if raw, ok := v.(json.RawMessage); !ok || string(raw) != string(row[k]) {
					t.Errorf("meta[%q] = %s, the line has %s", k, v, row[k])
				}
			}
			// Judging without building finds no problem either.
			if _, id, p := promptLine([]byte(tt.line), idField, false, true); p != nil || id != rec.ID {
				t.Errorf("without building: id %q, problem %v", id, p)
			}
		})
	}
}

// fakeEmitter collects what a stage emits; it is a unit-test double.
type fakeEmitter struct {
	mu       sync.Mutex
	out      []*record.Record
	rejected []*record.Record
	took     int
	block    chan struct{} // if set, Emit blocks until ctx is done
	ctx      context.Context
}

func (f *fakeEmitter) Emit(_ string, r *record.Record) error {
	if f.block != nil {
		<-f.ctx.Done()
		return f.ctx.Err()
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.out = append(f.out, r)
	return nil
}
func (f *fakeEmitter) Reject(r *record.Record, reason, detail string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	r.Reject = &record.Rejection{Reason: reason, Detail: detail}
	f.rejected = append(f.rejected, r)
	return nil
}
func (f *fakeEmitter) Fail(*record.Record, error, int) error { return nil }
func (f *fakeEmitter) Took(n int)                            { f.took += n }
func (f *fakeEmitter) SkipFinished(string) bool              { return false }
func (f *fakeEmitter) Skip(*record.Record, string) error     { return nil }

func writeLines(t *testing.T, lines ...string) string {
	p := filepath.Join(t.TempDir(), "p.jsonl")
	if err := os.WriteFile(p, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// A turn to answer with nothing but white space — however it is written —
// is an empty_prompt; any other character is not.
func TestPromptLineEmptyPrompt(t *testing.T) {
	for line, empty := range map[string]bool{
		`{"prompt":""}`:               true,
		`{"prompt":" \n\t\r\f"}`:      true,
		`{"prompt":"\u00a0\u2003 　"}`: true,
		`{"prompt":null}`:             true,
		`{"prompt":" x "}`:            false,
		`{"prompt":"\u0041"}`:         false,
		`{"prompt":"\b"}`:             false,
		`{"prompt":"é"}`:              false,
		`{"messages":[{"role":"user","content":[{"type":"text","text":" "},{"type":"text","text":"\n"}]}]}`: true,
		`{"messages":[{"role":"user","content":[{"type":"text","text":" "},{"text":"x"}]}]}`:                false,
		`{"messages":[{"role":"user","content":" "},{"role":"assistant","content":"a"}]}`:                   true,
		`{"messages":[{"role":"system","content":" "},{"role":"user","content":"q"}]}`:                      false,
	} {
		rec, _, p := promptLine([]byte(line), "id", true, true)
		if got := p != nil && p.Reason == "empty_prompt"; got != empty {
			t.Errorf("%s: problem %+v, want empty_prompt %v", line, p, empty)
		}
		if p != nil && p.Reason == "empty_prompt" && rec == nil {
			t.Errorf("%s: no record to reject", line)
		}
	}
}

func TestReadPromptsBadLinePolicyAndLimit(t *testing.T) {
	path := writeLines(t, `{"id":"1","prompt":"a"}`, ``, `not json`, `{"id":"2","prompt":"b"}`, `{"id":"3","prompt":"c"}`)
	// fail: the error names the file and line
	r := &readPrompts{cfg: readPromptsConfig{Path: path, IDField: "id", OnBadLine: "fail"}}
	err := r.Read(context.Background(), &fakeEmitter{})
	if err == nil || !strings.HasPrefix(err.Error(), path+":3: invalid JSON") {
		t.Fatalf("err = %v, want %s:3: invalid JSON...", err, path)
	}
	// skip: counted, set aside with the line, the rest emitted
	em := &fakeEmitter{}
	r = &readPrompts{cfg: readPromptsConfig{Path: path, IDField: "id", OnBadLine: "skip"}}
	if err := r.Read(context.Background(), em); err != nil {
		t.Fatal(err)
	}
	if len(em.out) != 3 || len(em.rejected) != 1 || em.took != 4 {
		t.Fatalf("out %d rejected %d took %d, want 3/1/4", len(em.out), len(em.rejected), em.took)
	}
	if rj := em.rejected[0]; rj.Reject.Reason != "bad_line" || !strings.Contains(rj.Reject.Detail, "p.jsonl:3: invalid JSON") || rj.Meta["text"] != "not json" {
		t.Fatalf("rejected = %+v %+v", rj.Reject, rj.Meta)
	}
	// limit counts emitted prompts
	em = &fakeEmitter{}
	r = &readPrompts{cfg: readPromptsConfig{Path: path, IDField: "id", OnBadLine: "skip", Limit: 2}}
	if err := r.Read(context.Background(), em); err != nil {
		t.Fatal(err)
	}
	if len(em.out) != 2 || em.out[1].ID != "2" {
		t.Fatalf("limit 2 emitted %d", len(em.out))
	}
}

// Canceled in the middle (blocked on a full downstream), Read returns the
// context's error and does not count the line it could not hand over.
func TestReadPromptsCancelInTheMiddle(t *testing.T) {
	path := writeLines(t, `{"prompt":"a"}`, `{"prompt":"b"}`)
	ctx, cancel := context.WithCancel(context.Background())
	em := &fakeEmitter{block: make(chan struct{}), ctx: ctx}
	done := make(chan error, 1)
	go func() {
		done <- (&readPrompts{cfg: readPromptsConfig{Path: path, IDField: "id", OnBadLine: "fail"}}).Read(ctx, em)
	}()
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v", err)
	}
	if em.took != 0 {
		t.Fatalf("took %d lines that were never handed over", em.took)
	}
}

func TestReadPromptsLongLine(t *testing.T) {
	long := `{"prompt":"` + strings.Repeat("x", 3<<20) + `"}`
	path := writeLines(t, long)
	em := &fakeEmitter{}
	if err := (&readPrompts{cfg: readPromptsConfig{Path: path, IDField: "id", OnBadLine: "fail"}}).Read(context.Background(), em); err != nil {
		t.Fatal(err)
	}
	if len(em.out) != 1 || len(em.out[0].Messages[0].Content) != 3<<20 {
		t.Fatal("3 MiB line not read whole")
	}
}
