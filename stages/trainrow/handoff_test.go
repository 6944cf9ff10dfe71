package trainrow

import (
	"strings"
	"testing"

	"github.com/pipe-dev/pipe/internal/testrig/trainers"
)

// Strings YAML 1.1 would read as another type stay strings (PyYAML's
// safe_load reads "on" as true, "1.0" as a float), and a comment of
// several lines stays a comment.
func TestDataBlockYAMLQuoting(t *testing.T) {
	for _, tmpl := range []string{"on", "1.0", "null", "qwen3.5", "a: b", "#x", "[x]"} {
		d, err := NewDataBlock(Conversations, "/d/yes", 4096, tmpl)
		if err != nil {
			t.Fatal(err)
		}
		text, err := d.YAML([]string{"two\nlines"})
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(string(text), "# two\n# lines\ndata:\n") {
			t.Errorf("%q: %s", tmpl, text)
		}
		if errs := trainers.CheckSpecForgeConfigYAML(text); errs != nil {
			t.Errorf("template %q: %v\n%s", tmpl, errs, text)
		}
	}
	if _, err := NewDataBlock(Records, "x", 1, ""); err == nil {
		t.Error("records layout: no error")
	}
	if got := HandoffPath("/d/out.jsonl"); got != "/d/out.specforge.yaml" {
		t.Errorf("HandoffPath %s", got)
	}
}
