package pipefile

import "testing"

// The inline tables of a stage key's array value are found where they
// open, on one line or several, past strings and comments holding braces;
// a --set value has no item positions of the file's.
func TestItemPositions(t *testing.T) {
	src := `[[stage]]
id    = "rules"
kind  = "filter"
rules = [
  {reject_if = 'completion.answer == "{"', reason = "a"},  # { a comment
  # {not an item}
  {reject_if = "true", reason = "b"},
]
set = [{field = "meta.a", value = '1'}, {field = "meta.b", value = '2'}]
`
	f, probs := Parse("p.toml", []byte(src), Options{})
	if len(probs) > 0 {
		t.Fatal(probs)
	}
	sd := f.Stages[0]
	for _, tc := range []struct {
		key       string
		i         int
		line, col int
	}{
		{"rules", 0, 5, 3}, {"rules", 1, 7, 3}, {"rules", 2, 4, 1},
		{"set", 0, 9, 8}, {"set", 1, 9, 41},
	} {
		if p := sd.ElemPosition(tc.key, tc.i); p.Line != tc.line || p.Col != tc.col {
			t.Errorf("%s item %d at %d:%d, want %d:%d", tc.key, tc.i, p.Line, p.Col, tc.line, tc.col)
		}
	}

	f, probs = Parse("p.toml", []byte(src), Options{Set: []string{`rules.rules=[{reject_if = "false", reason = "c"}]`}})
	if len(probs) > 0 {
		t.Fatal(probs)
	}
	if p := f.Stages[0].ElemPosition("rules", 0); p.File == "p.toml" && p.Line == 5 {
		t.Errorf("a --set value's item is shown at the file's item: %v", p)
	}
}
