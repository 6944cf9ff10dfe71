package jsonscan

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"
)

// corpus holds valid and invalid JSON at the edges of the grammar; every
// case is judged by encoding/json, the reference.
var corpus = []string{
	`{}`, `[]`, `""`, `0`, `-0`, `1.5e+10`, `-1E-2`, `true`, `false`, `null`, ` {"a" : [1, 2 ,{}] } `,
	`{"id":"a1","messages":[{"role":"user","content":"hi\n\"there\"\\ \u00e9 \ud83d\ude00"}]}`,
	`"\/\b\f\n\r\t"`, `"\u12"`, `"\x"`, "\"a\tb\"", "\"a\x01\"", `"\"`, `"\\"`, `"abc`,
	`01`, `1.`, `.5`, `1e`, `1e+`, `-`, `--1`, `+1`, `1.5.5`, `tru`, `nul`, `falsey`, `True`,
	`{"a"}`, `{"a":}`, `{"a":1,}`, `[1,]`, `[,1]`, `{,}`, `{"a":1 "b":2}`, `[1 2]`, `{1:2}`, `{'a':1}`,
	`{"a":1}}`, `[[]`, `[]]`, ``, ` `, `{} {}`, `[1]x`, "[\"a\"]\n", "\t1\r\n",
	`"\uD800"`, `"\uDC00\uD800"`, `"\uD83D\u0041"`, `"é"`, "\"\x7f\"",
}

func TestValidMatchesEncodingJSON(t *testing.T) {
	for _, s := range corpus {
		if got, want := Valid([]byte(s)), json.Valid([]byte(s)); got != want {
			t.Errorf("Valid(%q) = %v, encoding/json says %v", s, got, want)
		}
	}
	deep := strings.Repeat("[", 10001) + strings.Repeat("]", 10001)
	if Valid([]byte(deep)) != json.Valid([]byte(deep)) {
		t.Errorf("nesting 10001 deep: Valid = %v, encoding/json %v", Valid([]byte(deep)), json.Valid([]byte(deep)))
	}
}

func TestUnquoteMatchesEncodingJSON(t *testing.T) {
	for _, s := range corpus {
		if !json.Valid([]byte(s)) || s[0] != '"' {
			continue
		}
		var want string
		if err := json.Unmarshal([]byte(s), &want); err != nil {
			t.Fatal(err)
		}
		if got := string(Text([]byte(s))); got != want {
			t.Errorf("Text(%s) = %q, want %q", s, got, want)
		}
	}
}

// TestMembersAndElements walks valid documents and compares with what
// encoding/json decodes.
func TestMembersAndElements(t *testing.T) {
	docs := []string{
		`{"a":1,"b" : "x\"}y" , "c":{"d":[1,{"e":"]"}]},"d":[ ],"e":null,"f":-1.5e3,"g":true}`,
		` { } `,
		`{"k\u0041":"v\\"}`,
	}
	for _, doc := range docs {
		var want map[string]json.RawMessage
		if err := json.Unmarshal([]byte(doc), &want); err != nil {
			t.Fatal(err)
		}
		got := map[string]json.RawMessage{}
		Members([]byte(doc), func(k, v []byte) bool {
			got[string(Text(k))] = v
			return true
		})
		if len(got) != len(want) {
			t.Fatalf("%s: members %v, want %v", doc, got, want)
		}
		for k, v := range want {
			if !bytes.Equal(got[k], v) {
				t.Errorf("%s: member %q = %s, want %s", doc, k, got[k], v)
			}
		}
	}
	var want []json.RawMessage
	arr := `[ 1 , "a,]" ,[2,[3]], {"x":"}"} ,null]`
	if err := json.Unmarshal([]byte(arr), &want); err != nil {
		t.Fatal(err)
	}
	var got []json.RawMessage
	Elements([]byte(arr), func(v []byte) bool { got = append(got, v); return true })
	if len(got) != len(want) {
		t.Fatalf("elements %q, want %q", got, want)
	}
	for i := range want {
		if !bytes.Equal(got[i], want[i]) {
			t.Errorf("element %d = %s, want %s", i, got[i], want[i])
		}
	}
}

// FuzzValid: on any input Valid agrees with encoding/json, and on valid
// strings Text agrees with its decoding.
func FuzzValid(f *testing.F) {
	for _, s := range corpus {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		got, want := Valid(b), json.Valid(b)
		if got != want {
			t.Fatalf("Valid(%q) = %v, encoding/json says %v", b, got, want)
		}
		if !got {
			return
		}
		b = bytes.TrimSpace(b)
		if !utf8.Valid(b) {
			return // encoding/json replaces bad bytes with U+FFFD; callers reject them first
		}
		switch b[0] {
		case '"':
			var s string
			json.Unmarshal(b, &s)
			if string(Text(b)) != s {
				t.Fatalf("Text(%q) = %q, want %q", b, Text(b), s)
			}
		case '{':
			var m map[string]json.RawMessage
			json.Unmarshal(b, &m)
			n := 0
			Members(b, func(k, v []byte) bool { n++; return Valid(v) })
			if n < len(m) {
				t.Fatalf("Members(%q): %d members, want at least %d", b, n, len(m))
			}
		case '[':
			var a []json.RawMessage
			json.Unmarshal(b, &a)
			n := 0
			Elements(b, func(v []byte) bool {
				if !bytes.Equal(v, a[n]) {
					t.Fatalf("Elements(%q)[%d] = %q, want %q", b, n, v, a[n])
				}
				n++
				return true
			})
			if n != len(a) {
				t.Fatalf("Elements(%q): %d elements, want %d", b, n, len(a))
			}
		}
	})
}
