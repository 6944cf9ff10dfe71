package chat

import (
	"strings"
	"testing"
)

// TestTrimIsPythons: jinja2's trim is str.strip, whose whitespace includes
// U+001C..U+001F (Go's strings.TrimSpace keeps them); with an argument it
// strips those characters.
func TestTrimIsPythons(t *testing.T) {
	msgs := []Message{NewMessage("user", "\x1c\u3000 x y\u2029\x1f\n")}
	got := render(t, "[{{ messages[0].content | trim }}][{{ 'xxhixx' | trim('x') }}][{{ none | trim }}]", msgs, Options{})
	if want := "[x y][hi][None]"; got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
}

// TestUnknownFilterOrTestRefusedByName: a template using a filter or test
// the renderer lacks is refused when compiled, naming it; names inside
// string literals and the template's own macros do not count.
func TestUnknownFilterOrTestRefusedByName(t *testing.T) {
	for src, want := range map[string]string{
		"{{ messages[0].content | wordwrap(10) }}":               `filter "wordwrap" is not supported`,
		"{% if messages|length is divisibleby(2) %}x{% endif %}": `test "divisibleby" is not supported`,
		"{% filter center %}x{% endfilter %}":                    `filter "center" is not supported`,
	} {
		if _, err := New(src, nil); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v, want %q", src, err, want)
		}
	}
	for _, src := range []string{
		"{{ '<|im_start|>' + 'a | wordwrap' }}{{ \"x is odd2\" }}",
		"{% macro shout(s) %}{{ s | upper }}{% endmacro %}{{ messages[0].content | trim | length }}",
		"{% if messages[0].content is not none and messages is iterable %}ok{% endif %}",
	} {
		if _, err := New(src, nil); err != nil {
			t.Errorf("%s: %v", src, err)
		}
	}
}
