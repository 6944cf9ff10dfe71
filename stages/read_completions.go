package stages

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/pipe-dev/pipe/pipeline"
	"github.com/pipe-dev/pipe/pipeline/config"
	"github.com/pipe-dev/pipe/pipeline/filecommit"
	"github.com/pipe-dev/pipe/pipeline/output"
	"github.com/pipe-dev/pipe/pipeline/record"
	"github.com/pipe-dev/pipe/stages/arrowrow"
	"github.com/pipe-dev/pipe/stages/s3up"
)

func init() {
	pipeline.Register(pipeline.Spec{
		Kind:    "read-completions",
		Summary: "stream existing completions (pipe's JSONL or shards, ShareGPT/conversations, SpecForge's, OpenAI chat and batch output) for re-validation",
		Description: `path is a JSONL file with one record per line, in any of these layouts.
The terminal shows, for the first line of each, which layout it found.

  pipe                    {"id", "messages", "completion", ...} as write-jsonl writes them
  conversations           {"id", "conversations" (ShareGPT from/value or role/content) or
                          "messages"}, the last turn the assistant's answer: its
                          reasoning_content, or <think>…</think> at the start of its content
  specforge-regenerated   SpecForge's regenerate_train_data.py output: conversations with
                          "status": "success" (an "error"/"skipped" line is a bad line)
  openai-chat-completion  a /v1/chat/completions response: choices[0].message, finish_reason,
                          usage ("messages" beside it, if any, are the prompt)
  openai-batch-output     OpenAI/vLLM batch output: custom_id (the id), response.body (a chat
                          completion); a failed request is a bad line

Turns are read as read-prompts reads them. Tool use is carried whole:
"tools", and each turn's tool_calls, tool_call_id and name. A final
assistant turn's or chat completion's tool_calls become the completion's.
An unknown message field is a bad line. A row without an id gets a hash of
its prompt, as read-prompts gives it.

path may instead hold shards as write-arrow writes them. It is then a
.parquet or .arrow file, a shard directory, a manifest.json, or
s3://bucket/prefix/DIR where upload-s3 put them. A shard directory's
.pipe/manifest.json names the committed shards, in order; without one, its
part-* files are read. Each S3 shard is downloaded to a temporary file and
its sha256 checked. Credentials come from the AWS chain.

Either is streamed, never loaded whole. A record that is not usable is a
bad line: invalid JSON, no id, or no completion when require_completion is
set. With on_bad_line = "fail" it stops the run with its file and line or
row. With "skip" it is counted and set aside on the rejected port, or in
RUN_DIR/rejected/STAGE.jsonl. A record that was rejected before keeps that
verdict in meta.previous_reject. So it can be judged again by today's
rules.`,
		Replay: &output.ReplaySpec{Reads: output.ReplaysOutput, Config: func(_, _, writer, path string) map[string]any {
			return map[string]any{"path": path, "writer": writer}
		}},
		Outputs:  []string{"out", pipeline.RejectedPort},
		Produces: []string{record.FieldMessages, record.FieldCompletion},
		Fields: pipeline.FieldsFor(func(c *readCompletionsConfig) (needs, produces []string) {
			produces = []string{record.FieldMessages, record.FieldCompletion}
			if c.RequireOutputIDs {
				produces = append(produces, record.FieldOutputIDs)
			}
			return nil, produces
		}),
		KeySettings: pipeline.SettingsFor(func(cfg *readCompletionsConfig) string {
			s := pipeline.DisplayPath(cfg.Path)
			if cfg.Limit > 0 {
				s += fmt.Sprintf(", limit %d", cfg.Limit)
			}
			return s
		}),
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
		New: pipeline.NewSource(func(c *readCompletionsConfig) (pipeline.Source, error) { return &readCompletions{cfg: *c}, nil }),
	})
}

