package stages

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pipe-dev/pipe/pipeline"
	"github.com/pipe-dev/pipe/pipeline/pipefile"
)

// replayFile is a small regeneration pipeline; a test writes it into dir.
const replayFile = `[pipeline]
name    = "regen"
run_dir = "runs/regen"

[[stage]]
id   = "prompts"
kind = "read-prompts"
path = "prompts.jsonl"

[[stage]]
id    = "gen"
kind  = "generate"
input = "prompts"
servers = ["http://127.0.0.1:1"]
api     = "chat"
model   = "m"

[[stage]]
id    = "check"
kind  = "validate-thinking"
input = "gen"

[[stage]]
id    = "completions"
kind  = "write-jsonl"
input = "gen"
path  = "runs/regen/completions.jsonl"

[[stage]]
id    = "good"
kind  = "write-jsonl"
input = "check.accepted"
path  = "out/good.jsonl"

[[stage]]
id    = "bad"
kind  = "write-jsonl"
input = ["check.rejected", "gen.rejected"]
path  = "out/bad.jsonl"
`

func buildFrom(t *testing.T, dir, src, from string, sets ...string) (*pipeline.Plan, pipefile.Problems) {
	t.Helper()
	path := filepath.Join(dir, "p.toml")
	os.WriteFile(path, []byte(src), 0o644)
	os.WriteFile(filepath.Join(dir, "prompts.jsonl"), []byte(`{"id":"a","prompt":"hi"}`+"\n"), 0o644)
	f, probs := pipefile.Load(path, pipefile.Options{Set: sets, SetDir: dir, From: from})
	if len(probs) > 0 {
		return nil, probs
	}
	return pipeline.Build(f, pipeline.DefaultRegistry)
}

// Without a journal (a segmented one swept, or --no-journal), --from reads
// the committed output of a writer fed by the stage alone, where run.json
// says the run wrote it.
func TestFromFallsBackToAWriterOfTheStage(t *testing.T) {
	dir := t.TempDir()
	orig := filepath.Join(dir, "runs", "regen")
	os.MkdirAll(orig, 0o755)
	comps := filepath.Join(orig, "completions.jsonl")
	os.WriteFile(comps, []byte(`{"id":"a","messages":[{"role":"user","content":"hi"}],"completion":{"answer":"x"}}`+"\n"), 0o644)
	run, _ := json.Marshal(map[string]any{"outputs": []map[string]string{
		{"stage": "good", "kind": "write-jsonl", "path": filepath.Join(dir, "out", "good.jsonl")},
		{"stage": "completions", "kind": "write-jsonl", "path": comps},
	}})
	os.WriteFile(filepath.Join(orig, "run.json"), run, 0o644)

	plan, probs := buildFrom(t, dir, replayFile, "gen=runs/regen")
	if len(probs) > 0 {
		t.Fatal(probs)
	}
	gen := plan.Lookup("gen")
	if gen.Spec.Kind != "read-completions" || gen.Config.(*ReadCompletionsConfig).Path != comps {
		t.Fatalf("gen is %s %+v, want read-completions of %s", gen.Spec.Kind, gen.Config, comps)
	}
	if plan.Lookup("prompts") != nil {
		t.Fatal("prompts, upstream of gen, is still in the plan")
	}
	if got, want := plan.File.RunDir, orig+"-from-gen"; got != want {
		t.Fatalf("run dir %s, want %s", got, want)
	}
	if got := plan.Lookup("good").Config.(*writeJSONLConfig).Path; got != filepath.Join(orig+"-from-gen", "out", "good.jsonl") {
		t.Fatalf("good writes %s, want it in the replay's run directory", got)
	}
}

func TestFromProblems(t *testing.T) {
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "runs", "regen", "journal"), 0o755)
	os.WriteFile(filepath.Join(dir, "runs", "regen", "journal", "gen.jsonl"), nil, 0o644)
	os.MkdirAll(filepath.Join(dir, "runs", "empty"), 0o755)
	withUpload := replayFile + `
[[stage]]
id    = "shards"
kind  = "write-arrow"
input = "gen"
path  = "out/shards"

[[stage]]
id     = "up"
kind   = "upload-s3"
input  = "shards"
uri    = "s3://bucket/regen"
`
	feedsKept := strings.Replace(replayFile, `input = ["check.rejected", "gen.rejected"]`, `input = ["check.rejected", "prompts"]`, 1)
	for _, c := range []struct {
		name, src, from string
		sets            []string
		want            string
	}{
		{"no such stage", replayFile, "gne=runs/regen", nil, `--from gne=runs/regen: no stage "gne" (did you mean "gen"?)`},
		{"not STAGE=DIR", replayFile, "gen", nil, `--from gen: want --from STAGE=RUN_DIR (e.g. gen=runs/regenerate)`},
		{"other ports", replayFile, "check=runs/regen", nil, `--from check=runs/regen: stage "check" (validate-thinking) has port "accepted"; a replay reader has ports out, rejected: replay from a stage upstream of it`},
		{"upstream feeds a kept stage", feedsKept, "gen=runs/regen", nil, `--from gen=runs/regen: stage "bad" reads "prompts", which --from gen replaces (it is upstream of gen): replay from a stage that feeds every stage kept`},
		{"nothing to replay", replayFile, "gen=runs/empty", nil, "has no journal of stage \"gen\""},
		{"same run dir", replayFile, "gen=runs/regen", []string{"pipeline.run_dir=runs/regen"}, "the replay would run in the original run directory"},
		{"upload prefix", withUpload, "gen=runs/regen", nil, `--from does not move uri (s3://bucket/regen): the replay would write over the original run's objects; give it its own with --set up.uri=…`},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, probs := buildFrom(t, dir, c.src, c.from, c.sets...)
			if !strings.Contains(probs.Error(), c.want) {
				t.Fatalf("problems:\n%v\nwant one saying %q", probs, c.want)
			}
		})
	}
	// An upload given its own prefix on the command line is fine.
	if _, probs := buildFrom(t, dir, withUpload, "gen=runs/regen", "up.uri=s3://bucket/regen-v2"); len(probs) > 0 {
		t.Fatal(probs)
	}
}
