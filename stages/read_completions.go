package stages

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/pipe-dev/pipe/pipeline"
)

func init() {
	pipeline.Register(pipeline.Spec{
		Kind:    "read-completions",
		Summary: "stream existing completion records from JSONL (as write-jsonl writes them) for re-validation",
		Description: `Each line is one record as write-jsonl writes it: {"id", "messages",
"completion", ...}. The file is streamed, never loaded whole. A line that is
not such a record (invalid JSON, no id, no completion when require_completion
is set) stops the run with its file and line (on_bad_line = "fail"), or is
counted and set aside on the rejected port / RUN_DIR/rejected/STAGE.jsonl
("skip"). A record that was rejected before keeps that verdict in
meta.previous_reject, so it can be judged again by today's rules.`,
		Source:   true,
		Config:   ReadCompletionsConfig{},
		Outputs:  []string{"out", pipeline.RejectedPort},
		Produces: []string{pipeline.FieldMessages, pipeline.FieldCompletion},
		Fields: func(c any) (needs, produces []string) {
			produces = []string{pipeline.FieldMessages, pipeline.FieldCompletion}
			if c.(*ReadCompletionsConfig).RequireOutputIDs {
				produces = append(produces, pipeline.FieldOutputIDs)
			}
			return nil, produces
		},
		KeySettings: func(c any) string {
			cfg := c.(*ReadCompletionsConfig)
			s := pipeline.DisplayPath(cfg.Path)
			if cfg.Limit > 0 {
				s += fmt.Sprintf(", limit %d", cfg.Limit)
			}
			return s
		},
		Example: `[[stage]]
id          = "completions"
kind        = "read-completions"
path        = "runs/regenerate/out/completions.jsonl"
on_bad_line = "skip"

[[stage]]
id    = "check"
kind  = "validate-thinking"
input = "completions"

[[stage]]
id    = "good"
kind  = "write-jsonl"
input = "check.accepted"
path  = "out/good.jsonl"
`,
		New: func(c any) (pipeline.Stage, error) { return &readCompletions{cfg: *c.(*ReadCompletionsConfig)}, nil },
	})
}

// ReadCompletionsConfig configures read-completions.
type ReadCompletionsConfig struct {
	// Path is the JSONL file, relative to the pipeline file. Required.
	Path string `toml:"path" op:"true" required:"true" path:"in" doc:"JSONL file of records (as write-jsonl writes them), relative to the pipeline file"`
	// OnBadLine is "fail" (default) or "skip".
	OnBadLine string `toml:"on_bad_line" op:"true" default:"fail" enum:"fail|skip" doc:"what a malformed line does: stop the run with file:line, or be counted and set aside"`
	// RequireCompletion makes a line without a completion a bad line. Default true.
	RequireCompletion bool `toml:"require_completion" default:"true" doc:"a record without a completion is a bad line"`
	// RequireOutputIDs makes a completion without output_ids a bad line, and
	// tells pipe check that completion.output_ids is produced. Default false.
	RequireOutputIDs bool `toml:"require_output_ids" default:"false" doc:"a completion without output_ids is a bad line (for source = \"ids\" downstream)"`
	// Limit stops after this many records; 0 (default) reads all.
	Limit int64 `toml:"limit" op:"true" default:"0" min:"0" doc:"read at most this many records; 0 reads all"`
}

type readCompletions struct {
	cfg ReadCompletionsConfig
}

var _ pipeline.Source = (*readCompletions)(nil)

// Read streams the file one line at a time.
func (r *readCompletions) Read(ctx context.Context, out pipeline.Emitter) error {
	src := jsonlSource{Path: r.cfg.Path, OnBadLine: r.cfg.OnBadLine, Limit: r.cfg.Limit, Parse: r.parse}
	return src.Read(ctx, out)
}

// parse decodes one record line and checks it is a usable completion record.
func (r *readCompletions) parse(line []byte) (*pipeline.Record, error) {
	if line[0] != '{' {
		return nil, errors.New("not a JSON object")
	}
	var rec pipeline.Record
	if err := json.Unmarshal(line, &rec); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return nil, fmt.Errorf("field %q must be %s, got JSON %s", te.Field, te.Type, te.Value)
		}
		return nil, fmt.Errorf("invalid JSON: %v", jsonErrText(err))
	}
	switch {
	case rec.ID == "":
		return nil, errors.New(`no "id"`)
	case r.cfg.RequireCompletion && rec.Completion == nil:
		return nil, errors.New(`no "completion" (set require_completion = false to read prompts-only records)`)
	case r.cfg.RequireOutputIDs && (rec.Completion == nil || len(rec.Completion.OutputIDs) == 0):
		return nil, errors.New(`completion has no "output_ids" (generated with api = "chat"?)`)
	}
	// A verdict from an earlier run is history, not today's verdict.
	if rec.Reject != nil {
		if rec.Meta == nil {
			rec.Meta = map[string]any{}
		}
		rec.Meta["previous_reject"] = rec.Reject
		rec.Reject = nil
	}
	return &rec, nil
}
