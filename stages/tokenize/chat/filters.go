package chat

import (
	"fmt"
	"regexp"
	"sort"
	"strings"

	"github.com/ardanlabs/jinja"
)

// Filters whose ardanlabs/jinja built-in differs from Python jinja2's are
// renamed in the template source to template variables holding ours, as
// tojson is (the library resolves its built-ins before variables).
var pythonFilters = map[string]func([]jinja.Value, map[string]jinja.Value) (jinja.Value, error){
	"trim": trim,
}

var pythonFilterCall = regexp.MustCompile(`\|\s*(trim)\b`)

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

// pyStr is str(v) as jinja2 prints it (an undefined value prints as "").
func pyStr(v jinja.Value) string {
	switch {
	case v.IsString():
		return v.AsString()
	case v.IsUndefined():
		return ""
	}
	return v.String()
}
