package pipeline_test

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/pipe-dev/pipe/pipeline"
	"github.com/pipe-dev/pipe/pipeline/pipefile"
)

// [trainer] is declared once: a key tagged trainer:"KEY" that the stage
// does not set takes the table's value (only where the config uses it: a
// writer's trainer layouts, not its plain records); one it sets to another
// value is a problem at its position; the table's own mistakes are
// problems at theirs.
func TestTrainerDeclaredOnce(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "p.jsonl"), []byte(`{"prompt": "hi"}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	const stages = `
[[stage]]
id   = "prompts"
kind = "read-prompts"
path = "p.jsonl"

[[stage]]
id     = "sf"
kind   = "write-jsonl"
input  = "prompts"
path   = "sf.jsonl"
layout = "conversations"
%s
[[stage]]
id    = "plain"
kind  = "write-jsonl"
input = "prompts"
path  = "plain.jsonl"
`
	build := func(trainer, sfKeys string) (*pipeline.Plan, pipefile.Problems) {
		src := trainer + strings.Replace(stages, "%s", sfKeys, 1)
		f, probs := pipefile.Parse(filepath.Join(dir, "p.toml"), []byte(src), pipefile.Options{})
		if len(probs) > 0 {
			return nil, probs
		}
		return pipeline.Build(f, pipeline.DefaultRegistry)
	}
	const trainer = "[trainer]\nname = \"specforge\"\nmethod = \"dflash\"\nmax_length = 4096\n"

	plan, probs := build(trainer, "")
	if len(probs) > 0 {
		t.Fatal(probs)
	}
	got := func(id string) map[string]any {
		s := plan.Lookup(id).Settings(false)
		return map[string]any{"max_length": s["max_length"], "trainer": s["trainer"]}
	}
	if want := map[string]any{"max_length": int64(4096), "trainer": "dflash"}; !reflect.DeepEqual(got("sf"), want) {
		t.Errorf("the conversations layout took %v from [trainer], want %v", got("sf"), want)
	}
	if want := map[string]any{"max_length": int64(0), "trainer": "eagle3"}; !reflect.DeepEqual(got("plain"), want) {
		t.Errorf("the records layout took %v, want its defaults %v ([trainer] judges trainer layouts only)", got("plain"), want)
	}
	if _, probs := build(trainer, "max_length = 4096\ntrainer = \"dflash\"\n"); len(probs) > 0 {
		t.Errorf("keys that repeat [trainer] exactly: %v", probs)
	}

	for _, tc := range []struct {
		name, trainer, keys, want string
	}{
		{"conflicting stage key", trainer, "max_length = 2048\n",
			`p.toml:17:1: stage "sf" (write-jsonl): max_length = 2048 conflicts with [trainer] max_length = 4096 (` + filepath.Join(dir, "p.toml") + `:4:1)`},
		{"conflicting method", trainer, "trainer = \"eagle3\"\n", `trainer = eagle3 conflicts with [trainer] method = dflash`},
		{"no name", "[trainer]\nmax_length = 4096\n", "", `[trainer]: missing name`},
		{"no max_length", "[trainer]\nname = \"specforge\"\n", "", `[trainer]: missing max_length`},
		{"another trainer", "[trainer]\nname = \"axolotl\"\nmax_length = 4096\n", "", `name must be "specforge"`},
		{"a misspelt key", "[trainer]\nname = \"specforge\"\nmax_lenght = 4096\n", "", `unknown key "max_lenght"; allowed: name, method, max_length, chat_template (did you mean "max_length"?)`},
		{"a length as a string", "[trainer]\nname = \"specforge\"\nmax_length = \"4k\"\n", "", `max_length must be the trainer's tokens per row, 16..4194304`},
		{"not a table", "trainer = \"specforge\"\n", "", `[trainer] must be a table`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, probs := build(tc.trainer, tc.keys)
			if !strings.Contains(probs.Error(), tc.want) {
				t.Fatalf("problems:\n%v\nwant one containing %q", probs.Error(), tc.want)
			}
		})
	}
}
