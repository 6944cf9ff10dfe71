package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/pipe-dev/pipe/pipeline"
	"github.com/pipe-dev/pipe/pipeline/filecommit"
	"github.com/pipe-dev/pipe/pipeline/output"
	"github.com/pipe-dev/pipe/pipeline/record"
	"github.com/pipe-dev/pipe/pipeline/rundir"
	"github.com/pipe-dev/pipe/stages/tokenize"
)

const inspectAccepts = "a shard file (.parquet, .arrow), a shard directory (with .pipe/manifest.json) or s3://bucket/prefix/DIR where upload-s3 put one, a JSONL file (.jsonl) or a run directory (with run.json or done.ids)"

// inspectCmd is pipe inspect and its flags.
type inspectCmd struct {
	opts inspectOptions
}

func init() {
	register(&command{
		Name:      "inspect",
		UsageLine: "pipe inspect [--rows N] [--tokenizer DIR] [--verify] [--json] PATH",
		Short:     "show what a shard, shard directory, JSONL output or run directory holds",
		Long: `Inspect reads what pipe wrote and shows it for a person, without changing it.
PATH is one of:

  a shard file (.parquet, .arrow)
      format, columns and types, rows, tokens (sum of num_tokens), then the
      first rows
  a shard directory (has .pipe/manifest.json, or manifest.json before pipe-row-2)
      the manifest (format, rows, tokens, bytes, each shard with its sha256)
      and a check that every shard it lists is there with its size (with
      --verify, its sha256 too); part files it does not list are shown as
      "not committed". Then the first rows of the first shard.
  a JSONL file (write-jsonl output, RUN_DIR/rejected/STAGE.jsonl, ...)
      lines, committed lines (from its commit index), tokens, a tally of
      reject reasons and failure errors, then the first records
  a run directory (has run.json or done.ids)
      pipeline file, creation, starts, state (status.json), finished ids
      (done.ids), per-stage counts of the last run, journal entries per
      stage, rejected/ and failed/ files with a tally of reasons, and the
      outputs the pipeline writes
  an output of any other writer kind (one whose Spec claims PATH)
      what it committed, as its kind reads it, then the first rows

A row shows its id, finish reason, rejection or failure, the last user
message and the answer (shortened in the middle to about 200 characters),
and num_tokens / num_loss_tokens. With --tokenizer, its input_ids are
decoded back to text with the trained-on (loss_mask = 1) spans inside ⟦ ⟧;
without it, those spans are given as token index ranges [from, to).

--json prints one JSON document instead (full text, not shortened).
Exit status: 0 when the data reads and checks, 1 when it cannot be read or a
check fails (a shard missing, of the wrong size, or with the wrong sha256),
2 for a PATH that is none of the above.`,
		New: func() runner { return &inspectCmd{} },
	})
}

func (c *inspectCmd) setFlags(fs *flag.FlagSet) {
	fs.IntVar(&c.opts.rows, "rows", 3, "rows to show (0 for none)")
	fs.StringVar(&c.opts.tokenizer, "tokenizer", "", "model directory with tokenizer.json: decode input_ids to text, loss-masked spans in ⟦ ⟧")
	fs.BoolVar(&c.opts.json, "json", false, "print one JSON document")
	fs.BoolVar(&c.opts.verify, "verify", false, "shard directory: check each shard's sha256 against the manifest (reads every shard)")
	fs.StringVar(&c.opts.endpoint, "endpoint", "", "s3:// PATH: the S3 endpoint URL of an S3-compatible server (default: AWS, or AWS_ENDPOINT_URL_S3)")
	fs.StringVar(&c.opts.region, "region", "", "s3:// PATH: the region (default: the AWS configuration's, else us-east-1)")
	fs.BoolVar(&c.opts.pathStyle, "force-path-style", false, "s3:// PATH: address the bucket as ENDPOINT/BUCKET")
}

