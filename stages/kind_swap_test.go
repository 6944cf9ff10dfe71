package stages

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pipe-dev/pipe/pipeline"
	"github.com/pipe-dev/pipe/pipeline/pipefile"
)

// --set STAGE.kind=… swaps a kind for one with the same ports, and the
// result is checked like any file: the new kind's keys, its ports, its
// input.
func TestKindSwapOnTheCommandLine(t *testing.T) {
	dir := t.TempDir()
	src := `[[stage]]
id   = "prompts"
kind = "read-completions"
path = "prompts.jsonl"

[[stage]]
id    = "check"
kind  = "validate-thinking"
input = "prompts"

[[stage]]
id     = "train"
kind   = "write-jsonl"
input  = "check.accepted"
path   = "out/train"

[[stage]]
id     = "bad"
kind   = "write-jsonl"
input  = "check.rejected"
path   = "out/bad.jsonl"
layout = "records"
`
	path := filepath.Join(dir, "p.toml")
	os.WriteFile(path, []byte(src), 0o644)
	os.WriteFile(filepath.Join(dir, "prompts.jsonl"), []byte(`{"id":"a","prompt":"hi"}`+"\n"), 0o644)
	build := func(sets ...string) (*pipeline.Plan, pipefile.Problems) {
		f, probs := pipefile.Load(path, pipefile.Options{Set: sets, SetDir: dir})
		if len(probs) > 0 {
			return nil, probs
		}
		return pipeline.Build(f, pipeline.DefaultRegistry)
	}

	plan, probs := build("train.kind=write-arrow")
	if len(probs) > 0 {
		t.Fatal(probs)
	}
	if s := plan.Lookup("train"); s.Spec.Kind != "write-arrow" || s.Config.(*writeArrowConfig).Path != filepath.Join(dir, "out", "train") {
		t.Fatalf("train is %s %+v, want write-arrow of out/train", s.Spec.Kind, s.Config)
	}

	for _, c := range []struct{ set, want string }{
		{"check.kind=write-jsonl", `--set check.kind=write-jsonl: stage "check": kind write-jsonl cannot stand in for validate-thinking: its ports are none, validate-thinking's are accepted; --set STAGE.kind swaps kinds with the same ports (a writer for a writer)`},
		{"check.kind=read-completions", `--set check.kind=read-completions: stage "check": kind read-completions cannot stand in for validate-thinking: validate-thinking takes an input and read-completions reads its own input; --set STAGE.kind swaps kinds with the same ports (a writer for a writer)`},
		{"check.kind=tokenize-and-mask", `--set check.kind=tokenize-and-mask: stage "check": kind tokenize-and-mask cannot stand in for validate-thinking: its ports are out, validate-thinking's are accepted`},
		{"train.kind=write-arow", `--set train.kind=write-arow: stage "train": unknown kind "write-arow" (did you mean "write-arrow"?)`},
		{"bad.kind=write-arrow", `stage "bad" (write-arrow): unknown key "layout"`},
		{"train.kind=3", `--set train.kind=3: stage "train": kind must be a kind's name (pipe stages lists them)`},
		{"train.id=x", `--set train.id=x: stage "train": id cannot be overridden`},
	} {
		_, probs := build(c.set)
		if !strings.Contains(probs.Error(), c.want) {
			t.Errorf("--set %s:\n%v\nwant a problem saying %q", c.set, probs, c.want)
		}
	}
}
