package jsonscan

import (
	"bytes"
	"encoding/json"
	"fmt"
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

// Checked judges like Valid for objects, and walks the same members as
// Object.
func TestCheckedMatchesValid(t *testing.T) {
	for _, s := range append(corpus, `{"a":1}`, `{"a":1,"b":[1,{"c":"d"}]} `, `{"a":1,}`, `{"a" 1}`, `{"a":1}x`, `{`, `{"a":1`, `{"a":1}}`) {
		n := 0
		it := Checked([]byte(s))
		for it.Next() {
			n++
		}
		want := json.Valid([]byte(s)) && strings.TrimSpace(s)[0] == '{'
		if it.OK() != want {
			t.Errorf("Checked(%q).OK() = %v, want %v", s, it.OK(), want)
		}
		m := 0
		Members([]byte(s), func(_, _ []byte) bool { m++; return true })
		if want && n != m {
			t.Errorf("Checked(%q) walked %d members, Object %d", s, n, m)
		}
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

func TestBlankMatchesTrimSpace(t *testing.T) {
	for _, s := range []string{`""`, `" "`, `"\n\t\r\f "`, `" x "`, `"\u0020\u00a0\u2003"`, `"\u0041"`, `"\b"`, `"\\"`, "\" \u00a0\u3000 \"",
		"\"\u00e9\"", `"\ud83d\ude00"`, "\"\u2028\"", `"\/"`, `"\""`} {
		if !json.Valid([]byte(s)) {
			t.Fatalf("%s is not JSON", s)
		}
		var text string
		json.Unmarshal([]byte(s), &text)
		if got, want := Blank([]byte(s)), strings.TrimSpace(text) == ""; got != want {
			t.Errorf("Blank(%s) = %v, want %v", s, got, want)
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
		if t := bytes.TrimSpace(b); len(t) > 0 && t[0] == '{' {
			it := Checked(b)
			for it.Next() {
			}
			if it.OK() != want {
				panic(fmt.Sprintf("Checked(%q).OK() = %v, encoding/json says %v", b, it.OK(), want))
			}
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
			if Blank(b) != (strings.TrimSpace(s) == "") {
				t.Fatalf("Blank(%q) = %v for %q", b, Blank(b), s)
			}
		case '{':
			it := Checked(b)
			for it.Next() {
			}
			if !it.OK() {
				t.Fatalf("Checked(%q) says invalid", b)
			}
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
