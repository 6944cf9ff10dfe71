package rundir_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pipe-dev/pipe/pipeline"
	"github.com/pipe-dev/pipe/pipeline/config"
	"github.com/pipe-dev/pipe/pipeline/pipefile"
	"github.com/pipe-dev/pipe/pipeline/record"
)

// Fake kinds shaped like the real ones: a source with an operational path,
// a generator with sampling settings and operational server settings, and a
// sink writing a file.

type srcConfig struct {
	Path    string `toml:"path" op:"true" required:"true" path:"in"`
	IDField string `toml:"id_field" default:"id"`
	Limit   int64  `toml:"limit" op:"true" default:"0"`
}

type genConfig struct {
	Servers        []string          `toml:"servers" op:"true"`
	Concurrency    int               `toml:"concurrency" op:"true" default:"48"`
	RequestTimeout config.Duration   `toml:"request_timeout" op:"true" default:"30m"`
	Model          string            `toml:"model"`
	Temperature    *float64          `toml:"temperature"`
	Seed           *int              `toml:"seed"`
	Stop           []string          `toml:"stop"`
	EnableThinking bool              `toml:"enable_thinking" default:"true"`
	SystemPrompt   string            `toml:"system_prompt"`
	MaxOutput      int               `toml:"max_output_tokens" default:"1024"`
	Labels         map[string]string `toml:"labels"`
}

type checkConfig struct {
	MaxRepetition float64 `toml:"max_repetition" default:"0.5"`
}

type sinkConfig struct {
	Path string `toml:"path" required:"true" path:"out"`
}

type nopStage struct{}

func (nopStage) Read(context.Context, pipeline.Emitter) error { return nil }

func (nopStage) Process(context.Context, *record.Record, pipeline.Emitter) error { return nil }

func newNop[C any](*C) (pipeline.Processor, error) { return nopStage{}, nil }

func newNopSource(*srcConfig) (pipeline.Source, error) { return nopStage{}, nil }

func testRegistry() *pipeline.Registry {
	reg := pipeline.NewRegistry()
	reg.Register(pipeline.Spec{Kind: "src", Summary: "test source", Outputs: []string{"out"}, New: pipeline.NewSource(newNopSource)})
	reg.Register(pipeline.Spec{Kind: "gen", Summary: "test generator", Outputs: []string{"out", "rejected"}, New: pipeline.NewProcessor(newNop[genConfig])})
	reg.Register(pipeline.Spec{Kind: "check", Summary: "test validator", Outputs: []string{"out", "rejected"}, New: pipeline.NewProcessor(newNop[checkConfig])})
	reg.Register(pipeline.Spec{Kind: "sink", Summary: "test sink", New: pipeline.NewProcessor(newNop[sinkConfig])})
	return reg
}

// basePipeline is src → gen → sink, gen.rejected → sink "bad".
const basePipeline = `
[pipeline]
run_dir = "run"

[[stage]]
id = "src"
kind = "src"
path = "prompts.jsonl"

[[stage]]
id = "gen"
kind = "gen"
input = "src"
servers = ["http://a:30000"]
model = "qwen3"
temperature = 0.6
stop = ["</s>"]
system_prompt = "You are helpful. <think> first."

[[stage]]
id = "out"
kind = "sink"
input = "gen"
path = "out.jsonl"

[[stage]]
id = "bad"
kind = "sink"
input = "gen.rejected"
path = "bad.jsonl"
`

// plan builds a plan from TOML text in dir (with an input file
// prompts.jsonl); edits are old → new replacements applied first. It fails
// the test on any problem.
func plan(t testing.TB, dir, src string, edits ...string) *pipeline.Plan {
	t.Helper()
	for i := 0; i+1 < len(edits); i += 2 {
		if !strings.Contains(src, edits[i]) {
			t.Fatalf("edit %q: not in the pipeline", edits[i])
		}
		src = strings.Replace(src, edits[i], edits[i+1], 1)
	}
	if err := os.WriteFile(filepath.Join(dir, "prompts.jsonl"), []byte(`{"id":"a"}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	f, probs := pipefile.Parse(filepath.Join(dir, "test.toml"), []byte(src), pipefile.Options{})
	if len(probs) > 0 {
		t.Fatal(probs)
	}
	p, probs := pipeline.Build(f, testRegistry())
	if len(probs) > 0 {
		t.Fatal(probs)
	}
	return p
}
