package chat

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/ardanlabs/jinja"
)

// fromJSON decodes JSON into a template value the way Python's json.loads
// does: objects keep key order, integers stay ints and numbers with a
// fraction or exponent become floats. It is a small hand-written parser:
// encoding/json's token API made rendering several times slower.
func fromJSON(b []byte) (jinja.Value, error) {
	p := jsonParser{data: b}
	v, err := p.value()
	if err != nil {
		return jinja.Undefined(), err
	}
	if p.ws(); p.pos != len(p.data) {
		return jinja.Undefined(), p.errorf("data after the JSON value")
	}
	return v, nil
}

type jsonParser struct {
	data []byte
	pos  int
}

func (p *jsonParser) errorf(format string, args ...any) error {
	return fmt.Errorf("JSON byte %d: %s", p.pos, fmt.Sprintf(format, args...))
}

func (p *jsonParser) ws() {
	for p.pos < len(p.data) {
		switch p.data[p.pos] {
		case ' ', '\t', '\n', '\r':
			p.pos++
		default:
			return
		}
	}
}

func (p *jsonParser) value() (jinja.Value, error) {
	p.ws()
	if p.pos >= len(p.data) {
		return jinja.Undefined(), p.errorf("unexpected end")
	}
	switch c := p.data[p.pos]; {
	case c == '{':
		p.pos++
		d := jinja.NewDict()
		dict := d.AsDict()
		if p.ws(); p.pos < len(p.data) && p.data[p.pos] == '}' {
			p.pos++
			return d, nil
		}
		for {
			p.ws()
			k, err := p.str()
			if err != nil {
				return jinja.Undefined(), err
			}
			if p.ws(); p.pos >= len(p.data) || p.data[p.pos] != ':' {
				return jinja.Undefined(), p.errorf("want ':' after object key")
			}
			p.pos++
			v, err := p.value()
			if err != nil {
				return jinja.Undefined(), err
			}
			dict.Set(k, v)
			if done, err := p.next('}'); err != nil || done {
				return d, err
			}
		}
	case c == '[':
		p.pos++
		var items []jinja.Value
		if p.ws(); p.pos < len(p.data) && p.data[p.pos] == ']' {
			p.pos++
			return jinja.NewList(items), nil
		}
		for {
			v, err := p.value()
			if err != nil {
				return jinja.Undefined(), err
			}
			items = append(items, v)
			if done, err := p.next(']'); err != nil || done {
				return jinja.NewList(items), err
			}
		}
	case c == '"':
		s, err := p.str()
		return jinja.NewString(s), err
	case c == 't' && bytes.HasPrefix(p.data[p.pos:], []byte("true")):
		p.pos += 4
		return jinja.NewBool(true), nil
	case c == 'f' && bytes.HasPrefix(p.data[p.pos:], []byte("false")):
		p.pos += 5
		return jinja.NewBool(false), nil
	case c == 'n' && bytes.HasPrefix(p.data[p.pos:], []byte("null")):
		p.pos += 4
		return jinja.None(), nil
	case c == '-' || (c >= '0' && c <= '9'):
		start := p.pos
		isFloat := false
		for p.pos < len(p.data) {
			c := p.data[p.pos]
			if c == '.' || c == 'e' || c == 'E' {
				isFloat = true
			} else if !(c == '-' || c == '+' || (c >= '0' && c <= '9')) {
				break
			}
			p.pos++
		}
		num := p.data[start:p.pos]
		if !json.Valid(num) {
			return jinja.Undefined(), p.errorf("bad number %q", num)
		}
		if !isFloat {
			if n, err := strconv.ParseInt(string(num), 10, 64); err == nil {
				return jinja.NewInt(n), nil
			}
		}
		f, err := strconv.ParseFloat(string(num), 64)
		if err != nil {
			return jinja.Undefined(), p.errorf("number %s: %v", num, err)
		}
		return jinja.NewFloat(f), nil
	}
	return jinja.Undefined(), p.errorf("unexpected %q", p.data[p.pos])
}

// next consumes ',' (returning false) or the closing byte (returning true).
func (p *jsonParser) next(closing byte) (bool, error) {
	p.ws()
	if p.pos < len(p.data) {
		switch p.data[p.pos] {
		case ',':
			p.pos++
			return false, nil
		case closing:
			p.pos++
			return true, nil
		}
	}
	return true, p.errorf("want ',' or %q", closing)
}

// str reads a JSON string; one without escapes (and valid UTF-8) is
// converted directly, others go through encoding/json, which also replaces
// invalid UTF-8 with U+FFFD.
func (p *jsonParser) str() (string, error) {
	if p.pos >= len(p.data) || p.data[p.pos] != '"' {
		return "", p.errorf("want a string")
	}
	start := p.pos
	p.pos++
	plain := true
	for {
		if p.pos >= len(p.data) {
			return "", p.errorf("unterminated string")
		}
		c := p.data[p.pos]
		if c == '"' {
			p.pos++
			break
		}
		if c == '\\' {
			plain = false
			p.pos += 2
			continue
		}
		if c < 0x20 {
			return "", p.errorf("control character in string")
		}
		p.pos++
	}
	raw := p.data[start:p.pos]
	if plain && utf8.Valid(raw) {
		return string(raw[1 : len(raw)-1]), nil
	}
	var out string
	if err := json.Unmarshal(raw, &out); err != nil {
		return "", p.errorf("bad string: %v", err)
	}
	return out, nil
}

