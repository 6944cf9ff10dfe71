package chat

import (
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"unicode/utf16"

	"github.com/ardanlabs/jinja"
	"github.com/go-json-experiment/json/jsontext"
)

// tojson is Hugging Face's tojson filter: Python's json.dumps(x,
// ensure_ascii=False, indent=None, separators=None, sort_keys=False) with
// those keywords accepted. It is not ardanlabs/jinja's, which prints 1.0 as 1
// and ignores indent and sort_keys.
func tojson(args []jinja.Value, kwargs map[string]jinja.Value) (jinja.Value, error) {
	if len(args) == 0 {
		return jinja.Undefined(), errors.New("tojson: no value")
	}
	p := jsonPrinter{itemSep: ", ", keySep: ": "}
	if err := p.setOptions(kwargs); err != nil {
		return jinja.Undefined(), err
	}
	if err := p.value(args[0], 0); err != nil {
		return jinja.Undefined(), err
	}
	return jinja.NewString(p.sb.String()), nil
}

// given is a keyword argument that is set and not None.
func given(kwargs map[string]jinja.Value, key string) (jinja.Value, bool) {
	v, ok := kwargs[key]
	return v, ok && !v.IsNone() && !v.IsUndefined()
}

// setOptions takes json.dumps' indent, separators, sort_keys and
// ensure_ascii.
func (p *jsonPrinter) setOptions(kwargs map[string]jinja.Value) error {
	if v, ok := given(kwargs, "indent"); ok {
		switch {
		case v.IsInt():
			p.indent = strings.Repeat(" ", int(v.AsInt()))
		case v.IsString():
			p.indent = v.AsString()
		default:
			return errors.New("tojson: indent must be an int or a string")
		}
		p.indented = true
		p.itemSep = ","
	}
	if v, ok := given(kwargs, "separators"); ok {
		if !v.IsList() || v.AsList().Len() != 2 || !v.AsList().Get(0).IsString() || !v.AsList().Get(1).IsString() {
			return errors.New("tojson: separators must be two strings")
		}
		p.itemSep, p.keySep = v.AsList().Get(0).AsString(), v.AsList().Get(1).AsString()
	}
	if v, ok := kwargs["sort_keys"]; ok {
		p.sortKeys = v.IsTruthy()
	}
	if v, ok := kwargs["ensure_ascii"]; ok {
		p.ensureASCII = v.IsTruthy()
	}
	return nil
}

type jsonPrinter struct {
	sb                 strings.Builder
	buf                []byte // str's scratch
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
	case v.IsNone():
		p.sb.WriteString("null")
	case v.IsUndefined():
		// jinja2's Undefined is no JSON value: json.dumps raises, so a
		// template printing a missing key (Qwen3's tool_call.arguments
		// of a call without arguments) fails as it does in Python.
		return errors.New("tojson: Object of type Undefined is not JSON serializable")
	case v.IsBool():
		p.sb.WriteString(strconv.FormatBool(v.AsBool()))
	case v.IsInt():
		p.sb.WriteString(strconv.FormatInt(v.AsInt(), 10))
	case v.IsFloat():
		p.sb.WriteString(pyFloat(v.AsFloat()))
	case v.IsString():
		p.str(v.AsString())
	case v.IsList():
		return p.list(v.AsList().Items, level)
	case v.IsDict():
		return p.dict(v.AsDict(), level)
	default:
		return fmt.Errorf("tojson: cannot serialise a %s", v.String())
	}
	return nil
}

func (p *jsonPrinter) list(items []jinja.Value, level int) error {
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
	return nil
}

func (p *jsonPrinter) dict(d *jinja.Dict, level int) error {
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
	return nil
}

// str writes s as Python's json.dumps does: short escapes for " \ \n \r \t
// \b \f, \u00XX for other control characters, everything else as is —
// which is jsontext's quoting — or, under ensure_ascii, \uXXXX (surrogate
// pairs above U+FFFF) for everything outside space..~.
func (p *jsonPrinter) str(s string) {
	// Invalid UTF-8 (which a Python str cannot hold) becomes U+FFFD.
	q, _ := jsontext.AppendQuote(p.buf[:0], s)
	p.buf = q
	if !p.ensureASCII {
		p.sb.Write(q)
		return
	}
	for _, r := range string(q) {
		switch {
		case r < 0x7f:
			p.sb.WriteRune(r)
		case r > 0xFFFF:
			a, b := utf16.EncodeRune(r)
			fmt.Fprintf(&p.sb, `\u%04x\u%04x`, a, b)
		default:
			fmt.Fprintf(&p.sb, `\u%04x`, r)
		}
	}
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
