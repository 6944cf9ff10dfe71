package chat

import (
	"fmt"
	"math"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"unicode"

	"github.com/ardanlabs/jinja"
)

// Filters whose ardanlabs/jinja built-in differs from Python jinja2's are
// renamed in the template source to template variables holding ours, as
// tojson is (the library resolves its built-ins before variables).
var pythonFilters = map[string]func([]jinja.Value, map[string]jinja.Value) (jinja.Value, error){
	"trim":   trim,
	"string": str,
}

var pythonFilterCall = regexp.MustCompile(`\|\s*(trim|string)\b`)

const ourFilterPrefix = "__pipe_filter_"

// The filters and tests ardanlabs/jinja v1.8.0 implements (builtins.go,
// registerFilters and evalTest), plus ours. A template using any other is
// refused when it is compiled instead of failing on the first row.
var (
	knownFilters = set("tojson", "from_json", "fromjson", "items", "join", "default", "d", "trim", "lower", "upper",
		"title", "capitalize", "first", "last", "length", "count", "reverse", "sort", "unique", "list", "int",
		"float", "string", "safe", "replace", "round", "abs", "map", "select", "reject", "selectattr",
		"rejectattr", "indent", "wordcount", "escape", "e", "dictsort", "max", "min", "sum", "batch")
	knownTests = set("defined", "undefined", "none", "boolean", "integer", "float", "number", "string", "mapping",
		"iterable", "sequence", "callable", "true", "false", "eq", "equalto", "ne", "gt", "greaterthan", "ge",
		"lt", "lessthan", "le", "in", "odd", "even", "upper", "lower", "sameas")
)

func set(names ...string) map[string]bool {
	m := make(map[string]bool, len(names))
	for _, n := range names {
		m[n] = true
	}
	return m
}

// addFilters checks the filters and tests source uses, and where it uses
// one of pythonFilters recompiles it with ours in their place.
func (t *Template) addFilters(source string) error {
	if err := checkFiltersAndTests(source); err != nil {
		return err
	}
	if !pythonFilterCall.MatchString(source) {
		return nil
	}
	source = pythonFilterCall.ReplaceAllString(source, "| "+ourFilterPrefix+"$1")
	tmpl, err := jinja.Compile(source)
	if err != nil {
		return fmt.Errorf("chat template: %w", err)
	}
	t.tmpl = tmpl
	for name, fn := range pythonFilters {
		t.vars[ourFilterPrefix+name] = jinja.NewCallable(name, fn)
	}
	return nil
}

var (
	tagRe     = regexp.MustCompile(`(?s)\{\{.*?\}\}|\{%.*?%\}`)
	stringRe  = regexp.MustCompile(`'(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*"`)
	filterRe  = regexp.MustCompile(`\|\s*([A-Za-z_]\w*)`)
	testRe    = regexp.MustCompile(`\bis\s+(?:not\s+)?([A-Za-z_]\w*)`)
	macroRe   = regexp.MustCompile(`\{%-?\s*(?:macro|set)\s+([A-Za-z_]\w*)`)
	rawFilter = regexp.MustCompile(`\{%-?\s*filter\s+([A-Za-z_]\w*)`)
)

// checkFiltersAndTests names the first filter or test in source that is
// neither known nor ours. String literals are skipped; a variable the
// template defines itself ({% set %}, {% macro %}) may be called as a filter.
func checkFiltersAndTests(source string) error {
	defined := map[string]bool{}
	for _, m := range macroRe.FindAllStringSubmatch(source, -1) {
		defined[m[1]] = true
	}
	var badFilters, badTests []string
	for _, tag := range tagRe.FindAllString(source, -1) {
		code := stringRe.ReplaceAllString(tag, "''")
		for _, m := range filterRe.FindAllStringSubmatch(code, -1) {
			if !knownFilters[m[1]] && !defined[m[1]] && !strings.HasPrefix(m[1], "__pipe") {
				badFilters = append(badFilters, m[1])
			}
		}
		for _, m := range rawFilter.FindAllStringSubmatch(code, -1) {
			if !knownFilters[m[1]] {
				badFilters = append(badFilters, m[1])
			}
		}
		for _, m := range testRe.FindAllStringSubmatch(code, -1) {
			if !knownTests[m[1]] && m[1] != "not" {
				badTests = append(badTests, m[1])
			}
		}
	}
	switch {
	case len(badFilters) > 0:
		return fmt.Errorf("chat template: filter %q is not supported (supported: %s)", badFilters[0], names(knownFilters))
	case len(badTests) > 0:
		return fmt.Errorf("chat template: test %q is not supported (supported: %s)", badTests[0], names(knownTests))
	}
	return nil
}

func names(m map[string]bool) string {
	var out []string
	for n := range m {
		out = append(out, n)
	}
	sort.Strings(out)
	return strings.Join(out, ", ")
}

