package stages

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/expr-lang/expr"
	"github.com/expr-lang/expr/vm"

	"github.com/pipe-dev/pipe/internal/termsafe"
	"github.com/pipe-dev/pipe/pipeline"
	"github.com/pipe-dev/pipe/pipeline/figure"
	"github.com/pipe-dev/pipe/pipeline/record"
	"github.com/pipe-dev/pipe/stages/arrowrow"
	"github.com/pipe-dev/pipe/stages/textsim"
)

func init() {
	pipeline.Register(pipeline.Spec{
		Kind:    "decontaminate",
		Summary: "reject prompts that share an n-gram with a benchmark's, before they cost a completion",
		Description: `A drafter is judged on benchmarks such as MT-Bench, GSM8K and HumanEval.
Their prompts in the training set inflate that very figure. This kind
rejects them before generation, as contaminated. The detail names the
reference set, its row, and the shared words.

references are files you supply: JSONL or Parquet, one benchmark each,
named by the file's name. Nothing is downloaded. reference_text is an
expression over a reference row that gives its text, or a list of texts
(MT-Bench's turns). A bare field name is an expression too.

The test is the one GPT-3's appendix C, lm-evaluation-harness, datatrove
and open-r1 use: one shared n-gram of ngram words marks a prompt. The
default 8 is open-r1's (scripts/decontaminate.py), which checks prompts
against benchmark problems as this kind does. Texts are normalised first.
Letters are lowercased and diacritics dropped. Punctuation becomes a space.
Numbers stay as written. A reference shorter than ngram words matches only
a prompt whose whole text equals it. A run of 6 words found in 10 or more
reference texts is the benchmark's boilerplate, such as its answer
format instruction. An n-gram touching it marks nothing, since training
prompts carry the same instructions.

The index is built once at start. Its size is in the run's figures. It
takes about 20 bytes an n-gram: a few MB for the common benchmarks.`,
		Outputs: []string{"out", pipeline.RejectedPort},
		KeySettings: pipeline.SettingsFor(func(c *decontaminateConfig) string {
			names := make([]string, len(c.References))
			for i, p := range c.References {
				names[i] = referenceName(p)
			}
			return fmt.Sprintf("%d-grams against %s", c.NGram, strings.Join(names, ", "))
		}),
		Example: `[[stage]]
id   = "prompts"
kind = "read-prompts"
path = "prompts.jsonl"

[[stage]]
id         = "clean"
kind       = "decontaminate"
input      = "prompts"
references = ["benchmarks/gsm8k_test.jsonl", "benchmarks/mt_bench.jsonl"]

[[stage]]
id    = "kept"
kind  = "write-jsonl"
input = "clean"
path  = "out/kept.jsonl"

[[stage]]
id    = "contaminated"
kind  = "write-jsonl"
input = "clean.rejected"
path  = "out/contaminated.jsonl"
`,
		New: pipeline.NewProcessor(func(c *decontaminateConfig) (pipeline.Processor, error) { return &decontaminate{cfg: *c}, nil }),
	})
}

type decontaminateConfig struct {
	References    []string `toml:"references" required:"true" path:"in" op:"false" doc:"Benchmark files: JSONL (.jsonl, .json) or Parquet (.parquet). Each is a reference set named by its file name."`
	ReferenceText string   `toml:"reference_text" default:"question ?? problem ?? prompt ?? turns ?? instruction ?? text" op:"false" doc:"Expression over a reference row (expr-lang) giving its text or a list of texts. The default takes the first field present of GSM8K's, MATH's, HumanEval's, MT-Bench's and others' shapes."`
	NGram         int      `toml:"ngram" default:"8" min:"3" max:"50" op:"false" doc:"Words of the n-grams compared. One shared n-gram marks a prompt."`
	Text          string   `toml:"text" default:"user" enum:"user|last-user|all" op:"false" doc:"Which turns the compared text is made of. \"user\": every user turn. \"last-user\": the last user turn only. \"all\": every turn."`
	System        bool     `toml:"system" default:"false" op:"false" doc:"Put the system prompt into the compared text too."`
}

// Validate compiles reference_text and checks the sets' names differ.
func (c *decontaminateConfig) Validate() []error {
	var errs []error
	if _, err := compileReferenceText(c.ReferenceText); err != nil {
		errs = append(errs, fmt.Errorf("reference_text: %v", err))
	}
	seen := map[string]string{}
	for _, p := range c.References {
		name := referenceName(p)
		if other, dup := seen[name]; dup {
			errs = append(errs, fmt.Errorf("references: %s and %s are both named %q: rename one", other, p, name))
		}
		seen[name] = p
		if _, err := referenceFormat(p); err != nil {
			errs = append(errs, fmt.Errorf("references: %v", err))
		}
	}
	return errs
}

type decontaminate struct {
	cfg   decontaminateConfig
	done  pipeline.DoneSet
	index *textsim.Overlap
}

var (
	_ pipeline.Processor = (*decontaminate)(nil)
	_ pipeline.Opener    = (*decontaminate)(nil)
	_ pipeline.Reporter  = (*decontaminate)(nil)
)

