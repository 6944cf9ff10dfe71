package stages

import (
	"context"
	"fmt"

	"github.com/pipe-dev/pipe/pipeline"
	"github.com/pipe-dev/pipe/pipeline/figure"
	"github.com/pipe-dev/pipe/pipeline/record"
	"github.com/pipe-dev/pipe/pipeline/view"
)

func init() {
	pipeline.Register(pipeline.Spec{
		Kind:    "read-prompts",
		Summary: "stream prompts from a JSONL file (messages, ShareGPT conversations or prompt)",
		Description: `Each line is one prompt in one of the common shapes:

  {"id": "a1", "messages": [{"role": "user", "content": "..."}]}        (OpenAI)
  {"id": "a1", "conversations": [{"from": "human", "value": "..."}]}    (ShareGPT)
  {"id": "a1", "prompt": "..."}
  {"custom_id": "a1", "method": "POST", "url": "/v1/chat/completions",
   "body": {"model": "...", "messages": [...]}}                       (OpenAI/vLLM batch input)

The id comes from id_field. A row without one gets a hash of its
conversation, so the same prompt has the same id in every run. Other fields
of the line are kept in the record's meta. The file is streamed, never
loaded whole.

Tool use is carried whole:

  - "tools" beside the messages: a list of tool schemas, or a string
    holding one, as LLaMA-Factory's ShareGPT writes it
  - an assistant turn's "tool_calls": id, type, function name and
    arguments as given. A JSON string stays that string, an object that
    object.
  - a tool turn's "tool_call_id", and any turn's "name"
  - ShareGPT's "function_call" turn, its value the call's JSON: an
    assistant turn with those tool_calls
  - ShareGPT's "observation" turn: a tool turn

A message key pipe does not carry is a bad line naming it, never dropped.
So is a call whose arguments are not a JSON object, or a string holding
one. So is a call to a tool the line's "tools" do not declare. The chat
template would fail on such a call, or teach a call the model cannot make.

A malformed line is invalid JSON or UTF-8, or has no prompt or a bad id.
With on_bad_line = "fail" it stops the run with its file and line. With
"skip" it is counted and written to RUN_DIR/rejected/STAGE.jsonl. The whole
file is checked in a pass that runs ahead of the reader from the start. So
a bad line near the end stops the run in its first seconds, not hours of
GPU time later.

A prompt whose turn to answer is empty or only white space is rejected as
empty_prompt. A line whose id an earlier line has is rejected as
duplicate_id; the first one wins. When a dedupe-against-progress stage
reads this output, it does that instead. A leading UTF-8 BOM is accepted.
A file with no prompt fails the run unless allow_empty = true. pipe check
--data reports all of it without running.`,
		Outputs:  []string{"out"},
		Produces: []string{record.FieldMessages},
		KeySettings: pipeline.SettingsFor(func(cfg *readPromptsConfig) string {
			s := pipeline.DisplayPath(cfg.Path)
			if cfg.Limit > 0 {
				s += fmt.Sprintf(", limit %d", cfg.Limit)
			}
			return s
		}),
		Example: `[[stage]]
id   = "prompts"
kind = "read-prompts"
path = "prompts.jsonl"
on_bad_line = "skip"

[[stage]]
id    = "out"
kind  = "write-jsonl"
input = "prompts"
path  = "out/prompts.jsonl"
`,
		New: pipeline.NewSource(func(c *readPromptsConfig) (pipeline.Source, error) { return &readPrompts{cfg: *c}, nil }),
	})
}

type readPromptsConfig struct {
	// Path is the JSONL file, relative to the pipeline file. Required.
	Path string `toml:"path" op:"true" required:"true" path:"in" doc:"JSONL file of prompts, relative to the pipeline file."`
	// IDField names the field holding the record id.
	IDField   string `toml:"id_field" default:"id" doc:"Field holding the prompt id. Rows without it get a content hash."`
	OnBadLine string `toml:"on_bad_line" op:"true" default:"fail" enum:"fail|skip" doc:"What a malformed line does. \"fail\" stops the run. \"skip\" counts it and sets it aside."`
	// Limit stops after this many prompts; 0 reads all.
	Limit int64 `toml:"limit" op:"true" default:"0" min:"0" doc:"Read at most this many prompts. 0 reads all."`
	// AllowEmpty lets a file with no prompt end the run well.
	AllowEmpty bool `toml:"allow_empty" op:"true" default:"false" doc:"A file with no prompt is fine. Otherwise it fails the run, as an empty or truncated input usually is a mistake."`
	// Samples makes each prompt N records, one per completion wanted.
	Samples int `toml:"samples" op:"false" default:"1" min:"1" max:"10000" doc:"Records per prompt: N completions of each prompt, each made exactly once. Their ids are ID#1 ... ID#N, with meta.sample and meta.prompt_id. generate's seed, when set, is seed + sample - 1."`
}

type readPrompts struct {
	cfg readPromptsConfig
	src *jsonlSource
	// stopAhead ends the pass that judges the file ahead of the reader.
	stopAhead func()
	pos       inputPos
}

var (
	_ pipeline.Source       = (*readPrompts)(nil)
	_ pipeline.Opener       = (*readPrompts)(nil)
	_ pipeline.Closer       = (*readPrompts)(nil)
	_ pipeline.InputChecker = (*readPrompts)(nil)
	_ pipeline.Reporter     = (*readPrompts)(nil)
	_ view.InputViewer      = (*readPrompts)(nil)
)

// Report gives how far into the file the read is.
func (r *readPrompts) Report() []figure.Figure { return r.pos.figures() }

// InputView gives the same position typed.
func (r *readPrompts) InputView() *view.Input { return r.pos.view() }

// source is the file as this stage reads it; dedupe makes it reject
// repeated ids (when no dedupe-against-progress stage reads its output).
func (r *readPrompts) source(dedupe bool) *jsonlSource {
	return &jsonlSource{Path: r.cfg.Path, OnBadLine: r.cfg.OnBadLine, Limit: r.cfg.Limit, AllowEmpty: r.cfg.AllowEmpty, Dedupe: dedupe, Samples: r.cfg.Samples,
		Parse: func(line []byte, build, needID bool) (*record.Record, string, *lineProblem) {
			return promptLine(line, r.cfg.IDField, build, needID)
		},
		QuickID: func(line []byte) (string, bool) { return leadingID(line, r.cfg.IDField) },
		Pos:     &r.pos}
}

// Open starts judging the whole file ahead of the reader (see jsonlSource.ahead).
func (r *readPrompts) Open(ctx context.Context, env *pipeline.Env) error {
	r.src = r.source(!env.DuplicatesHandled)
	r.src.Halt, r.src.Sample, r.src.Done = env.Halt, env.Sample, env.Done
	r.stopAhead = r.src.ahead(ctx, env)
	return nil
}

func (r *readPrompts) Close() error {
	if r.stopAhead != nil {
		r.stopAhead()
	}
	return nil
}

func (r *readPrompts) Read(ctx context.Context, out pipeline.Emitter) error {
	if r.src == nil { // not opened (a unit test): nothing dedupes downstream
		r.src = r.source(true)
	}
	return r.src.Read(ctx, out)
}

// CheckInput judges every line as the reader would (pipe check --data).
// Repeated ids are counted whoever rejects them in the run: the reader, or
// the dedupe-against-progress stage reading its output.
func (r *readPrompts) CheckInput(ctx context.Context, _ *pipeline.Env) (*pipeline.InputReport, error) {
	return r.source(true).checkAll(ctx, nil)
}
