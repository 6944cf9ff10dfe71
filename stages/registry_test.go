package stages

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/pipe-dev/pipe/pipeline"
	"github.com/pipe-dev/pipe/pipeline/pipefile"
	"github.com/pipe-dev/pipe/pipeline/rundir/layout"
)

// Every kind documents itself, and its example is a pipeline that passes the
// same checks as `pipe check` (input files it names are created empty).
func TestEveryKindHasSummaryAndValidExample(t *testing.T) {
	reg := pipeline.DefaultRegistry
	if len(reg.Kinds()) == 0 {
		t.Fatal("no kinds registered")
	}
	for _, kind := range reg.Kinds() {
		t.Run(kind, func(t *testing.T) {
			spec := reg.Lookup(kind)
			if strings.TrimSpace(spec.Summary) == "" {
				t.Fatal("no summary")
			}
			for _, f := range spec.FieldDocs() {
				if f.Doc == "" {
					t.Errorf("key %q has no doc", f.Key)
				}
				// A default is stated once, in the default tag, which
				// pipe stages shows beside the doc.
				if strings.Contains(f.Doc, "(default ") {
					t.Errorf("key %q: its doc restates the default (%s): keep it in the default tag alone", f.Key, f.Doc)
				}
			}
			dir := t.TempDir()
			path := filepath.Join(dir, "example.toml")
			if err := os.WriteFile(path, []byte(spec.Example), 0o644); err != nil {
				t.Fatal(err)
			}
			f, probs := pipefile.Load(path, pipefile.Options{Getenv: func(string) (string, bool) { return dir, true }})
			if f == nil {
				t.Fatal(probs)
			}
			uses := false
			for _, sd := range f.Stages {
				uses = uses || sd.Kind == kind
			}
			if !uses {
				t.Fatalf("example has no stage of kind %q:\n%s", kind, spec.Example)
			}
			createInputs(t, f, reg)
			f, probs = pipefile.Load(path, pipefile.Options{Getenv: func(string) (string, bool) { return dir, true }})
			plan, bprobs := pipeline.Build(f, reg)
			probs = append(probs, bprobs...)
			if len(probs) == 0 {
				probs = plan.CheckOutputs()
			}
			if len(probs) > 0 {
				t.Fatalf("example fails pipe check:\n%v\n%s", probs, spec.Example)
			}
			// Hooks typed for another kind's config panic (FieldsFor
			// ran in Build).
			for _, ps := range plan.Stages {
				if ps.Spec.KeySettings != nil {
					ps.Spec.KeySettings(ps.Config)
				}
			}
		})
	}
}

// minimalContents are the smallest valid contents of files whose contents
// `pipe check` reads (tokenize.CheckFile reads tokenizer.json's components).
var minimalContents = map[string][]byte{
	"tokenizer.json": []byte(`{"model": {"type": "BPE", "unk_token": "a", "vocab": {"a": 0}, "merges": []}}`),
}

// createInputs makes empty files (or directories) for every input path of
// the example, so the check exercises everything but their contents.
func createInputs(t *testing.T, f *pipefile.File, reg *pipeline.Registry) {
	for _, sd := range f.Stages {
		spec := reg.Lookup(sd.Kind)
		if spec == nil {
			continue
		}
		rt := reflect.TypeOf(spec.Config)
		for i := 0; i < rt.NumField(); i++ {
			sf := rt.Field(i)
			mode := sf.Tag.Get("path")
			if !pipeline.IsInputMode(mode) {
				continue
			}
			var paths []string // a path, or a list of them
			switch raw := sd.Raw[sf.Tag.Get("toml")].(type) {
			case string:
				paths = []string{raw}
			case []any:
				for _, v := range raw {
					if s, ok := v.(string); ok {
						paths = append(paths, s)
					}
				}
			}
			for _, p := range paths {
				createInput(f.Dir, p, mode, sf.Tag.Get("contains"))
			}
		}
	}
}

// createInput makes the input p (relative to dir) an example names: a
// run directory, a model directory with its files, or an empty file.
func createInput(dir, p, mode, contains string) {
	if !filepath.IsAbs(p) {
		p = filepath.Join(dir, p)
	}
	switch mode {
	case "rundir":
		os.MkdirAll(layout.JournalDir(p), 0o755)
	case "indir":
		os.MkdirAll(p, 0o755)
		for _, name := range strings.Split(contains, ",") {
			if name != "" {
				os.WriteFile(filepath.Join(p, name), minimalContents[name], 0o644)
			}
		}
	default:
		os.MkdirAll(filepath.Dir(p), 0o755)
		os.WriteFile(p, nil, 0o644)
	}
}