// pythonSpace is Python's str.isspace: Unicode White_Space plus the
// information separators U+001C..U+001F, which Go's unicode.IsSpace leaves out.
func pythonSpace(r rune) bool {
	switch r {
	case '\t', '\n', '\v', '\f', '\r', 0x1c, 0x1d, 0x1e, 0x1f, ' ', 0x85, 0xa0, 0x1680,
		0x2028, 0x2029, 0x202f, 0x205f, 0x3000:
		return true
	}
	return r >= 0x2000 && r <= 0x200a
}

// trim is jinja2's do_trim: str.strip(chars), Python's whitespace by default.
func trim(args []jinja.Value, kwargs map[string]jinja.Value) (jinja.Value, error) {
	if len(args) == 0 {
		return jinja.NewString(""), nil
	}
	s := pyStr(args[0])
	chars, ok := kwargs["chars"]
	if len(args) > 1 {
		chars, ok = args[1], true
	}
	if ok && !chars.IsNone() && !chars.IsUndefined() {
		return jinja.NewString(strings.Trim(s, pyStr(chars))), nil
	}
	return jinja.NewString(strings.TrimFunc(s, pythonSpace)), nil
}

// str is jinja2's string filter: Python's str(). The library's prints
// None as "", a float with %g (1.0 as "1", 123456789.5 as "1.23457e+08")
// and a string inside a list or dict without Python's escapes. XML-style
// tool templates (Qwen3-Coder, Qwen3.5/3.6) print scalar arguments and
// schema keys with it.
func str(args []jinja.Value, _ map[string]jinja.Value) (jinja.Value, error) {
	if len(args) == 0 {
		return jinja.NewString(""), nil
	}
	return jinja.NewString(pyStr(args[0])), nil
}

// pyStr is str(v) as jinja2 prints it (an undefined value prints as "").
func pyStr(v jinja.Value) string {
	switch {
	case v.IsString():
		return v.AsString()
	case v.IsUndefined():
		return ""
	}
	var b strings.Builder
	pyRepr(&b, v)
	return b.String()
}

// pyRepr writes Python's repr(v) of a value read from JSON.
func pyRepr(b *strings.Builder, v jinja.Value) {
	switch {
	case v.IsNone():
		b.WriteString("None")
	case v.IsBool():
		if v.AsBool() {
			b.WriteString("True")
		} else {
			b.WriteString("False")
		}
	case v.IsInt():
		b.WriteString(strconv.FormatInt(v.AsInt(), 10))
	case v.IsFloat():
		b.WriteString(pyFloatRepr(v.AsFloat()))
	case v.IsString():
		pyQuote(b, v.AsString())
	case v.IsList():
		pyReprList(b, v.AsList().Items)
	case v.IsDict():
		pyReprDict(b, v.AsDict())
	case v.IsUndefined():
	default:
		b.WriteString(v.String())
	}
}

// pyFloatRepr is Python's repr of a float, nan and ±inf included.
func pyFloatRepr(f float64) string {
	switch {
	case math.IsNaN(f):
		return "nan"
	case math.IsInf(f, 1):
		return "inf"
	case math.IsInf(f, -1):
		return "-inf"
	}
	return pyFloat(f)
}

// pyReprList writes Python's repr of a list: [a, b].
func pyReprList(b *strings.Builder, items []jinja.Value) {
	b.WriteByte('[')
	for i, it := range items {
		if i > 0 {
			b.WriteString(", ")
		}
		pyRepr(b, it)
	}
	b.WriteByte(']')
}

// pyReprDict writes Python's repr of a dict, its keys in their order:
// {'k': v, 'l': w}.
func pyReprDict(b *strings.Builder, d *jinja.Dict) {
	b.WriteByte('{')
	for i, k := range d.OrderedKeys() {
		if i > 0 {
			b.WriteString(", ")
		}
		pyQuote(b, k)
		b.WriteString(": ")
		val, _ := d.Get(k)
		pyRepr(b, val)
	}
	b.WriteByte('}')
}

// pyQuote writes Python's repr of a str: single quotes unless the text
// holds a single quote and no double quote; \\, the quote, \t \n \r
// escaped; other characters that are not printable (Go's unicode.IsPrint
// is Python's str.isprintable: categories L, M, N, P, S and the ASCII
// space) as \xNN, \uNNNN or \UNNNNNNNN.
func pyQuote(b *strings.Builder, s string) {
	q := byte('\'')
	if strings.IndexByte(s, '\'') >= 0 && strings.IndexByte(s, '"') < 0 {
		q = '"'
	}
	b.WriteByte(q)
	for _, r := range s {
		switch {
		case r == rune(q) || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r == '\t':
			b.WriteString(`\t`)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case unicode.IsPrint(r):
			b.WriteRune(r)
		case r < 0x100:
			fmt.Fprintf(b, `\x%02x`, r)
		case r < 0x10000:
			fmt.Fprintf(b, `\u%04x`, r)
		default:
			fmt.Fprintf(b, `\U%08x`, r)
		}
	}
	b.WriteByte(q)
}
