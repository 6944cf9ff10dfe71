package record

import (
	"encoding/json"
	"strings"
	"testing"
)

// unmarshalLineID is what LineID must agree with: encoding/json's
// reading of a record line's id.
func unmarshalLineID(line []byte) (string, bool) {
	var r struct {
		ID *string `json:"id"`
	}
	if err := json.Unmarshal(line, &r); err != nil || r.ID == nil {
		return "", false
	}
	return *r.ID, true
}

// LineID accepts exactly the lines encoding/json does, with the same
// id: a line its one-pass reader took differently would be verified (or
// adopted at resume) under another id than the one it was written with.
func TestLineIDAgreesWithUnmarshal(t *testing.T) {
	long := `{"id":"r-1","completion":{"answer":"` + strings.Repeat(`x\"\u00e9`, 500) + `","output_ids":[` + strings.Repeat("151667,", 2000) + `1]},"meta":{"id":"inner"}}`
	lines := []string{
		`{"id":"a"}`,
		` {"id" : "a"} ` + "\t",
		`{"x":1,"id":"b","y":[1,2,{"id":"c"}]}`,
		long,
		`{"ID":"upper"}`,
		`{"Id":"mixed","id":"last wins"}`,
		`{"id":"first","ID":"last"}`,
		`{"id":"a","id":null}`,
		`{"id":null,"id":"b"}`,
		`{"id":null}`,
		`{"id":1}`,
		`{"id":true}`,
		`{"id":["a"]}`,
		`{"id":{"a":1}}`,
		`{"idx":"no"}`,
		`{}`,
		`null`,
		`"id"`,
		`["id","a"]`,
		`{"id":"a"}{"id":"b"}`,
		`{"id":"a"} x`,
		`{"id":"a"`,
		`{"id":"a",}`,
		`{"id":"a","x":[1,2}`,
		`{"id":"a","x":01}`,
		`{"id":"\u00e9\n\ud83d\ude00"}`,
		`{"id":"lone \ud800 surrogate"}`,
		"{\"id\":\"bad \xff utf-8\"}",
		"{\"x\":\"bad \xc3 utf-8\",\"id\":\"ok\"}",
		"{\"id\":\"ctl \x01\"}",
		`{"id":"a","x":"\q"}`,
		``,
		`   `,
	}
	for _, l := range lines {
		want, wantOK := unmarshalLineID([]byte(l))
		got, err := LineID([]byte(l))
		if (err == nil) != wantOK || got != want {
			t.Errorf("LineID(%.60q) = %q, %v; encoding/json: %q, ok %v", l, got, err, want, wantOK)
		}
	}
}

// BenchmarkLineID reads the id of a training-row-sized line (2,000
// token ids and a reply), next to encoding/json's Unmarshal in the same run.
func BenchmarkLineID(b *testing.B) {
	line := []byte(`{"id":"r-0000001","messages":[{"role":"user","content":"Question 1"}],"completion":{"answer":"` + strings.Repeat("word ", 1500) + `","output_ids":[` + strings.Repeat("151667,", 2000) + `1]},"tokens":{"input_ids":[` + strings.Repeat("1234,", 2000) + `1],"loss_mask":[` + strings.Repeat("1,", 2000) + `1]}}`)
	b.Run("LineID", func(b *testing.B) {
		b.SetBytes(int64(len(line)))
		for b.Loop() {
			if _, err := LineID(line); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("reference=Unmarshal", func(b *testing.B) {
		b.SetBytes(int64(len(line)))
		for b.Loop() {
			if _, ok := unmarshalLineID(line); !ok {
				b.Fatal("not read")
			}
		}
	})
}