// ReasonContaminated rejects a prompt that shares an n-gram with a
// reference set.
const ReasonContaminated = "contaminated"

func (d *decontaminate) Open(ctx context.Context, env *pipeline.Env) error {
	d.done = env.Done
	prog, err := compileReferenceText(d.cfg.ReferenceText)
	if err != nil {
		return fmt.Errorf("reference_text: %w", err)
	}
	d.index = textsim.NewOverlap(d.cfg.NGram)
	for _, p := range d.cfg.References {
		name := referenceName(p)
		texts := 0
		err := eachReferenceRow(ctx, p, func(row int, fields map[string]any) error {
			v, err := expr.Run(prog, fields)
			if err != nil {
				return fmt.Errorf("%s:%d: reference_text: %v", p, row, err)
			}
			list, ok := v.([]any)
			if !ok {
				list = []any{v}
			}
			for _, item := range list {
				s, ok := item.(string)
				if !ok {
					got := "nothing (the row has none of those fields)"
					if item != nil {
						got = termsafe.Line(termsafe.Cut(fmt.Sprintf("%T %v", item, item), 80))
					}
					return fmt.Errorf("%s:%d: reference_text %q gave %s; want a string or a list of strings (set reference_text to the field holding the text)",
						p, row, d.cfg.ReferenceText, got)
				}
				if d.index.Add(s, textsim.Ref{Set: name, Row: row}) {
					texts++
				}
			}
			return nil
		})
		if err != nil {
			return err
		}
		if texts == 0 {
			return fmt.Errorf("%s: no reference text in it: want rows whose reference_text (%s) is a string or a list of strings", p, d.cfg.ReferenceText)
		}
	}
	return nil
}

func (d *decontaminate) Process(_ context.Context, rec *record.Record, out pipeline.Emitter) error {
	hit, ok := d.index.Find(promptText(rec, d.cfg.Text, d.cfg.System))
	if !ok {
		return out.Emit("out", rec)
	}
	if d.done != nil && d.done.Has(rec.ID) { // finished by an earlier start: one verdict an id
		return out.Skip(rec, "done")
	}
	return out.Reject(rec, ReasonContaminated, fmt.Sprintf("shares %q with %s row %d", termsafe.Cut(hit.Span, 200), hit.Set, hit.Row))
}

func (d *decontaminate) Report() []figure.Figure {
	if d.index == nil {
		return nil
	}
	return []figure.Figure{
		figure.NewGauge("reference_texts", float64(d.index.Texts())),
		figure.NewGauge("reference_ngrams", float64(d.index.NGrams())),
		figure.NewGauge("index_bytes", float64(d.index.Bytes())),
	}
}

func compileReferenceText(src string) (*vm.Program, error) {
	return expr.Compile(src, expr.Env(map[string]any{}), expr.AllowUndefinedVariables())
}

// referenceName is a reference file's set name: its base name without
// its extensions (benchmarks/gsm8k_test.jsonl: gsm8k_test).
func referenceName(path string) string {
	base := filepath.Base(path)
	if i := strings.IndexByte(base, '.'); i > 0 {
		base = base[:i]
	}
	return base
}

func referenceFormat(path string) (string, error) {
	switch ext := strings.ToLower(filepath.Ext(path)); ext {
	case ".jsonl", ".json", ".ndjson":
		return "jsonl", nil
	case ".parquet":
		return "parquet", nil
	default:
		return "", fmt.Errorf("%s: a reference file is .jsonl, .json, .ndjson or .parquet, not %q", path, ext)
	}
}

// eachReferenceRow calls fn with each row of a reference file and its
// number from 1 (a JSONL line's number).
func eachReferenceRow(ctx context.Context, path string, fn func(row int, fields map[string]any) error) error {
	format, err := referenceFormat(path)
	if err != nil {
		return err
	}
	if format == "parquet" {
		row := 0
		var buf bytes.Buffer
		return arrowrow.ReadFile(ctx, path, memory.DefaultAllocator, func(b arrow.RecordBatch) error {
			buf.Reset()
			if err := array.RecordToJSON(b, &buf); err != nil {
				return fmt.Errorf("%s: %w", path, err)
			}
			return eachJSONLine(path, &buf, func(_ int, fields map[string]any) error {
				row++
				return fn(row, fields)
			})
		})
	}
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	return eachJSONLine(path, f, fn)
}

// eachJSONLine calls fn with each JSON object line of r and its number;
// blank lines are skipped, anything else is an error naming path:line.
func eachJSONLine(path string, r io.Reader, fn func(line int, fields map[string]any) error) error {
	br := bufio.NewReaderSize(r, 1<<20)
	for n := 1; ; n++ {
		line, err := readLine(br)
		if len(bytes.TrimSpace(line)) > 0 {
			var fields map[string]any
			if jerr := json.Unmarshal(line, &fields); jerr != nil {
				return fmt.Errorf("%s:%d: want one JSON object a line: %s", path, n, jsonErrText(jerr))
			}
			if ferr := fn(n, fields); ferr != nil {
				return ferr
			}
		}
		switch {
		case errors.Is(err, io.EOF):
			return nil
		case err != nil:
			return fmt.Errorf("%s:%d: %w", path, n, err)
		}
	}
}