// readCompletionsConfig configures read-completions.
type readCompletionsConfig struct {
	// Path is the JSONL file, relative to the pipeline file. Required.
	Path string `toml:"path" op:"true" required:"true" path:"inany" doc:"A JSONL file of records, as write-jsonl writes them. Or write-arrow shards: a .parquet/.arrow file, a shard directory or its .pipe/manifest.json. Or s3://bucket/prefix/DIR, as upload-s3 uploaded them. A local path is relative to the pipeline file."`
	// Endpoint, Region and ForcePathStyle are for an s3:// path, as upload-s3 takes them.
	Endpoint       string `toml:"endpoint" op:"true" doc:"With an s3:// path: the S3 endpoint URL of an S3-compatible server. Unset: AWS, or AWS_ENDPOINT_URL_S3."`
	Region         string `toml:"region" op:"true" doc:"With an s3:// path: the region. Unset: the AWS configuration's, else us-east-1."`
	ForcePathStyle bool   `toml:"force_path_style" default:"false" op:"true" doc:"With an s3:// path: address the bucket as ENDPOINT/BUCKET."`
	OnBadLine      string `toml:"on_bad_line" op:"true" default:"fail" enum:"fail|skip" doc:"What a malformed line does. \"fail\" stops the run with file:line. \"skip\" counts it and sets it aside."`
	// RequireCompletion makes a line without a completion a bad line.
	RequireCompletion bool `toml:"require_completion" default:"true" doc:"A record without a completion is a bad line."`
	// RequireOutputIDs makes a completion without output_ids a bad line, and
	// tells pipe check that completion.output_ids is produced.
	RequireOutputIDs bool `toml:"require_output_ids" default:"false" doc:"A completion without output_ids is a bad line. Set it for source = \"ids\" downstream."`
	// Limit stops after this many records; 0 reads all.
	Limit int64 `toml:"limit" op:"true" default:"0" min:"0" doc:"Read at most this many records. 0 reads all."`
	// Writer is the kind of the writer that made path: its committed
	// records are read by that kind's own reader (output.Spec),
	// whatever its format. pipe run --from sets it.
	Writer string `toml:"writer" doc:"The kind of the writer whose output path is, e.g. as pipe run --from sets it. Its committed records are then read with that kind's own reader. \"\" reads path as JSONL or shards."`
}

// Validate checks that writer names a kind whose output holds records.
func (c *readCompletionsConfig) Validate() []error {
	if c.Writer == "" || pipeline.HoldsRecords(c.Writer) {
		return nil
	}
	var kinds []string
	for _, k := range pipeline.DefaultRegistry.Kinds() {
		if pipeline.HoldsRecords(k) {
			kinds = append(kinds, k)
		}
	}
	return []error{&config.FieldError{Key: "writer", Msg: fmt.Sprintf("%q is not a kind whose output holds records (those are %s)", c.Writer, strings.Join(kinds, ", "))}}
}

type readCompletions struct {
	cfg readCompletionsConfig
	// notice hears of each layout the first time a line of it is read.
	id      string
	notice  io.Writer
	layouts sync.Map
	halt    func(error) // pipeline.Env.Halt
	// stopAhead ends the pass that judges a JSONL file ahead of the reader.
	stopAhead func()
}

var (
	_ pipeline.Source       = (*readCompletions)(nil)
	_ pipeline.Opener       = (*readCompletions)(nil)
	_ pipeline.Closer       = (*readCompletions)(nil)
	_ pipeline.InputChecker = (*readCompletions)(nil)
)

// jsonl is a JSONL path as this stage reads it.
func (r *readCompletions) jsonl() *jsonlSource {
	return &jsonlSource{Path: r.cfg.Path, OnBadLine: r.cfg.OnBadLine, Limit: r.cfg.Limit, AllowEmpty: true,
		Parse: func(line []byte, _, _ bool) (*record.Record, string, *lineProblem) {
			rec, err := r.parse(line)
			if err != nil {
				return nil, "", &lineProblem{reasonBadLine, err.Error()}
			}
			return rec, rec.ID, nil
		}}
}

// isJSONL reports whether path is a local JSONL file (not shards, not S3).
func (r *readCompletions) isJSONL() bool {
	if r.cfg.Writer != "" || strings.HasPrefix(r.cfg.Path, "s3://") {
		return false
	}
	shards, err := shardFiles(r.cfg.Path)
	return err == nil && shards == nil
}

