package pipeline_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pipe-dev/pipe/pipeline"
	"github.com/pipe-dev/pipe/pipeline/internal/testkinds"
	"github.com/pipe-dev/pipe/pipeline/pipefile"
)

// filesConfig has one path key of each mode, for the path checks.
type filesConfig struct {
	Model   string   `toml:"model" required:"true" path:"indir"`
	Extra   string   `toml:"extra" path:"in"`
	Against []string `toml:"against" path:"in"`
	Out     string   `toml:"out" path:"out"`
	Shards  string   `toml:"shards" path:"dir"`
}

// pathRegistry is testRegistry plus "files", a pass-through whose keys read
// and write paths (it is never run).
func pathRegistry() *pipeline.Registry {
	reg := testRegistry()
	reg.Register(pipeline.Spec{Kind: "files", Summary: "test path keys", Outputs: []string{"out"},
		New: pipeline.NewProcessor(func(c *filesConfig) (pipeline.Processor, error) { return &testkinds.Pass{}, nil })})
	return reg
}

// TestPathChecks: plan time refuses what would lose data when the run ends
// (an empty path, two writers on one path, an output that is an input or the
// run directory), every problem at once, each at its position.
func TestPathChecks(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"p.jsonl", "data/model/tokenizer.json"} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte("{}\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("p.jsonl", filepath.Join(dir, "link.jsonl")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("data", filepath.Join(dir, "alias")); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"OUT": "", "MODEL_DIR": "", "A": "", "B": "", "HOME_OUT": dir}

	// src is prepended to every case (whose first line is then line 12): a
	// source reading p.jsonl (path on line 6), its writer w1 (path on line 11).
	const src = `[pipeline]
run_dir = "run"
[[stage]]
id = "prompts"
kind = "read-prompts"
path = "p.jsonl"
[[stage]]
id = "w1"
kind = "write-jsonl"
input = "prompts"
path = "out.jsonl"
`
	for _, tc := range []struct {
		name string
		toml string
		set  []string
		want []string // DIR stands for the test's directory
	}{
		{name: "distinct paths are fine", toml: `
[[stage]]
id = "w2"
kind = "write-jsonl"
input = "prompts"
path = "${env:HOME_OUT}/data/out.jsonl"
`},
		{name: "output from an empty environment variable", toml: `
[[stage]]
id = "w2"
kind = "write-jsonl"
input = "prompts"
path = "${env:OUT}"
`, want: []string{
			`DIR/test.toml:16:1: stage "w2" (write-jsonl): path is empty (environment variable OUT is set but empty)`,
		}},
		{name: "empty environment variable through a var", toml: `
[vars]
out_a = "${env:A}"
out = "${out_a}${env:B}"
[[stage]]
id = "w2"
kind = "write-jsonl"
input = "prompts"
path = "${out}"
`, want: []string{
			`DIR/test.toml:19:1: stage "w2" (write-jsonl): path is empty (environment variables A, B are set but empty)`,
		}},
		{name: "literal empty output", toml: `
[[stage]]
id = "w2"
kind = "write-jsonl"
input = "prompts"
path = ""
`, want: []string{
			`DIR/test.toml:16:1: stage "w2" (write-jsonl): path is empty`,
		}},
		{name: "required input directory from an empty variable", toml: `
[[stage]]
id = "f"
kind = "files"
input = "prompts"
model = "${env:MODEL_DIR}"
[[stage]]
id = "w2"
kind = "write-jsonl"
input = "f"
path = "f.jsonl"
`, want: []string{
			`DIR/test.toml:16:1: stage "f" (files): model is empty (environment variable MODEL_DIR is set but empty)`,
		}},
		{name: "optional input left empty means none", toml: `
[[stage]]
id = "f"
kind = "files"
input = "prompts"
model = "data/model"
extra = ""
[[stage]]
id = "w2"
kind = "write-jsonl"
input = "f"
path = "f.jsonl"
`},
		{name: "empty item in a list of paths, optional outputs empty", toml: `
[[stage]]
id = "f"
kind = "files"
input = "prompts"
model = "data/model"
against = ["p.jsonl", "${env:A}"]
out = ""
shards = "${env:OUT}"
[[stage]]
id = "w2"
kind = "write-jsonl"
input = "f"
path = "f.jsonl"
`, want: []string{
			`DIR/test.toml:17:1: stage "f" (files): against item 2 is empty (environment variable A is set but empty)`,
			`DIR/test.toml:18:1: stage "f" (files): out is empty`,
			`DIR/test.toml:19:1: stage "f" (files): shards is empty (environment variable OUT is set but empty)`,
		}},
		{name: "every bad item of a list of paths", toml: `
[[stage]]
id = "f"
kind = "files"
input = "prompts"
model = "data/model"
against = ["absent1.jsonl", "p.jsonl", "absent2.jsonl", "${env:A}", "${env:B}"]
[[stage]]
id = "w2"
kind = "write-jsonl"
input = "f"
path = "f.jsonl"
`, want: []string{
			`DIR/test.toml:17:1: stage "f" (files): against item 4 is empty (environment variables A, B are set but empty)`,
			`DIR/test.toml:17:1: stage "f" (files): against item 5 is empty (environment variables A, B are set but empty)`,
		}},
		{name: "every missing file of a list of paths", toml: `
[[stage]]
id = "f"
kind = "files"
input = "prompts"
model = "data/model"
against = ["absent1.jsonl", "p.jsonl", "absent2.jsonl"]
[[stage]]
id = "w2"
kind = "write-jsonl"
input = "f"
path = "f.jsonl"
`, want: []string{
			`DIR/test.toml:17:1: stage "f" (files): against DIR/absent1.jsonl: no such file or directory`,
			`DIR/test.toml:17:1: stage "f" (files): against DIR/absent2.jsonl: no such file or directory`,
		}},
		{name: "two writers, two spellings of one path", toml: `
[[stage]]
id = "w2"
kind = "write-jsonl"
input = "prompts"
path = "./data/../out.jsonl"
`, want: []string{
			`DIR/test.toml:16:1: stage "w2" (write-jsonl): path DIR/out.jsonl is also written by stage "w1" (path at DIR/test.toml:11:1): two writers on one path would overwrite each other`,
		}},
		{name: "two writers, one through a symlinked directory", toml: `
[[stage]]
id = "w2"
kind = "write-jsonl"
input = "prompts"
path = "data/x.jsonl"
[[stage]]
id = "w3"
kind = "write-jsonl"
input = "prompts"
path = "alias/x.jsonl"
`, want: []string{
			`DIR/test.toml:21:1: stage "w3" (write-jsonl): path DIR/alias/x.jsonl is also written by stage "w2" (path at DIR/test.toml:16:1): two writers on one path would overwrite each other`,
		}},
		{name: "the later writer in the file is reported, not the later in the graph", toml: `
[[stage]]
id = "w2"
kind = "write-jsonl"
input = "mid"
path = "mid.jsonl"
[[stage]]
id = "w3"
kind = "write-jsonl"
input = "prompts"
path = "mid.jsonl"
[[stage]]
id = "mid"
kind = "pass"
input = "prompts"
`, want: []string{
			`DIR/test.toml:21:1: stage "w3" (write-jsonl): path DIR/mid.jsonl is also written by stage "w2" (path at DIR/test.toml:16:1): two writers on one path would overwrite each other`,
		}},
		{name: "output is an input", toml: `
[[stage]]
id = "w2"
kind = "write-jsonl"
input = "prompts"
path = "p.jsonl"
`, want: []string{
			`DIR/test.toml:16:1: stage "w2" (write-jsonl): path DIR/p.jsonl is also read by stage "prompts" (path at DIR/test.toml:6:1): the run would overwrite its own input`,
		}},
		{name: "output is an input through a symlink", toml: `
[[stage]]
id = "w2"
kind = "write-jsonl"
input = "prompts"
path = "link.jsonl"
`, want: []string{
			`DIR/test.toml:16:1: stage "w2" (write-jsonl): path DIR/link.jsonl is also read by stage "prompts" (path at DIR/test.toml:6:1): the run would overwrite its own input`,
		}},
		{name: "a stage writes what it reads", toml: `
[[stage]]
id = "f"
kind = "files"
input = "prompts"
model = "data/model"
against = ["p.jsonl", "f.jsonl"]
shards = "alias/model"
[[stage]]
id = "w2"
kind = "write-jsonl"
input = "f"
path = "f.jsonl"
`, want: []string{
			// f.jsonl does not exist yet, so it is reported missing and also
			// as the output of w2; shards is f's own model directory.
			`DIR/test.toml:17:1: stage "f" (files): against DIR/f.jsonl: no such file or directory`,
			`DIR/test.toml:18:1: stage "f" (files): shards DIR/alias/model is also read by stage "f" (model at DIR/test.toml:16:1): the run would overwrite its own input`,
			`DIR/test.toml:23:1: stage "w2" (write-jsonl): path DIR/f.jsonl is also read by stage "f" (against at DIR/test.toml:17:1): the run would overwrite its own input`,
		}},
		{name: "output is the run directory", toml: `
[[stage]]
id = "f"
kind = "files"
input = "prompts"
model = "data/model"
shards = "run/"
[[stage]]
id = "w2"
kind = "write-jsonl"
input = "f"
path = "run"
`, want: []string{
			`DIR/test.toml:17:1: stage "f" (files): shards DIR/run is the run directory: an output needs a path of its own`,
			`DIR/test.toml:22:1: stage "w2" (write-jsonl): path DIR/run is the run directory: an output needs a path of its own`,
		}},
		{name: "a --set override is reported after the file", toml: `
[[stage]]
id = "w2"
kind = "write-jsonl"
input = "prompts"
path = "w2.jsonl"
`, set: []string{`w2.path="out.jsonl"`}, want: []string{
			`--set w2.path="out.jsonl": stage "w2" (write-jsonl): path DIR/out.jsonl is also written by stage "w1" (path at DIR/test.toml:11:1): two writers on one path would overwrite each other`,
		}},
		{name: "every problem at once", toml: `
[[stage]]
id = "w2"
kind = "write-jsonl"
input = "prompts"
path = "${env:OUT}"
[[stage]]
id = "w3"
kind = "write-jsonl"
input = "prompts"
path = "out.jsonl"
[[stage]]
id = "w4"
kind = "write-jsonl"
input = "prompts"
path = "p.jsonl"
`, want: []string{
			`DIR/test.toml:16:1: stage "w2" (write-jsonl): path is empty (environment variable OUT is set but empty)`,
			`DIR/test.toml:21:1: stage "w3" (write-jsonl): path DIR/out.jsonl is also written by stage "w1" (path at DIR/test.toml:11:1): two writers on one path would overwrite each other`,
			`DIR/test.toml:26:1: stage "w4" (write-jsonl): path DIR/p.jsonl is also read by stage "prompts" (path at DIR/test.toml:6:1): the run would overwrite its own input`,
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			getenv := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
			f, probs := pipefile.Parse(filepath.Join(dir, "test.toml"), []byte(src+strings.TrimPrefix(tc.toml, "\n")), pipefile.Options{Set: tc.set, SetDir: dir, Getenv: getenv})
			if f == nil {
				t.Fatal(probs)
			}
			p, bprobs := pipeline.Build(f, pathRegistry())
			probs = append(probs, bprobs...)
			probs = append(probs, p.CheckPathConflicts()...)
			probs.Sort()
			var got []string
			for _, pr := range probs {
				got = append(got, strings.ReplaceAll(pr.String(), dir, "DIR"))
			}
			if strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
				t.Errorf("problems:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
		})
	}
}
