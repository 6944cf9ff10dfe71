package sglang

import (
	"bytes"
	"errors"
	"math"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
	"unsafe"
)

// scanner reads the few fields a response needs straight from its bytes,
// skipping everything else, without reflection or a tree. It is lenient the
// way the protocol notes ask (unknown fields ignored, a number may come as a
// string or null, a field may be missing) and strict about structure: a torn
// or malformed body is an error.
//
// Strings it returns are copies: the body's buffer is reused.
type scanner struct {
	b   []byte
	i   int
	err error
}

var errSyntax = errors.New("malformed JSON")

func (s *scanner) fail() {
	if s.err == nil {
		s.err = errSyntax
	}
	s.i = len(s.b)
}

func (s *scanner) ws() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// peek returns the next non-space byte, 0 at the end.
func (s *scanner) peek() byte {
	s.ws()
	if s.i < len(s.b) {
		return s.b[s.i]
	}
	return 0
}

// end checks that nothing but space follows the top-level value.
func (s *scanner) end() error {
	if s.peek() != 0 {
		s.fail()
	}
	return s.err
}

// object calls f with each key of an object; f must consume the value
// (with skip or a reader). A value that is not an object is skipped and
// reported false. Keys are compared raw: the ones we read have no escapes.
func (s *scanner) object(f func(key []byte)) bool {
	if s.peek() != '{' {
		s.skip()
		return false
	}
	s.i++
	if s.peek() == '}' {
		s.i++
		return true
	}
	for s.err == nil {
		if s.peek() != '"' {
			s.fail()
			return false
		}
		start := s.i + 1
		s.skipString()
		key := s.b[start:max(start, s.i-1)]
		if s.peek() != ':' {
			s.fail()
			return false
		}
		s.i++
		f(key)
		switch s.peek() {
		case ',':
			s.i++
		case '}':
			s.i++
			return true
		default:
			s.fail()
		}
	}
	return false
}

// array calls f for each element; f must consume it. A value that is not an
// array is skipped and reported false.
func (s *scanner) array(f func(i int)) bool {
	if s.peek() != '[' {
		s.skip()
		return false
	}
	s.i++
	if s.peek() == ']' {
		s.i++
		return true
	}
	for k := 0; s.err == nil; k++ {
		f(k)
		switch s.peek() {
		case ',':
			s.i++
		case ']':
			s.i++
			return true
		default:
			s.fail()
		}
	}
	return false
}

// skip consumes one value of any kind.
func (s *scanner) skip() {
	switch c := s.peek(); {
	case c == '{':
		s.object(func([]byte) { s.skip() })
	case c == '[':
		s.array(func(int) { s.skip() })
	case c == '"':
		s.skipString()
	case c == 't':
		s.literal("true")
	case c == 'f':
		s.literal("false")
	case c == 'n':
		s.literal("null")
	case c == '-' || ('0' <= c && c <= '9'):
		s.number()
	default:
		s.fail()
	}
}

func (s *scanner) literal(lit string) {
	if len(s.b)-s.i < len(lit) || string(s.b[s.i:s.i+len(lit)]) != lit {
		s.fail()
		return
	}
	s.i += len(lit)
}

// skipString consumes a string (s.i at its quote); it reports whether it
// had escapes.
func (s *scanner) skipString() (escaped bool) {
	s.i++
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case '"':
			s.i++
			return escaped
		case '\\':
			escaped = true
			s.i += 2
		default:
			s.i++
		}
	}
	s.fail()
	return false
}

// number consumes a number and returns its text.
func (s *scanner) number() []byte {
	start := s.i
	for s.i < len(s.b) {
		switch c := s.b[s.i]; {
		case '0' <= c && c <= '9', c == '-', c == '+', c == '.', c == 'e', c == 'E':
			s.i++
			continue
		}
		break
	}
	if s.i == start {
		s.fail()
	}
	return s.b[start:s.i]
}

// str reads a string; null or any other kind of value gives "", false.
func (s *scanner) str() (string, bool) {
	if s.peek() != '"' {
		s.skip()
		return "", false
	}
	start := s.i + 1
	escaped := s.skipString()
	if s.err != nil {
		return "", false
	}
	raw := s.b[start : s.i-1]
	if !escaped && utf8.Valid(raw) {
		return string(raw), true
	}
	return unquote(raw), true
}

// num reads a number given as a number or a numeric string; anything else
// (null included) gives 0, false. So does a number that is not finite —
// "NaN", "Inf", 1e999 (beyond float64) — which the journal's JSON could not
// hold: one such figure must not fail a run.
func (s *scanner) num() (float64, bool) {
	var f float64
	var err error
	switch c := s.peek(); {
	case c == '-' || ('0' <= c && c <= '9'):
		f, err = strconv.ParseFloat(string(s.number()), 64)
	case c == '"':
		str, _ := s.str()
		f, err = strconv.ParseFloat(str, 64)
	default:
		s.skip()
		return 0, false
	}
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, false
	}
	return f, true
}

// int reads a count: a finite number from 0 to MaxInt32 (the int32 columns
// that hold counts), else 0 — never a wrapped value.
func (s *scanner) int() int {
	f, ok := s.num()
	if !ok || !countInRange(f) {
		return 0
	}
	return int(f)
}

func countInRange(f float64) bool { return f >= 0 && f <= math.MaxInt32 }

