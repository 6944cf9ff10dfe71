// Package termsafe renders text that came from outside pipe (server bodies
// and error texts, model names, finish reasons, prompt ids, file names) so
// that a terminal shows it instead of obeying it: control characters and
// the escape sequences they start (CSI "\x1b[…", OSC "\x1b]…\a", C1
// controls such as U+009B) are written as visible escapes, never sent raw.
// An OSC in a server's 404 body could otherwise retitle the terminal, clear
// the screen, or, on some terminals, write to the clipboard.
package termsafe

import (
	"fmt"
	"io"
	"strings"
	"unicode/utf8"
)

// Line is s for one line of a terminal: every control character shown
// escaped (\n, \t, \r, \u001b, \u009b), invalid UTF-8 as \xNN, and the
// bidirectional overrides (which reorder what follows them) as \u202e.
// Inside a JSON string (pipe tokenize's output) these are JSON's own
// escapes of the same characters, so JSON stays JSON with the same values.
func Line(s string) string { return escape(s, false) }

// Text is s for a terminal keeping its line structure: like Line, but
// newlines and tabs stay as they are.
func Text(s string) string { return escape(s, true) }

func escape(s string, keepLines bool) string {
	i := 0
	for i < len(s) {
		r, n := utf8.DecodeRuneInString(s[i:])
		if unsafe(r, n, keepLines) {
			break
		}
		i += n
	}
	if i == len(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 16)
	b.WriteString(s[:i])
	for i < len(s) {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case !unsafe(r, n, keepLines):
			b.WriteString(s[i : i+n])
		case r == utf8.RuneError && n == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\t':
			b.WriteString(`\t`)
		case r == '\r':
			b.WriteString(`\r`)
		default:
			fmt.Fprintf(&b, `\u%04x`, r)
		}
		i += n
	}
	return b.String()
}

func unsafe(r rune, n int, keepLines bool) bool {
	switch {
	case r == utf8.RuneError && n == 1:
		return true
	case r == '\n' || r == '\t':
		return !keepLines
	case r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0):
		return true
	case r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069:
		return true
	}
	return false
}

// Writer passes everything written to it through Text, so a command's
// whole output is safe whatever its lines hold. A UTF-8 sequence split
// across writes is held until its end arrives. The live display, which
// draws with escape sequences of its own, writes to W and escapes its
// lines with Line itself.
type Writer struct {
	W    io.Writer
	part []byte // the start of a UTF-8 sequence the last write ended in
}

// NewWriter returns w wrapped, or w itself when it already is a Writer.
func NewWriter(w io.Writer) *Writer {
	if tw, ok := w.(*Writer); ok {
		return tw
	}
	return &Writer{W: w}
}

// Unwrap returns the writer under w when w is a Writer, else w.
func Unwrap(w io.Writer) io.Writer {
	if tw, ok := w.(*Writer); ok {
		return tw.W
	}
	return w
}

func (w *Writer) Write(p []byte) (int, error) {
	buf := p
	if len(w.part) > 0 {
		buf = append(w.part, p...)
		w.part = nil
	}
	// Hold back an incomplete UTF-8 sequence at the end (at most 3 bytes).
	end := len(buf)
	for k := 1; k <= 3 && k <= len(buf); k++ {
		c := buf[len(buf)-k]
		if c < 0x80 {
			break
		}
		if c >= 0xc0 { // a leading byte: complete if it needs no more than k bytes
			if !utf8.FullRune(buf[len(buf)-k:]) {
				end = len(buf) - k
			}
			break
		}
	}
	w.part = append([]byte(nil), buf[end:]...)
	if _, err := io.WriteString(w.W, Text(string(buf[:end]))); err != nil {
		return 0, err
	}
	return len(p), nil
}

// Cut is s cut to at most n bytes at a character boundary, with "…" when
// anything was cut: for a detail, a log line or an error that must stay
// short whatever came from outside.
func Cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}
