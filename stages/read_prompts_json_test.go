package stages

import (
	"encoding/json"
	"strings"
	"testing"
)

// jsonEdges are values at the edges of the JSON grammar, valid and not.
var jsonEdges = []string{
	`{}`, `[]`, `""`, `0`, `-0`, `1.5e+10`, `-1E-2`, `true`, `false`, `null`, ` {"a" : [1, 2 ,{}] } `,
	`"\/\b\f\n\r\t"`, `"\u12"`, `"\x"`, "\"a\tb\"", "\"a\x01\"", `"\"`, `"\\"`, `"abc`,
	`01`, `1.`, `.5`, `1e`, `1e+`, `-`, `--1`, `+1`, `1.5.5`, `tru`, `nul`, `falsey`, `True`,
	`{"a"}`, `{"a":}`, `{"a":1,}`, `[1,]`, `[,1]`, `{,}`, `{"a":1 "b":2}`, `[1 2]`, `{1:2}`, `{'a':1}`,
	`{"a":1}}`, `[[]`, `[]]`, `{} {}`, `[1]x`, `{"a":1,"a":2}`,
	`"\uD800"`, `"\uDC00\uD800"`, `"\uD83D\u0041"`, `"\ud83d\ude00"`, `"é"`, "\"\x7f\"", `"x\u0000y"`,
}

// The line judge agrees with encoding/json on which lines are JSON, which
// are objects, and on the text of every string: whole lines of each edge
// value, and each as a prompt and as a meta value.
func TestPromptLineAgreesWithEncodingJSON(t *testing.T) {
	var lines []string
	for _, v := range jsonEdges {
		lines = append(lines, v, `{"prompt":`+v+`}`, `{"prompt":"p","m":`+v+`}`,
			`{"messages":[{"role":"user","content":`+v+`}]}`)
	}
	deep := strings.Repeat("[", 10001) + strings.Repeat("]", 10001)
	lines = append(lines, `{"prompt":"p","m":`+deep+`}`, `{"prompt":"p","m":`+deep[1:len(deep)-1]+`}`)
	for _, line := range lines {
		checkAgainstEncodingJSON(t, line)
	}
}

func FuzzPromptLine(f *testing.F) {
	for _, v := range jsonEdges {
		f.Add(`{"prompt":` + v + `}`)
	}
	f.Add(`{"id":"a1","messages":[{"role":"user","content":[{"type":"text","text":"a\n"}]}],"x":[1,{"y":null}]}`)
	f.Fuzz(checkAgainstEncodingJSON)
}

func checkAgainstEncodingJSON(t *testing.T, line string) {
	t.Helper()
	rec, _, p := promptLine([]byte(line), "id", true, true)
	var obj map[string]json.RawMessage
	err := json.Unmarshal([]byte(line), &obj)
	switch {
	case !json.Valid([]byte(line)):
		if p == nil || !strings.HasPrefix(p.Detail, "invalid JSON: ") {
			t.Errorf("%.80q: judged %v, encoding/json says it is not JSON", line, p)
		}
		return
	case err != nil || obj == nil:
		if p == nil || p.Detail != "not a JSON object" {
			t.Errorf("%.80q: judged %v, encoding/json says it is not an object", line, p)
		}
		return
	case p != nil && (strings.HasPrefix(p.Detail, "invalid JSON") || p.Detail == "not a JSON object"):
		t.Errorf("%.80q: judged %v, encoding/json says it is an object", line, p)
		return
	}
	var want struct{ Prompt *string }
	if json.Unmarshal([]byte(line), &want) == nil && want.Prompt != nil && rec != nil && len(rec.Messages) == 1 {
		if got := rec.Messages[0].Content; got != *want.Prompt {
			t.Errorf("%.80q: prompt text %q, encoding/json decodes %q", line, got, *want.Prompt)
		}
	}
	if rec != nil {
		for k, v := range rec.Meta {
			if string(v.(json.RawMessage)) != string(obj[k]) {
				t.Errorf("%.80q: meta %q = %s, encoding/json has %s", line, k, v, obj[k])
			}
		}
	}
}