// tojson is Hugging Face's tojson filter: Python's json.dumps(x,
// ensure_ascii=False, indent=None, separators=None, sort_keys=False) with
// those keywords accepted. It is not ardanlabs/jinja's, which prints 1.0 as 1
// and ignores indent and sort_keys.
func tojson(args []jinja.Value, kwargs map[string]jinja.Value) (jinja.Value, error) {
	if len(args) == 0 {
		return jinja.Undefined(), errors.New("tojson: no value")
	}
	p := jsonPrinter{itemSep: ", ", keySep: ": "}
	if v, ok := kwargs["indent"]; ok && !v.IsNone() && !v.IsUndefined() {
		switch {
		case v.IsInt():
			p.indent = strings.Repeat(" ", int(v.AsInt()))
		case v.IsString():
			p.indent = v.AsString()
		default:
			return jinja.Undefined(), errors.New("tojson: indent must be an int or a string")
		}
		p.indented = true
		p.itemSep = ","
	}
	if v, ok := kwargs["separators"]; ok && !v.IsNone() && !v.IsUndefined() {
		if !v.IsList() || v.AsList().Len() != 2 || !v.AsList().Get(0).IsString() || !v.AsList().Get(1).IsString() {
			return jinja.Undefined(), errors.New("tojson: separators must be two strings")
		}
		p.itemSep, p.keySep = v.AsList().Get(0).AsString(), v.AsList().Get(1).AsString()
	}
	if v, ok := kwargs["sort_keys"]; ok {
		p.sortKeys = v.IsTruthy()
	}
	if v, ok := kwargs["ensure_ascii"]; ok {
		p.ensureASCII = v.IsTruthy()
	}
	if err := p.value(args[0], 0); err != nil {
		return jinja.Undefined(), err
	}
	return jinja.NewString(p.sb.String()), nil
}

type jsonPrinter struct {
	sb                 strings.Builder
	itemSep, keySep    string
	indent             string
	indented, sortKeys bool
	ensureASCII        bool
}

func (p *jsonPrinter) newline(level int) {
	if p.indented {
		p.sb.WriteByte('\n')
		for i := 0; i < level; i++ {
			p.sb.WriteString(p.indent)
		}
	}
}

func (p *jsonPrinter) value(v jinja.Value, level int) error {
	switch {
	case v.IsNone() || v.IsUndefined():
		p.sb.WriteString("null")
	case v.IsBool():
		if v.AsBool() {
			p.sb.WriteString("true")
		} else {
			p.sb.WriteString("false")
		}
	case v.IsInt():
		p.sb.WriteString(strconv.FormatInt(v.AsInt(), 10))
	case v.IsFloat():
		p.sb.WriteString(pyFloat(v.AsFloat()))
	case v.IsString():
		p.str(v.AsString())
	case v.IsList():
		items := v.AsList().Items
		if len(items) == 0 {
			p.sb.WriteString("[]")
			return nil
		}
		p.sb.WriteByte('[')
		for i, it := range items {
			if i > 0 {
				p.sb.WriteString(p.itemSep)
			}
			p.newline(level + 1)
			if err := p.value(it, level+1); err != nil {
				return err
			}
		}
		p.newline(level)
		p.sb.WriteByte(']')
	case v.IsDict():
		d := v.AsDict()
		keys := d.OrderedKeys()
		if len(keys) == 0 {
			p.sb.WriteString("{}")
			return nil
		}
		if p.sortKeys {
			keys = append([]string(nil), keys...)
			sort.Strings(keys) // Python sorts by code point; Go by bytes: the same order for valid UTF-8
		}
		p.sb.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				p.sb.WriteString(p.itemSep)
			}
			p.newline(level + 1)
			p.str(k)
			p.sb.WriteString(p.keySep)
			val, _ := d.Get(k)
			if err := p.value(val, level+1); err != nil {
				return err
			}
		}
		p.newline(level)
		p.sb.WriteByte('}')
	default:
		return fmt.Errorf("tojson: cannot serialise a %s", v.String())
	}
	return nil
}

// str writes s as Python's json.dumps does: short escapes for " \ \n \r \t
// \b \f, \u00XX for other control characters, everything else as is (or
// \uXXXX with surrogate pairs under ensure_ascii).
func (p *jsonPrinter) str(s string) {
	p.sb.WriteByte('"')
	for _, r := range s {
		switch r {
		case '"':
			p.sb.WriteString(`\"`)
		case '\\':
			p.sb.WriteString(`\\`)
		case '\n':
			p.sb.WriteString(`\n`)
		case '\r':
			p.sb.WriteString(`\r`)
		case '\t':
			p.sb.WriteString(`\t`)
		case '\b':
			p.sb.WriteString(`\b`)
		case '\f':
			p.sb.WriteString(`\f`)
		default:
			switch {
			case r < 0x20:
				fmt.Fprintf(&p.sb, `\u%04x`, r)
			case p.ensureASCII && r > 0x7e:
				if r > 0xFFFF {
					a, b := utf16.EncodeRune(r)
					fmt.Fprintf(&p.sb, `\u%04x\u%04x`, a, b)
				} else {
					fmt.Fprintf(&p.sb, `\u%04x`, r)
				}
			default:
				p.sb.WriteRune(r)
			}
		}
	}
	p.sb.WriteByte('"')
}

// pyFloat formats f as Python's repr(float): the shortest round-trip digits,
// positional with at least one fractional digit for 1e-4 <= |f| < 1e16,
// otherwise scientific with a two-digit-minimum exponent.
func pyFloat(f float64) string {
	switch {
	case math.IsNaN(f):
		return "NaN"
	case math.IsInf(f, 1):
		return "Infinity"
	case math.IsInf(f, -1):
		return "-Infinity"
	}
	if a := math.Abs(f); a == 0 || (a >= 1e-4 && a < 1e16) {
		s := strconv.FormatFloat(f, 'f', -1, 64)
		if !strings.Contains(s, ".") {
			s += ".0"
		}
		return s
	}
	return strconv.FormatFloat(f, 'e', -1, 64)
}