// Open starts judging a JSONL file ahead of the reader (see
// jsonlSource.ahead); shards are typed already and are judged as read.
func (r *readCompletions) Open(ctx context.Context, env *pipeline.Env) error {
	r.halt = env.Halt
	r.id, r.notice = env.StageID, env.Notice
	if r.isJSONL() {
		r.stopAhead = r.jsonl().ahead(ctx, env)
	}
	return nil
}

func (r *readCompletions) Close() error {
	if r.stopAhead != nil {
		r.stopAhead()
	}
	return nil
}

// CheckInput judges every line of a JSONL file as the reader would; it
// has nothing to say about shards (nil).
func (r *readCompletions) CheckInput(ctx context.Context, _ *pipeline.Env) (*pipeline.InputReport, error) {
	if !r.isJSONL() {
		return nil, nil
	}
	return r.jsonl().checkAll(ctx, nil)
}

// Read streams the file one line at a time, or the shards one batch at a
// time.
func (r *readCompletions) Read(ctx context.Context, out pipeline.Emitter) error {
	if r.cfg.Writer != "" {
		return r.readWriter(ctx, out)
	}
	if strings.HasPrefix(r.cfg.Path, "s3://") {
		return r.readS3(ctx, out)
	}
	shards, err := shardFiles(r.cfg.Path)
	if err != nil {
		return err
	}
	if shards == nil {
		src := r.jsonl()
		src.Halt = r.halt
		return src.Read(ctx, out)
	}
	r.saw(layoutShards)
	var emitted int64
	for _, path := range shards {
		if err := r.readShard(ctx, out, path, path, &emitted); err != nil {
			if errors.Is(err, errLimit) {
				return nil
			}
			return err
		}
	}
	return nil
}

// errLimit ends reading: limit records went out, or a bad row halted the
// run (env.Halt commits and drains, then fails it).
var errLimit = errors.New("limit reached")