// figureKeys are the answer's figures read with num (floats) or int (counts).
var figureKeys = map[string]bool{
	"prompt_tokens": true, "completion_tokens": true, "cached_tokens": true, "reasoning_tokens": true,
	"spec_verify_ct": true, "spec_accept_length": false, "e2e_latency": false,
}

// droppedFigures names the figures of a parsed answer that num and int
// read as absent although the server gave a value: NaN, Inf, out of range.
// The client counts them per server ("dropped_spec_accept_length"), so a
// server's bad figures are named instead of silently zero. It looks at
// most 4 levels deep (choices[i].meta_info is at 3).
func droppedFigures(body []byte) []string {
	var names []string
	s := &scanner{b: body}
	var walk func(depth int)
	walk = func(depth int) {
		switch s.peek() {
		case '{':
			s.object(func(k []byte) {
				isCount, isFigure := figureKeys[string(k)]
				switch {
				case isFigure && (s.peek() == 'n' || s.peek() == '{' || s.peek() == '[' || s.peek() == 't' || s.peek() == 'f'):
					s.skip()
				case isFigure:
					f, ok := s.num()
					if !ok || (isCount && !countInRange(f)) {
						names = append(names, string(k))
					}
				case depth < 4:
					walk(depth + 1)
				default:
					s.skip()
				}
			})
		case '[':
			s.array(func(int) {
				if depth < 4 {
					walk(depth + 1)
				} else {
					s.skip()
				}
			})
		default:
			s.skip()
		}
	}
	walk(0)
	return names
}

// ints reads an array of integers; other elements are skipped.
func (s *scanner) ints() []int {
	var out []int
	s.array(func(int) {
		c := s.peek()
		if c == '-' || ('0' <= c && c <= '9') {
			t := s.number()
			if n, err := strconv.Atoi(string(t)); err == nil {
				out = append(out, n)
				return
			}
			if f, err := strconv.ParseFloat(string(t), 64); err == nil {
				out = append(out, int(f))
			}
			return
		}
		s.skip()
	})
	return out
}

// stop reads a matched stop: an integer token id, a string, or null.
func (s *scanner) stop() any {
	switch c := s.peek(); {
	case c == '"':
		str, _ := s.str()
		return str
	case c == '-' || ('0' <= c && c <= '9'):
		if n, err := strconv.Atoi(string(s.number())); err == nil {
			return n
		}
		return nil
	}
	s.skip()
	return nil
}

// finish reads a finish_reason given as a string or as SGLang's object
// ({"type":"stop","matched":151645}, {"type":"abort","message":…}).
func (s *scanner) finish() (reason string, matched any, message string) {
	if s.peek() == '"' {
		reason, _ = s.str()
		return reason, nil, ""
	}
	s.object(func(k []byte) {
		switch string(k) {
		case "type":
			reason, _ = s.str()
		case "matched":
			matched = s.stop()
		case "message":
			message, _ = s.str()
		default:
			s.skip()
		}
	})
	return reason, matched, message
}

// unquote decodes a string body with escapes as encoding/json does: bad
// escapes, lone surrogates and invalid UTF-8 become U+FFFD.
func unquote(raw []byte) string {
	out := make([]byte, 0, len(raw))
	for i := 0; i < len(raw); {
		// Copy the run up to the next escape in one go when it is valid UTF-8.
		if j := bytes.IndexByte(raw[i:], '\\'); j != 0 {
			if j < 0 {
				j = len(raw) - i
			}
			if run := raw[i : i+j]; utf8.Valid(run) {
				out = append(out, run...)
				i += j
				continue
			}
		}
		c := raw[i]
		switch {
		case c == '\\' && i+1 < len(raw):
			e := raw[i+1]
			i += 2
			switch e {
			case '"', '\\', '/':
				out = append(out, e)
			case 'b':
				out = append(out, '\b')
			case 'f':
				out = append(out, '\f')
			case 'n':
				out = append(out, '\n')
			case 'r':
				out = append(out, '\r')
			case 't':
				out = append(out, '\t')
			case 'u':
				r, ok := hex4(raw, i)
				if !ok {
					out = utf8.AppendRune(out, utf8.RuneError)
					continue
				}
				i += 4
				if utf16.IsSurrogate(r) {
					r2, ok := rune(-1), false
					if i+6 <= len(raw) && raw[i] == '\\' && raw[i+1] == 'u' {
						r2, ok = hex4(raw, i+2)
					}
					if dec := utf16.DecodeRune(r, r2); ok && dec != utf8.RuneError {
						r = dec
						i += 6
					} else {
						r = utf8.RuneError
					}
				}
				out = utf8.AppendRune(out, r)
			default:
				out = utf8.AppendRune(out, utf8.RuneError)
			}
		case c < utf8.RuneSelf:
			out = append(out, c)
			i++
		default:
			r, size := utf8.DecodeRune(raw[i:])
			if r == utf8.RuneError && size == 1 {
				out = utf8.AppendRune(out, utf8.RuneError)
			} else {
				out = append(out, raw[i:i+size]...)
			}
			i += size
		}
	}
	// out is never written again: share its bytes instead of copying them.
	return unsafe.String(unsafe.SliceData(out), len(out))
}

func hex4(b []byte, i int) (rune, bool) {
	if i+4 > len(b) {
		return 0, false
	}
	var r rune
	for _, c := range b[i : i+4] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			c = c - 'A' + 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}
