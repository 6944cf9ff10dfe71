package termsafe

import (
	"bytes"
	"strings"
	"testing"
)

func TestLineAndText(t *testing.T) {
	for _, tc := range []struct{ in, line, text string }{
		{"plain ünïcode 中文", "plain ünïcode 中文", "plain ünïcode 中文"},
		{"a\nb\tc", `a\nb\tc`, "a\nb\tc"},
		{"\x1b]0;pwned\x07\x1b[2J", `\x1b]0;pwned\x07\x1b[2J`, `\x1b]0;pwned\x07\x1b[2J`},
		{"8-bit CSI \u009b2J", `8-bit CSI \u009b2J`, `8-bit CSI \u009b2J`},
		{"bad \xff\x9b byte", `bad \xff\x9b byte`, `bad \xff\x9b byte`},
		{"cr\rover", `cr\rover`, `cr\rover`},
		{"del\x7f", `del\x7f`, `del\x7f`},
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
	if want := "é中\\x1b[31mred\\u009b\n😀"; out.String() != want {
		t.Errorf("got %q, want %q", out.String(), want)
	}
	if strings.ContainsRune(out.String(), 0x1b) || Unwrap(w) != &out || NewWriter(w) != w {
		t.Error("Unwrap/NewWriter")
	}
}
