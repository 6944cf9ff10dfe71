package pipeline_test

import (
	"strings"
	"testing"

	"github.com/pipe-dev/pipe/pipeline"
	"github.com/pipe-dev/pipe/pipeline/pipefile"
)

// TestValuesFromTheCommandLine: ${env:NAME:-DEFAULT} follows the shell,
// --set vars.NAME reaches every use of the var, and a path typed in --set
// resolves against SetDir (the working directory) while one written in the
// file resolves against the file.
func TestValuesFromTheCommandLine(t *testing.T) {
	const src = `[vars]
data = "${env:DATA:-data/p.jsonl}"
out  = "out"
[[stage]]
id = "prompts"
kind = "read-prompts"
path = "${data}"
[[stage]]
id = "a"
kind = "write-jsonl"
input = "prompts"
path = "${out}/a.jsonl"
[[stage]]
id = "b"
kind = "write-jsonl"
input = "prompts"
path = "${out}/b.jsonl"
`
	for _, tc := range []struct {
		name string
		env  map[string]string
		set  []string
		want string // run_dir and each stage's path, FILE for the file's directory, CWD for SetDir
	}{
		{name: "default when unset",
			want: "FILE/runs/test FILE/data/p.jsonl FILE/out/a.jsonl FILE/out/b.jsonl"},
		{name: "default when empty", env: map[string]string{"DATA": ""},
			want: "FILE/runs/test FILE/data/p.jsonl FILE/out/a.jsonl FILE/out/b.jsonl"},
		{name: "the variable when set", env: map[string]string{"DATA": "/abs/q.jsonl"},
			want: "FILE/runs/test /abs/q.jsonl FILE/out/a.jsonl FILE/out/b.jsonl"},
		{name: "a var override reaches every use, resolved where it is used", set: []string{"vars.out=elsewhere"},
			want: "FILE/runs/test FILE/data/p.jsonl FILE/elsewhere/a.jsonl FILE/elsewhere/b.jsonl"},
		{name: "a var override may itself use the environment", env: map[string]string{"D": "/d"}, set: []string{`vars.out="${env:D}/o"`},
			want: "FILE/runs/test FILE/data/p.jsonl /d/o/a.jsonl /d/o/b.jsonl"},
		{name: "paths typed on the command line resolve against the working directory",
			set:  []string{"prompts.path=mine.jsonl", `pipeline.run_dir="myrun"`, `a.path="/abs/a.jsonl"`},
			want: "CWD/myrun CWD/mine.jsonl /abs/a.jsonl FILE/out/b.jsonl"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fileDir, cwd := t.TempDir(), t.TempDir()
			getenv := func(k string) (string, bool) { v, ok := tc.env[k]; return v, ok }
			f, probs := pipefile.Parse(fileDir+"/test.toml", []byte(src), pipefile.Options{Set: tc.set, SetDir: cwd, Getenv: getenv})
			if len(probs) > 0 {
				t.Fatal(probs)
			}
			p, probs := pipeline.BuildGraph(f, testRegistry())
			if len(probs) > 0 {
				t.Fatal(probs)
			}
			var got []string
			for _, u := range p.Paths() {
				got = append(got, strings.NewReplacer(fileDir, "FILE", cwd, "CWD").Replace(u.Path))
			}
			if g := strings.Join(got, " "); g != tc.want {
				t.Errorf("paths\n got %s\nwant %s", g, tc.want)
			}
		})
	}
}

// TestCommandLineMistakes: a --set naming no var, and a default with a
// ${...} inside, are reported where they were given.
func TestCommandLineMistakes(t *testing.T) {
	for _, tc := range []struct {
		src  string
		set  []string
		want string
	}{
		{src: "[vars]\nout = \"o\"\n", set: []string{"vars.ot=x"},
			want: `--set vars.ot=x: no variable "ot" to override; [vars] defines out (did you mean "out"?)`},
		{src: "[vars]\nx = \"1\"\n", set: []string{"vars.x"},
			want: `--set vars.x: want vars.NAME=VALUE`},
		{src: "", set: []string{"vars.x=1"},
			want: `--set vars.x=1: no variable "x" to override; [vars] defines none`},
		{src: "[vars]\na = \"${env:A:-${b}}\"\nb = \"x\"\n",
			want: `test.toml:2:1: ${env:A:-${b}: a default is plain text; ${...} inside it is not expanded`},
		{src: "[vars]\na = \"1\"\n", set: []string{`vars.a="${nope}"`},
			want: `--set vars.a="${nope}": unknown variable ${nope}; [vars] defines a`},
	} {
		_, probs := pipefile.Parse("test.toml", []byte(tc.src+"[[stage]]\nid = \"s\"\nkind = \"count\"\n"), pipefile.Options{Set: tc.set, SetDir: "/"})
		if got := probs.Error(); got != tc.want {
			t.Errorf("%q %q:\n got %s\nwant %s", tc.src, tc.set, got, tc.want)
		}
	}
}
