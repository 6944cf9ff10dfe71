package stages

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/pipe-dev/pipe/pipeline"
	"github.com/pipe-dev/pipe/pipeline/commitlog"
	"github.com/pipe-dev/pipe/stages/arrowrow"
)

func init() {
	pipeline.Register(pipeline.Spec{
		Kind:    "read-completions",
		Summary: "stream existing completion records (write-jsonl JSONL, or write-arrow Parquet/Arrow shards) for re-validation",
		Description: `path is a JSONL file with one record per line as write-jsonl writes it
({"id", "messages", "completion", ...}); or shards as write-arrow writes them:
a .parquet or .arrow file, a shard directory (its manifest.json names the
committed shards, in order; without one, its part-* files), or a
manifest.json. Either is streamed, never loaded whole. A record that is not
usable (invalid JSON, no id, no completion when require_completion is set)
stops the run with its file and line or row (on_bad_line = "fail"), or is
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
	Path string `toml:"path" op:"true" required:"true" path:"inany" doc:"JSONL file of records (as write-jsonl writes them), or write-arrow shards: a .parquet/.arrow file, a shard directory or its manifest.json; relative to the pipeline file"`
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

// Read streams the file one line at a time, or the shards one batch at a
// time.
func (r *readCompletions) Read(ctx context.Context, out pipeline.Emitter) error {
	shards, err := shardFiles(r.cfg.Path)
	if err != nil {
		return err
	}
	if shards == nil {
		src := jsonlSource{Path: r.cfg.Path, OnBadLine: r.cfg.OnBadLine, Limit: r.cfg.Limit, Parse: r.parse}
		return src.Read(ctx, out)
	}
	var emitted int64
	errLimit := errors.New("limit reached")
	for _, path := range shards {
		row := 0
		err := arrowrow.ReadFile(ctx, path, memory.DefaultAllocator, func(batch arrow.RecordBatch) error {
			recs, err := arrowrow.Records(batch)
			if err != nil {
				return fmt.Errorf("%s: %w", path, err)
			}
			for _, rec := range recs {
				row++
				if r.cfg.Limit > 0 && emitted >= r.cfg.Limit {
					return errLimit
				}
				if err := ctx.Err(); err != nil {
					return err
				}
				if out.SkipFinished(rec.ID) {
					out.Took(1)
					emitted++
					continue
				}
				if cerr := r.check(rec); cerr != nil {
					where := fmt.Sprintf("%s: row %d", path, row)
					if r.cfg.OnBadLine != "skip" {
						return fmt.Errorf("%s: %v (set on_bad_line = \"skip\" to set bad rows aside)", where, cerr)
					}
					bad := &pipeline.Record{ID: fmt.Sprintf("%s:%d", path, row), Meta: map[string]any{"row": row, "id": rec.ID}}
					if err := out.Reject(bad, "bad_line", where+": "+cerr.Error()); err != nil {
						return err
					}
					out.Took(1)
					continue
				}
				if err := out.Emit("", rec); err != nil {
					return err
				}
				out.Took(1)
				emitted++
			}
			return nil
		})
		if errors.Is(err, errLimit) {
			return nil
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// shardFiles lists the shard files path names, in order, or nil when path
// is a JSONL file.
func shardFiles(path string) ([]string, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	dir := path
	switch {
	case st.IsDir():
	case filepath.Base(path) == commitlog.ManifestName:
		dir = filepath.Dir(path)
	case slices.Contains([]string{".parquet", ".arrow"}, strings.ToLower(filepath.Ext(path))):
		return []string{path}, nil
	default:
		return nil, nil
	}
	m, err := commitlog.ReadManifest(dir)
	if err != nil {
		return nil, err
	}
	var files []string
	if m != nil {
		for _, s := range m.Shards {
			files = append(files, filepath.Join(dir, s.Name))
		}
		return files, nil
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	for _, e := range entries {
		if ext := filepath.Ext(e.Name()); !e.IsDir() && (ext == ".parquet" || ext == ".arrow") && !strings.HasPrefix(e.Name(), ".") {
			files = append(files, filepath.Join(dir, e.Name()))
		}
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("%s: no %s and no .parquet or .arrow shards in it", dir, commitlog.ManifestName)
	}
	return files, nil // ReadDir sorts by name
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
	if err := r.check(&rec); err != nil {
		return nil, err
	}
	return &rec, nil
}

// check says whether rec is a usable completion record, and keeps an
// earlier verdict as history.
func (r *readCompletions) check(rec *pipeline.Record) error {
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