func (c *inspectCmd) run(ctx context.Context, std *stdio, fs *flag.FlagSet) error {
	if fs.NArg() != 1 {
		return usageErrorf("usage: %s\nPATH is %s", "pipe inspect [--rows N] [--tokenizer DIR] [--verify] [--json] PATH", inspectAccepts)
	}
	if c.opts.rows < 0 {
		return usageErrorf("pipe inspect: --rows must be >= 0, got %d", c.opts.rows)
	}
	ins := &inspector{ctx: ctx, opts: c.opts, mem: memory.DefaultAllocator}
	if c.opts.tokenizer != "" {
		tok, err := tokenize.Load(c.opts.tokenizer)
		if err != nil {
			return usageErrorf("pipe inspect: --tokenizer: %v", err)
		}
		ins.tok = tok
	}
	doc, err := ins.inspect(fs.Arg(0))
	if doc != nil {
		if c.opts.json {
			enc := json.NewEncoder(std.Out)
			enc.SetEscapeHTML(false)
			enc.SetIndent("", "  ")
			if jerr := enc.Encode(doc); jerr != nil && err == nil {
				err = jerr
			}
		} else {
			doc.print(std.Out)
		}
	}
	if err == nil && doc != nil && len(doc.Problems) > 0 {
		err = fmt.Errorf("pipe inspect: %s: %d problem(s): %s", fs.Arg(0), len(doc.Problems), strings.Join(doc.Problems, "; "))
	}
	return err
}

type inspectOptions struct {
	rows         int
	tokenizer    string
	json, verify bool
	// For an s3:// PATH; credentials come from the AWS chain.
	endpoint, region string
	pathStyle        bool
}

type inspector struct {
	ctx  context.Context
	opts inspectOptions
	tok  *tokenize.Tokenizer
	mem  memory.Allocator
}

// inspectDoc is what `pipe inspect` reports, one field set per kind of PATH;
// --json prints it as is.
type inspectDoc struct {
	Path  string       `json:"path"`
	Kind  string       `json:"kind"` // "shard", "shards", "jsonl", "run", "output"
	Shard *shardReport `json:"shard,omitempty"`
	Dir   *dirReport   `json:"shards,omitempty"`
	JSONL *jsonlReport `json:"jsonl,omitempty"`
	Run   *runReport   `json:"run,omitempty"`
	// Output is an output of another writer kind, as it reads itself.
	Output *outputReport `json:"output,omitempty"`
	// RowsFrom names the file the rows were read from, when not PATH.
	RowsFrom string      `json:"rows_from,omitempty"`
	Rows     []rowReport `json:"rows,omitempty"`
	// Problems are failed checks; any makes the exit status 1.
	Problems []string `json:"problems,omitempty"`
}

// inspect reads path. The document is returned with an error when part of
// it could be read.
func (ins *inspector) inspect(path string) (*inspectDoc, error) {
	if strings.HasPrefix(path, "s3://") {
		doc := &inspectDoc{Path: path, Kind: "shards"}
		if err := ins.s3Dir(doc, path); err != nil && doc.Dir == nil {
			return nil, err
		} else {
			return doc, err
		}
	}
	if strings.Contains(path, "://") {
		return nil, usageErrorf("pipe inspect: %s: only s3:// URIs are read remotely; PATH is %s", path, inspectAccepts)
	}
	st, err := os.Stat(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, usageErrorf("pipe inspect: %s: no such file or directory; PATH is %s", path, inspectAccepts)
		}
		return nil, fmt.Errorf("pipe inspect: %w", err)
	}
	doc := &inspectDoc{Path: path}
	if st.IsDir() {
		return ins.inspectDir(doc, path)
	}
	return ins.inspectFile(doc, path)
}

