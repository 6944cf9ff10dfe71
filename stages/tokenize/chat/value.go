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

	"github.com/ardanlabs/jinja"
)

// fromJSON decodes JSON into a template value the way Python's json.loads
// does: objects keep key order, integers stay ints and numbers with a
// fraction or exponent become floats.
func fromJSON(b []byte) (jinja.Value, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	v, err := decodeValue(dec)
	if err != nil {
		return jinja.Undefined(), err
	}
	if dec.More() {
		return jinja.Undefined(), errors.New("trailing data after JSON value")
	}
	return v, nil
}

func decodeValue(dec *json.Decoder) (jinja.Value, error) {
	tok, err := dec.Token()
	if err != nil {
		return jinja.Undefined(), err
	}
	switch x := tok.(type) {
	case json.Delim:
		switch x {
		case '{':
			d := jinja.NewDict()
			for dec.More() {
				k, err := dec.Token()
				if err != nil {
					return jinja.Undefined(), err
				}
				v, err := decodeValue(dec)
				if err != nil {
					return jinja.Undefined(), err
				}
				d.AsDict().Set(k.(string), v)
			}
			_, err := dec.Token()
			return d, err
		case '[':
			var items []jinja.Value
			for dec.More() {
				v, err := decodeValue(dec)
				if err != nil {
					return jinja.Undefined(), err
				}
				items = append(items, v)
			}
			_, err := dec.Token()
			return jinja.NewList(items), err
		}
	case string:
		return jinja.NewString(x), nil
	case bool:
		return jinja.NewBool(x), nil
	case nil:
		return jinja.None(), nil
	case json.Number:
		s := x.String()
		if !strings.ContainsAny(s, ".eE") {
			if n, err := strconv.ParseInt(s, 10, 64); err == nil {
				return jinja.NewInt(n), nil
			}
		}
		f, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return jinja.Undefined(), fmt.Errorf("number %s: %w", s, err)
		}
		return jinja.NewFloat(f), nil
	}
	return jinja.Undefined(), fmt.Errorf("unexpected JSON token %v", tok)
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
