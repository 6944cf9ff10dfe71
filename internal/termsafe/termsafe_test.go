package termsafe

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

func TestLineAndText(t *testing.T) {
	for _, tc := range []struct{ in, line, text string }{
		{"plain ünïcode 中文", "plain ünïcode 中文", "plain ünïcode 中文"},
		{"a\nb\tc", `a\nb\tc`, "a\nb\tc"},
		{"\x1b]0;pwned\x07\x1b[2J", `\u001b]0;pwned\u0007\u001b[2J`, `\u001b]0;pwned\u0007\u001b[2J`},
		{"8-bit CSI \u009b2J", `8-bit CSI \u009b2J`, `8-bit CSI \u009b2J`},
		{"bad \xff\x9b byte", `bad \xff\x9b byte`, `bad \xff\x9b byte`},
		{"cr\rover", `cr\rover`, `cr\rover`},
		{"del\x7f", `del\u007f`, `del\u007f`},
		{"rtl \u202eevil", `rtl \u202eevil`, `rtl \u202eevil`},
	} {
		if got := Line(tc.in); got != tc.line {
			t.Errorf("Line(%q) = %q, want %q", tc.in, got, tc.line)
		}
		if got := Text(tc.in); got != tc.text {
			t.Errorf("Text(%q) = %q, want %q", tc.in, got, tc.text)
		}
	}
}

// Control characters in a JSON document's strings come out as JSON's own
// escapes: the document decodes to the same values.
func TestTextKeepsJSON(t *testing.T) {
	in := "{\"rendered\": \"a\x7fb\u0085c\u202ed\"}\n"
	var v, w map[string]string
	if err := json.Unmarshal([]byte(in), &v); err != nil {
		t.Fatal(err)
	}
	out := Text(in)
	if err := json.Unmarshal([]byte(out), &w); err != nil || w["rendered"] != v["rendered"] {
		t.Errorf("Text(%q) = %q: %v, %q", in, out, err, w["rendered"])
	}
}

// Written byte by byte, a multi-byte character arrives whole and an ESC
// never gets through.
func TestWriterSplitWrites(t *testing.T) {
	in := "é中\x1b[31mred\u009b\n😀"
	var out bytes.Buffer
	w := NewWriter(&out)
	for i := range len(in) {
		if n, err := w.Write([]byte{in[i]}); n != 1 || err != nil {
			t.Fatal(n, err)
		}
	}
	if want := "é中\\u001b[31mred\\u009b\n😀"; out.String() != want {
		t.Errorf("got %q, want %q", out.String(), want)
	}
	if strings.ContainsRune(out.String(), 0x1b) || Unwrap(w) != &out || NewWriter(w) != w {
		t.Error("Unwrap/NewWriter")
	}
}

func TestCut(t *testing.T) {
	for _, tc := range []struct {
		s    string
		n    int
		want string
	}{{"short", 10, "short"}, {"abcdef", 3, "abc…"}, {"héllo", 2, "h…"}, {"日本語", 4, "日…"}} {
		if got := Cut(tc.s, tc.n); got != tc.want {
			t.Errorf("Cut(%q, %d) = %q, want %q", tc.s, tc.n, got, tc.want)
		}
	}
}
