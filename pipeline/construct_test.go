package pipeline_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/pipe-dev/pipe/pipeline"
	"github.com/pipe-dev/pipe/pipeline/config"
	"github.com/pipe-dev/pipe/pipeline/internal/testkinds"
	"github.com/pipe-dev/pipe/pipeline/pipefile"
)

// splitConfig is a config only its constructor can judge: whether sep
// occurs in every one of its fields' values is not a matter of one key.
type splitConfig struct {
	Sep   string `toml:"sep" default:","`
	Parts int    `toml:"parts" default:"2" min:"1"`
}

func newSplit(c *splitConfig) (pipeline.Processor, error) {
	if c.Parts > 1 && c.Sep == "" {
		return nil, &config.FieldError{Key: "sep", Msg: fmt.Sprintf("must not be empty with parts = %d", c.Parts)}
	}
	if c.Sep == "|" {
		return nil, errors.New(`sep "|" is reserved`)
	}
	return &testkinds.Pass{}, nil
}

// TestCheckCallsConstructor: pipe check (Build) reports what only a
// constructor rejects, position first, at the key the constructor names
// (a config.FieldError) or at the stage; a valid config builds.
func TestCheckCallsConstructor(t *testing.T) {
	reg := testRegistry()
	reg.Register(pipeline.Spec{Kind: "split", Summary: "test: constructor-checked config", Outputs: []string{"out"},
		New: pipeline.NewProcessor(newSplit)})
	for _, tc := range []struct{ keys, want string }{
		{`sep = ""`, `p.toml:11:1: stage "s" (split): sep must not be empty with parts = 2`},
		{`sep = "|"`, `p.toml:6:1: stage "s" (split): sep "|" is reserved`},
		{`sep = ";"`, ``},
	} {
		src := `[[stage]]
id = "c"
kind = "count"
n = 1

[[stage]]
id = "s"
kind = "split"
input = "c"
parts = 2
` + tc.keys + `

[[stage]]
id = "out"
kind = "collect"
input = "s"
`
		f, probs := pipefile.Parse("p.toml", []byte(src), pipefile.Options{})
		if len(probs) > 0 {
			t.Fatal(probs)
		}
		_, probs = pipeline.Build(f, reg)
		if got := strings.TrimSpace(fmt.Sprint(probs.Error())); tc.want == "" && len(probs) > 0 || tc.want != "" && got != tc.want {
			t.Errorf("%s: got %q, want %q", tc.keys, got, tc.want)
		}
	}
}

// TestRegisterSetsConfigAndSource: the kind's config type and whether it is
// a source come from its constructor's type, not from the spec.
func TestRegisterSetsConfigAndSource(t *testing.T) {
	reg := testRegistry()
	if s := reg.Lookup("count"); !s.Source || fmt.Sprintf("%T", s.Config) != "testkinds.CountConfig" {
		t.Errorf("count: Source %v, Config %T; want a source with countConfig", s.Source, s.Config)
	}
	if s := reg.Lookup("pass"); s.Source || fmt.Sprintf("%T", s.Config) != "testkinds.PassConfig" {
		t.Errorf("pass: Source %v, Config %T; want a processor with passConfig", s.Source, s.Config)
	}
	for _, bad := range []pipeline.Spec{
		{Kind: "no-new"},
		{Kind: "src-flag", Source: true, New: pipeline.NewProcessor(newSplit)},
		{Kind: "other-config", Config: testkinds.PassConfig{}, New: pipeline.NewProcessor(newSplit)},
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("Register(%s) did not panic", bad.Kind)
				}
			}()
			pipeline.NewRegistry().Register(bad)
		}()
	}
}
