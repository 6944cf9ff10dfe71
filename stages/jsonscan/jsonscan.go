// Package jsonscan reads JSON in place, for judging input lines fast: Valid
// checks a value exactly as strictly as encoding/json does (it is tested
// against it), and on valid data Members and Elements hand out the raw bytes
// of object members and array elements, and Unquote unescapes a string only
// where one is needed.
//
// Why not encoding/json: read-prompts judges every line of its input before
// GPU time is spent on it, and json.Valid alone does about 150 MB/s on one
// core here, under the 200 MB/s that pass must reach; decoding does 50.
// fastjson validates fast but re-encodes values (to keep unknown fields in a
// record's meta) with Go's quoting, which is not JSON.
package jsonscan

import (
	"bytes"
	"encoding/binary"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
)

// plain marks the bytes a string may hold as they are: not '"', not '\\',
// not a control character.
var plain = func() (t [256]bool) {
	for c := 0x20; c < 256; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// Valid reports whether data is exactly one JSON value, with optional
// whitespace around it. Like encoding/json, it does not judge UTF-8.
func Valid(data []byte) bool {
	end, ok := value(data, skipWS(data, 0), 0)
	return ok && skipWS(data, end) == len(data)
}

// maxDepth bounds nesting, as encoding/json does (10000).
const maxDepth = 10000

func skipWS(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// value checks the value starting at b[i] and returns where it ends.
func value(b []byte, i, depth int) (int, bool) {
	if i >= len(b) {
		return i, false
	}
	switch c := b[i]; {
	case c == '"':
		return str(b, i)
	case c == '{':
		if depth >= maxDepth {
			return i, false
		}
		i = skipWS(b, i+1)
		if i < len(b) && b[i] == '}' {
			return i + 1, true
		}
		for {
			if i >= len(b) || b[i] != '"' {
				return i, false
			}
			var ok bool
			if i, ok = str(b, i); !ok {
				return i, false
			}
			i = skipWS(b, i)
			if i >= len(b) || b[i] != ':' {
				return i, false
			}
			if i, ok = value(b, skipWS(b, i+1), depth+1); !ok {
				return i, false
			}
			i = skipWS(b, i)
			switch {
			case i >= len(b):
				return i, false
			case b[i] == ',':
				i = skipWS(b, i+1)
			case b[i] == '}':
				return i + 1, true
			default:
				return i, false
			}
		}
	case c == '[':
		if depth >= maxDepth {
			return i, false
		}
		i = skipWS(b, i+1)
		if i < len(b) && b[i] == ']' {
			return i + 1, true
		}
		for {
			var ok bool
			if i, ok = value(b, i, depth+1); !ok {
				return i, false
			}
			i = skipWS(b, i)
			switch {
			case i >= len(b):
				return i, false
			case b[i] == ',':
				i = skipWS(b, i+1)
			case b[i] == ']':
				return i + 1, true
			default:
				return i, false
			}
		}
	case c == 't':
		return literal(b, i, "true")
	case c == 'f':
		return literal(b, i, "false")
	case c == 'n':
		return literal(b, i, "null")
	case c == '-' || ('0' <= c && c <= '9'):
		return number(b, i)
	}
	return i, false
}

func literal(b []byte, i int, lit string) (int, bool) {
	if len(b)-i >= len(lit) && string(b[i:i+len(lit)]) == lit {
		return i + len(lit), true
	}
	return i, false
}

const (
	lsb = 0x0101010101010101
	msb = 0x8080808080808080
)

// special8 reports whether any of the 8 bytes in x is '"', '\\' or a
// control character (the classic "has a zero byte / a byte less than n"
// tests; bytes ≥ 0x80 are plain).
func special8(x uint64) bool {
	q := x ^ (lsb * '"')
	bs := x ^ (lsb * '\\')
	return ((x-lsb*0x20)&^x|(q-lsb)&^q|(bs-lsb)&^bs)&msb != 0
}

// str checks the string starting at b[i] (a '"') and returns where it ends.
func str(b []byte, i int) (int, bool) {
	i++
	for {
		for i+8 <= len(b) && !special8(binary.LittleEndian.Uint64(b[i:])) {
			i += 8
		}
		for i < len(b) && plain[b[i]] {
			i++
		}
		if i >= len(b) {
			return i, false
		}
		switch b[i] {
		case '"':
			return i + 1, true
		case '\\':
			if i+1 >= len(b) {
				return i, false
			}
			switch b[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if len(b)-i < 6 || !isHex(b[i+2]) || !isHex(b[i+3]) || !isHex(b[i+4]) || !isHex(b[i+5]) {
					return i, false
				}
				i += 6
			default:
				return i, false
			}
		default: // a control character
			return i, false
		}
	}
}

func isHex(c byte) bool {
	return ('0' <= c && c <= '9') || ('a' <= c && c <= 'f') || ('A' <= c && c <= 'F')
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

// number checks -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func number(b []byte, i int) (int, bool) {
	if b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && isDigit(b[i]):
		for i < len(b) && isDigit(b[i]) {
			i++
		}
	default:
		return i, false
	}
	if i < len(b) && b[i] == '.' {
		i++
		if i >= len(b) || !isDigit(b[i]) {
			return i, false
		}
		for i < len(b) && isDigit(b[i]) {
			i++
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if i >= len(b) || !isDigit(b[i]) {
			return i, false
		}
		for i < len(b) && isDigit(b[i]) {
			i++
		}
	}
	return i, true
}

// The functions below take data that Valid accepted; on anything else their
// result is unspecified (but they do not panic).

// Kind is the first byte of a valid value: '{', '[', '"', 't', 'f', 'n',
// or '-' for any number.
func Kind(v []byte) byte {
	if len(v) == 0 {
		return 0
	}
	if c := v[0]; c == '-' || isDigit(c) {
		return '-'
	}
	return v[0]
}

// skip returns where the valid value at b[i] ends, without checking it again:
// strings are crossed with bytes.IndexByte.
func skip(b []byte, i int) int {
	if i >= len(b) {
		return i
	}
	switch b[i] {
	case '"':
		return skipStr(b, i)
	case '{', '[':
		depth := 0
		for i < len(b) {
			switch b[i] {
			case '"':
				i = skipStr(b, i)
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1
				}
			}
			i++
		}
		return i
	}
	for i < len(b) && b[i] != ',' && b[i] != '}' && b[i] != ']' && b[i] != ' ' && b[i] != '\t' && b[i] != '\n' && b[i] != '\r' {
		i++
	}
	return i
}

// skipStr returns where the valid string at b[i] ends. Short strings (keys,
// roles, ids) end within 16 bytes, found 8 bytes a step without a call; a
// longer one is crossed with bytes.IndexByte to each '"', which ends it
// unless an odd run of backslashes escapes it.
func skipStr(b []byte, i int) int {
	i++
	for k := 0; k < 2 && i+8 <= len(b); k++ {
		x := binary.LittleEndian.Uint64(b[i:])
		q, bs := x^(lsb*'"'), x^(lsb*'\\')
		if ((q-lsb)&^q|(bs-lsb)&^bs)&msb != 0 {
			break
		}
		i += 8
	}
	for {
		k := bytes.IndexByte(b[i:], '"')
		if k < 0 {
			return len(b)
		}
		i += k
		n := 0
		for j := i - 1; j >= 0 && b[j] == '\\'; j-- {
			n++
		}
		i++
		if n%2 == 0 {
			return i
		}
	}
}

// Members calls fn with each member of a valid object: the key's raw token
// (quotes included; see Unquote) and the value's raw bytes, until fn
// returns false.
func Members(obj []byte, fn func(key, val []byte) bool) {
	for it := Object(obj); it.Next(); {
		if !fn(it.Key, it.Value) {
			return
		}
	}
}

// Elements calls fn with each element of a valid array until fn returns
// false.
func Elements(arr []byte, fn func(val []byte) bool) {
	for it := Array(arr); it.Next(); {
		if !fn(it.Value) {
			return
		}
	}
}

// Iter walks the members of a valid object or the elements of a valid
// array without allocating:
//
//	for it := jsonscan.Object(obj); it.Next(); {
//		use(it.Key, it.Value)
//	}
type Iter struct {
	// Key is the raw key token of the current member (nil for arrays);
	// Value the raw bytes of its value.
	Key, Value []byte
	b          []byte
	i          int
	obj        bool
	// For Checked: check is set; more says a ',' came before i; ok is
	// the verdict once Next returned false.
	check, more, ok bool
}

// Checked iterates over the members of an object like Object, checking as
// it goes what Valid checks: that data is exactly one valid JSON value, an
// object. After Next returns false, OK tells whether it was. One pass over
// the line, where Valid and then Object would take two.
func Checked(data []byte) Iter {
	i := skipWS(data, 0)
	if i >= len(data) || data[i] != '{' {
		return Iter{i: len(data), check: true}
	}
	return Iter{b: data, i: skipWS(data, i+1), obj: true, check: true}
}

// OK reports, once Next returned false on a Checked iterator, whether the
// data was one valid JSON object.
func (it *Iter) OK() bool { return it.ok }

func (it *Iter) nextChecked() bool {
	b, i := it.b, it.i
	fail := func() bool { it.i, it.b = len(b), nil; return false }
	switch {
	case i >= len(b):
		return fail()
	case b[i] == '}' && !it.more:
		it.ok = skipWS(b, i+1) == len(b)
		it.i, it.b = len(b), nil
		return false
	case b[i] != '"':
		return fail()
	}
	k, ok := str(b, i)
	if !ok {
		return fail()
	}
	it.Key = b[i:k]
	i = skipWS(b, k)
	if i >= len(b) || b[i] != ':' {
		return fail()
	}
	i = skipWS(b, i+1)
	end, ok := value(b, i, 1)
	if !ok {
		return fail()
	}
	it.Value = b[i:end]
	i = skipWS(b, end)
	it.more = false
	switch {
	case i < len(b) && b[i] == ',':
		i = skipWS(b, i+1)
		it.more = true
	case i < len(b) && b[i] == '}':
	default:
		return fail()
	}
	it.i = i
	return true
}

// Object iterates over the members of a valid object (none if v is not one).
func Object(v []byte) Iter { return start(v, '{') }

// Array iterates over the elements of a valid array (none if v is not one).
func Array(v []byte) Iter { return start(v, '[') }

func start(v []byte, open byte) Iter {
	i := skipWS(v, 0)
	if i >= len(v) || v[i] != open {
		return Iter{i: len(v)}
	}
	return Iter{b: v, i: skipWS(v, i+1), obj: open == '{'}
}

// Next moves to the next member or element; false at the end.
func (it *Iter) Next() bool {
	if it.check {
		return it.nextChecked()
	}
	b, i := it.b, it.i
	if i >= len(b) || b[i] == '}' || b[i] == ']' {
		it.i = len(b)
		return false
	}
	if it.obj {
		if b[i] != '"' {
			it.i = len(b)
			return false
		}
		k := skipStr(b, i)
		it.Key = b[i:k]
		i = skipWS(b, k)
		i = skipWS(b, i+1) // ':'
	}
	end := skip(b, i)
	it.Value = b[i:end]
	i = skipWS(b, end)
	if i < len(b) && b[i] == ',' {
		i = skipWS(b, i+1)
	}
	it.i = i
	return true
}

// Blank reports whether the text of the valid string token s is empty or
// only white space (unicode.IsSpace, as strings.TrimSpace judges it),
// without unescaping it.
func Blank(s []byte) bool {
	for i := 1; i < len(s)-1; i++ {
		switch c := s[i]; {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
		case c == '\\':
			switch s[i+1] {
			case 'n', 't', 'r', 'f':
				i++
			case 'u':
				if r := hex4(s[i+2:]); utf16.IsSurrogate(r) || !unicode.IsSpace(r) {
					return false
				}
				i += 5
			default: // '"', '\\', '/', 'b'
				return false
			}
		case c < utf8.RuneSelf:
			return false
		default: // U+0085, U+00A0, U+2000… are white space too
			r, size := utf8.DecodeRune(s[i:])
			if !unicode.IsSpace(r) {
				return false
			}
			i += size - 1
		}
	}
	return true
}

// Escaped reports whether the valid string token s holds an escape, i.e.
// whether its text differs from its raw bytes between the quotes.
func Escaped(s []byte) bool {
	if len(s) > 32 {
		return bytes.IndexByte(s, '\\') >= 0
	}
	for _, c := range s {
		if c == '\\' {
			return true
		}
	}
	return false
}

// Unquote appends the text of the valid string token s to dst, as
// encoding/json decodes it (an unpaired surrogate becomes U+FFFD). Bytes that
// are not UTF-8 are kept as they are: callers reject such input first.
func Unquote(dst, s []byte) []byte {
	if len(s) < 2 {
		return dst
	}
	s = s[1 : len(s)-1]
	for len(s) > 0 {
		k := bytes.IndexByte(s, '\\')
		if k < 0 {
			return append(dst, s...)
		}
		dst = append(dst, s[:k]...)
		s = s[k:]
		if len(s) < 2 {
			return dst
		}
		switch c := s[1]; c {
		case 'b':
			dst = append(dst, '\b')
		case 'f':
			dst = append(dst, '\f')
		case 'n':
			dst = append(dst, '\n')
		case 'r':
			dst = append(dst, '\r')
		case 't':
			dst = append(dst, '\t')
		case 'u':
			r := hex4(s[2:])
			s = s[6:]
			if utf16.IsSurrogate(r) {
				if len(s) >= 6 && s[0] == '\\' && s[1] == 'u' {
					if r2 := utf16.DecodeRune(r, hex4(s[2:])); r2 != utf8.RuneError {
						dst = utf8.AppendRune(dst, r2)
						s = s[6:]
						continue
					}
				}
				r = utf8.RuneError
			}
			dst = utf8.AppendRune(dst, r)
			continue
		default: // '"', '\\', '/'
			dst = append(dst, c)
		}
		s = s[2:]
	}
	return dst
}

func hex4(b []byte) rune {
	if len(b) < 4 {
		return utf8.RuneError
	}
	var r rune
	for _, c := range b[:4] {
		r <<= 4
		switch {
		case '0' <= c && c <= '9':
			r |= rune(c - '0')
		case 'a' <= c && c <= 'f':
			r |= rune(c - 'a' + 10)
		case 'A' <= c && c <= 'F':
			r |= rune(c - 'A' + 10)
		}
	}
	return r
}

// Text is the text of the valid string token s, sharing s's bytes when it
// has no escape.
func Text(s []byte) []byte {
	if !Escaped(s) {
		if len(s) < 2 {
			return nil
		}
		return s[1 : len(s)-1]
	}
	return Unquote(nil, s)
}