// readS3 reads shards write-arrow uploaded with upload-s3: the manifest at
// the URI, then each shard it names, downloaded (and its sha256 checked)
// into a temporary file one at a time.
func (r *readCompletions) readS3(ctx context.Context, out pipeline.Emitter) error {
	c, err := s3up.New(ctx, s3up.Config{URI: r.cfg.Path, Endpoint: r.cfg.Endpoint, Region: r.cfg.Region, PathStyle: r.cfg.ForcePathStyle})
	if err != nil {
		return err
	}
	defer c.Close()
	key, data, err := c.GetManifest(ctx)
	if err != nil {
		return err
	}
	var m filecommit.Manifest
	if err := json.Unmarshal(data, &m); err != nil {
		return fmt.Errorf("%s: %w", c.URL(key), err)
	}
	tmp, err := os.MkdirTemp("", "pipe-read-completions-*")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	r.saw(layoutShards)
	var emitted int64
	for _, sh := range m.Shards {
		local := filepath.Join(tmp, sh.Name)
		if err := c.Download(ctx, c.Key(sh.Name), local, sh.SHA256); err != nil {
			return err
		}
		err := r.readShard(ctx, out, local, c.URL(c.Key(sh.Name)), &emitted)
		os.Remove(local)
		if errors.Is(err, errLimit) {
			return nil
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// readWriter emits the committed records of the output at path as its
// writer's kind reads them (output.Spec.Each).
func (r *readCompletions) readWriter(ctx context.Context, out pipeline.Emitter) error {
	var emitted int64
	row := 0
	name := pipeline.DisplayPath(r.cfg.Path)
	if r.notice != nil {
		fmt.Fprintf(r.notice, "stage %q (read-completions): %s: the committed records of a %s output, read by its own reader\n", r.id, name, r.cfg.Writer)
	}
	err := pipeline.DefaultRegistry.EachCommitted(ctx, r.cfg.Writer, r.cfg.Path, func(rec *record.Record) error {
		row++
		return r.take(ctx, out, rec, name, row, &emitted)
	})
	if errors.Is(err, errLimit) {
		return nil
	}
	return err
}

// readShard emits the records of one shard file; name is how messages call
// it. It returns errLimit once limit records went out.
func (r *readCompletions) readShard(ctx context.Context, out pipeline.Emitter, path, name string, emitted *int64) error {
	row := 0
	return arrowrow.ReadFile(ctx, path, memory.DefaultAllocator, func(batch arrow.RecordBatch) error {
		recs, err := arrowrow.Records(batch)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		for _, rec := range recs {
			row++
			if err := r.take(ctx, out, rec, name, row, emitted); err != nil {
				return err
			}
		}
		return nil
	})
}

// take emits rec, row row of name, a typed record (of shards or another
// writer's output): skipped when finished, judged by check. It returns
// errLimit once limit records went out.
func (r *readCompletions) take(ctx context.Context, out pipeline.Emitter, rec *record.Record, name string, row int, emitted *int64) error {
	if r.cfg.Limit > 0 && *emitted >= r.cfg.Limit {
		return errLimit
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if out.SkipFinished(rec.ID) {
		out.Took(1)
		*emitted++
		return nil
	}
	if cerr := r.check(rec); cerr != nil {
		where := fmt.Sprintf("%s: row %d", name, row)
		if r.cfg.OnBadLine != "skip" {
			err := fmt.Errorf("%s: %v (set on_bad_line = \"skip\" to set bad rows aside)", where, cerr)
			if r.halt != nil {
				// As a bad JSONL line: commit, drain, then fail.
				r.halt(err)
				return errLimit
			}
			return err
		}
		bad := &record.Record{ID: fmt.Sprintf("%s:%d", name, row), Meta: map[string]any{"row": row, "id": rec.ID}}
		if err := out.Reject(bad, "bad_line", where+": "+cerr.Error()); err != nil {
			return err
		}
		out.Took(1)
		return nil
	}
	if err := out.Emit("", rec); err != nil {
		return err
	}
	out.Took(1)
	*emitted++
	return nil
}

// parse decodes one record line and checks it is a usable completion record.
func (r *readCompletions) parse(line []byte) (*record.Record, error) {
	if line[0] != '{' {
		return nil, errors.New("not a JSON object")
	}
	var l foreignLine
	if err := json.Unmarshal(line, &l); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return nil, fmt.Errorf("field %q must be %s, got JSON %s", strings.TrimPrefix(strings.TrimPrefix(te.Field, "Record."), "chatCompletion."), te.Type, te.Value)
		}
		return nil, fmt.Errorf("invalid JSON: %v", jsonErrText(err))
	}
	if err := l.turns(); err != nil {
		return nil, err
	}
	rec := &l.Record
	if l.Completion == nil && (r.cfg.RequireCompletion || len(l.Conversations) > 0 || len(l.Choices) > 0 || l.Response != nil) {
		var layout string
		var err error
		rec, layout, err = l.toRecord()
		if layout != "" {
			r.saw(layout)
		}
		if err != nil {
			if layout != "" {
				return nil, fmt.Errorf("%s: %v", layout, err)
			}
			return nil, err
		}
	} else {
		r.saw(layoutPipe)
	}
	if err := r.check(rec); err != nil {
		return nil, err
	}
	return rec, nil
}

// saw reports a layout the first time a line of it is read.
func (r *readCompletions) saw(layout string) {
	if _, seen := r.layouts.LoadOrStore(layout, true); seen || r.notice == nil {
		return
	}
	fmt.Fprintf(r.notice, "stage %q (read-completions): %s: layout %s: %s\n", r.id, pipeline.DisplayPath(r.cfg.Path), layout, layoutText[layout])
}

// check says whether rec is a usable completion record, and keeps an
// earlier verdict as history.
func (r *readCompletions) check(rec *record.Record) error {
	switch {
	case rec.ID == "":
		return errors.New(`no "id"`)
	case r.cfg.RequireCompletion && rec.Completion == nil:
		return errors.New(`no "completion" (set require_completion = false to read prompts-only records)`)
	case r.cfg.RequireOutputIDs && (rec.Completion == nil || len(rec.Completion.OutputIDs) == 0):
		return errors.New(`completion has no "output_ids" (generated with api = "chat"?)`)
	}
	// A verdict from an earlier run is history, not today's verdict.
	if rec.Reject != nil {
		if rec.Meta == nil {
			rec.Meta = map[string]any{}
		}
		rec.Meta["previous_reject"] = rec.Reject
		rec.Reject = nil
	}
	return nil
}