// inspectDir reads the directory path: shards, a run directory, or a
// writer kind's output.
func (ins *inspector) inspectDir(doc *inspectDoc, path string) (*inspectDoc, error) {
	has := func(name string) bool { _, err := os.Stat(filepath.Join(path, name)); return err == nil }
	switch {
	case hasManifest(path):
		doc.Kind = "shards"
		return doc, ins.shardDir(doc, path)
	case has(rundir.RunFile) || has(pipeline.DoneFile):
		doc.Kind = "run"
		return doc, ins.runDir(doc, path)
	case len(partFiles(path)) > 0:
		doc.Kind = "shards" // shards without a manifest: none committed
		return doc, ins.shardDir(doc, path)
	}
	if kind, o := pipeline.DefaultRegistry.OutputAt(path); o != nil {
		return ins.output(doc, kind, o, path)
	}
	return nil, usageErrorf("pipe inspect: %s: a directory with neither %s nor %s nor done.ids nor part files; PATH is %s",
		path, filecommit.ManifestName, rundir.RunFile, inspectAccepts)
}

// inspectFile reads the file path: a shard, a manifest, a run.json, a
// JSONL file, or a writer kind's output.
func (ins *inspector) inspectFile(doc *inspectDoc, path string) (*inspectDoc, error) {
	mdir, isManifest := filecommit.ManifestDir(path)
	switch base := filepath.Base(path); {
	case isShardName(base):
		doc.Kind = "shard"
		sr, rows, err := ins.shardFile(path, ins.opts.rows)
		doc.Shard, doc.Rows = sr, rows
		if sr == nil {
			return nil, err
		}
		return doc, err
	case isManifest:
		doc.Path, doc.Kind = mdir, "shards"
		return doc, ins.shardDir(doc, doc.Path)
	case base == rundir.RunFile:
		doc.Path, doc.Kind = filepath.Dir(path), "run"
		return doc, ins.runDir(doc, doc.Path)
	case strings.HasSuffix(base, ".jsonl") || strings.HasSuffix(base, ".ndjson"):
		doc.Kind = "jsonl"
		jr, rows, err := ins.jsonlFile(path, ins.opts.rows)
		doc.JSONL, doc.Rows = jr, rows
		if jr == nil {
			return nil, err
		}
		return doc, err
	}
	if kind, o := pipeline.DefaultRegistry.OutputAt(path); o != nil {
		return ins.output(doc, kind, o, path)
	}
	return nil, usageErrorf("pipe inspect: %s: not a file pipe inspects; PATH is %s", path, inspectAccepts)
}

// output reports the output at path of a writer kind that claims it
// (output.Spec.Claims) and has no view of its own here: what it
// committed, then its first rows, read by the kind's own reader.
func (ins *inspector) output(doc *inspectDoc, kind string, spec *output.Spec, path string) (*inspectDoc, error) {
	doc.Kind = "output"
	o := &outputReport{Kind: kind, Path: path, Exists: true}
	doc.Output = o
	if spec.Committed == nil {
		return doc, nil
	}
	c, err := spec.Committed(path)
	if err != nil {
		return doc, fmt.Errorf("pipe inspect: %w", err)
	}
	if c == nil {
		return doc, nil
	}
	o.Format, o.Unit, o.Rows, o.Tokens, o.Bytes, o.Files = c.Format, c.Unit, c.Rows, c.Tokens, c.Bytes, len(c.Files)
	if spec.Each == nil || ins.opts.rows == 0 {
		return doc, nil
	}
	var recs []*record.Record
	errEnough := errors.New("enough rows")
	err = spec.Each(ins.ctx, path, func(rec *record.Record) error {
		recs = append(recs, rec)
		if len(recs) == ins.opts.rows {
			return errEnough
		}
		return nil
	})
	doc.Rows = ins.rows(recs)
	if err != nil && !errors.Is(err, errEnough) {
		return doc, fmt.Errorf("pipe inspect: %w", err)
	}
	return doc, nil
}

func isShardName(name string) bool {
	switch strings.ToLower(filepath.Ext(name)) {
	case ".parquet", ".arrow", ".feather", ".ipc":
		return true
	}
	return false
}

// partFiles lists dir's part-NNNNN.* files, sorted.
func partFiles(dir string) []string {
	entries, _ := os.ReadDir(dir)
	var out []string
	for _, e := range entries {
		if !e.IsDir() && filecommit.IsShardName(e.Name()) {
			out = append(out, e.Name())
		}
	}
	return out
}
