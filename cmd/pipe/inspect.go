package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"github.com/pipe-dev/pipe/pipeline/rundir/layout"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/pipe-dev/pipe/internal/numfmt"
	"github.com/pipe-dev/pipe/internal/termsafe"
	"github.com/pipe-dev/pipe/pipeline"
	"github.com/pipe-dev/pipe/pipeline/commitlog"
	"github.com/pipe-dev/pipe/pipeline/engine"
	"github.com/pipe-dev/pipe/pipeline/filecommit"
	"github.com/pipe-dev/pipe/pipeline/output"
	"github.com/pipe-dev/pipe/pipeline/record"
	"github.com/pipe-dev/pipe/pipeline/rundir"
	"github.com/pipe-dev/pipe/stages/arrowrow"
	"github.com/pipe-dev/pipe/stages/tokenize"
)

const inspectAccepts = "a shard file (.parquet, .arrow), a shard directory (with .pipe/manifest.json) or s3://bucket/prefix/DIR where upload-s3 put one, a JSONL file (.jsonl) or a run directory (with run.json or done.ids)"

func init() {
	var o inspectOptions
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
		SetFlags: func(fs *flag.FlagSet) {
			o = inspectOptions{}
			fs.IntVar(&o.rows, "rows", 3, "rows to show (0 for none)")
			fs.StringVar(&o.tokenizer, "tokenizer", "", "model directory with tokenizer.json: decode input_ids to text, loss-masked spans in ⟦ ⟧")
			fs.BoolVar(&o.json, "json", false, "print one JSON document")
			fs.BoolVar(&o.verify, "verify", false, "shard directory: check each shard's sha256 against the manifest (reads every shard)")
			fs.StringVar(&o.endpoint, "endpoint", "", "s3:// PATH: the S3 endpoint URL of an S3-compatible server (default: AWS, or AWS_ENDPOINT_URL_S3)")
			fs.StringVar(&o.region, "region", "", "s3:// PATH: the region (default: the AWS configuration's, else us-east-1)")
			fs.BoolVar(&o.pathStyle, "force-path-style", false, "s3:// PATH: address the bucket as ENDPOINT/BUCKET")
		},
		Run: func(ctx context.Context, std *stdio, fs *flag.FlagSet) error {
			if fs.NArg() != 1 {
				return usageErrorf("usage: %s\nPATH is %s", "pipe inspect [--rows N] [--tokenizer DIR] [--verify] [--json] PATH", inspectAccepts)
			}
			if o.rows < 0 {
				return usageErrorf("pipe inspect: --rows must be >= 0, got %d", o.rows)
			}
			ins := &inspector{ctx: ctx, opts: o, mem: memory.DefaultAllocator}
			if o.tokenizer != "" {
				tok, err := tokenize.Load(o.tokenizer)
				if err != nil {
					return usageErrorf("pipe inspect: --tokenizer: %v", err)
				}
				ins.tok = tok
			}
			doc, err := ins.inspect(fs.Arg(0))
			if doc != nil {
				if o.json {
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
		},
	})
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

var partFileName = regexp.MustCompile(`^part-\d{5,}\.`)

// partFiles lists dir's part-NNNNN.* files, sorted.
func partFiles(dir string) []string {
	entries, _ := os.ReadDir(dir)
	var out []string
	for _, e := range entries {
		if !e.IsDir() && partFileName.MatchString(e.Name()) {
			out = append(out, e.Name())
		}
	}
	return out
}

// ---- shard files ----

type shardReport struct {
	Path      string       `json:"path"`
	Format    string       `json:"format"`
	Schema    string       `json:"schema,omitempty"` // pipe.schema metadata
	Columns   []columnInfo `json:"columns"`
	Rows      int64        `json:"rows"`
	Tokens    int64        `json:"tokens"`
	LossTok   int64        `json:"loss_tokens"`
	Bytes     int64        `json:"bytes"`
	Groups    int          `json:"row_groups"` // Parquet row groups or Arrow record batches
	PipeShard bool         `json:"pipe_shard"` // has the id column rows are read by
}

type columnInfo struct {
	Name     string `json:"name"`
	Type     string `json:"type"`
	Nullable bool   `json:"nullable"`
}

// shardFile reads a shard's metadata, its token counts (the num_tokens
// and num_loss_tokens columns only, for Parquet) and its first n rows.
func (ins *inspector) shardFile(path string, n int) (*shardReport, []rowReport, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, nil, err
	}
	sr := &shardReport{Path: path, Bytes: st.Size()}
	var first []*record.Record
	take := func(batch arrow.RecordBatch) error {
		if len(first) >= n || !sr.PipeShard {
			return nil
		}
		k := min(int64(n-len(first)), batch.NumRows())
		part := batch.NewSlice(0, k)
		defer part.Release()
		recs, err := arrowrow.Records(part)
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		first = append(first, recs...)
		return nil
	}
	switch strings.ToLower(filepath.Ext(path)) {
	case ".parquet":
		sr.Format = arrowrow.FormatParquet
		err = ins.parquetFile(path, sr, n, take)
	default:
		sr.Format = arrowrow.FormatArrow
		err = ins.arrowFile(path, sr, take)
	}
	if err != nil {
		if sr.Columns == nil {
			return nil, nil, err
		}
		return sr, ins.rows(first), err
	}
	return sr, ins.rows(first), nil
}

func (sr *shardReport) setSchema(s *arrow.Schema) {
	if v, ok := s.Metadata().GetValue("pipe.schema"); ok {
		sr.Schema = v
	}
	for _, f := range s.Fields() {
		sr.Columns = append(sr.Columns, columnInfo{Name: f.Name, Type: typeName(f.Type), Nullable: f.Nullable})
		if f.Name == arrowrow.ColID && f.Type.ID() == arrow.STRING {
			sr.PipeShard = true
		}
	}
}

// typeName is a column type as a person reads it: "list<int32>".
func typeName(t arrow.DataType) string {
	switch lt := t.(type) {
	case *arrow.ListType:
		return "list<" + typeName(lt.Elem()) + ">"
	case *arrow.LargeListType:
		return "large_list<" + typeName(lt.Elem()) + ">"
	case *arrow.FixedSizeListType:
		return fmt.Sprintf("fixed_size_list<%s, %d>", typeName(lt.Elem()), lt.Len())
	}
	switch t.ID() {
	case arrow.STRING:
		return "string" // Arrow's "utf8", as pyarrow and the README name it
	case arrow.LARGE_STRING:
		return "large_string"
	}
	return t.String()
}

// sumTokens adds the num_tokens and num_loss_tokens columns of batch.
func (sr *shardReport) sumTokens(batch arrow.RecordBatch) {
	for i, f := range batch.Schema().Fields() {
		col, ok := batch.Column(i).(*array.Int32)
		if !ok {
			continue
		}
		var dst *int64
		switch f.Name {
		case arrowrow.ColNumTokens:
			dst = &sr.Tokens
		case arrowrow.ColNumLossTokens:
			dst = &sr.LossTok
		default:
			continue
		}
		for r := range col.Len() {
			if col.IsValid(r) {
				*dst += int64(col.Value(r))
			}
		}
	}
}

func (ins *inspector) parquetFile(path string, sr *shardReport, n int, take func(arrow.RecordBatch) error) error {
	pf, err := file.OpenParquetFile(path, false, file.WithReadProps(parquet.NewReaderProperties(ins.mem)))
	if err != nil {
		return fmt.Errorf("%s: not a readable Parquet file: %w", path, err)
	}
	defer pf.Close()
	sr.Rows = pf.NumRows()
	sr.Groups = pf.NumRowGroups()
	fr, err := pqarrow.NewFileReader(pf, pqarrow.ArrowReadProperties{BatchSize: 1024}, ins.mem)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	schema, err := fr.Schema()
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	sr.setSchema(schema)
	// Tokens: only the two count columns are read.
	var cols []int
	for _, name := range []string{arrowrow.ColNumTokens, arrowrow.ColNumLossTokens} {
		if i := pf.MetaData().Schema.ColumnIndexByName(name); i >= 0 {
			cols = append(cols, i)
		}
	}
	read := func(cols []int, fn func(arrow.RecordBatch) (bool, error)) error {
		if sr.Rows == 0 {
			return nil
		}
		return ins.readParquet(fr, path, cols, fn)
	}
	if len(cols) > 0 {
		if err := read(cols, func(b arrow.RecordBatch) (bool, error) { sr.sumTokens(b); return true, nil }); err != nil {
			return err
		}
	}
	if n == 0 || !sr.PipeShard {
		return nil
	}
	fr.Props.BatchSize = int64(max(n, 1))
	got := 0
	return read(nil, func(b arrow.RecordBatch) (bool, error) {
		got += int(b.NumRows())
		return got < n, take(b)
	})
}

// readParquet reads the columns cols (nil: all) of the Parquet file at
// path in batches, passing each to fn until it returns false or an error.
func (ins *inspector) readParquet(fr *pqarrow.FileReader, path string, cols []int, fn func(arrow.RecordBatch) (bool, error)) error {
	rr, err := fr.GetRecordReader(ins.ctx, cols, nil)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	defer rr.Release()
	for rr.Next() {
		more, err := fn(rr.RecordBatch())
		if err != nil || !more {
			return err
		}
	}
	if err := rr.Err(); err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

func (ins *inspector) arrowFile(path string, sr *shardReport, take func(arrow.RecordBatch) error) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	r, err := ipc.NewFileReader(f, ipc.WithAllocator(ins.mem))
	if err != nil {
		return fmt.Errorf("%s: not a readable Arrow IPC file: %w", path, err)
	}
	defer r.Close()
	sr.setSchema(r.Schema())
	sr.Groups = r.NumRecords()
	for i := range r.NumRecords() {
		if err := ins.ctx.Err(); err != nil {
			return err
		}
		batch, err := r.RecordBatch(i)
		if err != nil {
			return fmt.Errorf("%s: batch %d: %w", path, i, err)
		}
		sr.Rows += batch.NumRows()
		sr.sumTokens(batch)
		if err := take(batch); err != nil {
			return err
		}
	}
	return nil
}

// ---- shard directories ----

type dirReport struct {
	Dir      string       `json:"dir"`
	Manifest bool         `json:"manifest"` // false: no manifest, nothing committed
	Format   string       `json:"format,omitempty"`
	Schema   string       `json:"schema,omitempty"`
	Rows     int64        `json:"rows"`
	Tokens   int64        `json:"tokens"`
	Bytes    int64        `json:"bytes"`
	Updated  time.Time    `json:"updated,omitzero"`
	Shards   []shardEntry `json:"shard_files"`
	// NotCommitted are part files the manifest does not list (a writer
	// stopped before committing them; removed when it resumes).
	NotCommitted []string `json:"not_committed,omitempty"`
	// Temporary are hidden files of a shard being written.
	Temporary []string `json:"temporary,omitempty"`
	Verified  bool     `json:"sha256_verified"`
	// First is the first shard, whose rows are shown.
	First *shardReport `json:"first_shard,omitempty"`
}

type shardEntry struct {
	filecommit.ShardInfo
	// Status: "ok", "missing", "size ..." or "sha256 ...".
	Status string `json:"status"`
}

func (ins *inspector) shardDir(doc *inspectDoc, dir string) error {
	m, err := filecommit.ReadManifest(dir)
	if err != nil {
		return fmt.Errorf("pipe inspect: %w", err)
	}
	dr := &dirReport{Dir: dir, Verified: ins.opts.verify}
	doc.Dir = dr
	named := map[string]bool{}
	if m != nil {
		dr.Manifest = true
		dr.Format, dr.Schema, dr.Rows, dr.Tokens, dr.Bytes, dr.Updated = m.Format, m.Schema, m.Rows, m.Tokens, m.Bytes, m.Updated
		for _, sh := range m.Shards {
			named[sh.Name] = true
			e := shardEntry{ShardInfo: sh, Status: shardStatus(filepath.Join(dir, sh.Name), sh, ins.opts.verify)}
			if e.Status != "ok" {
				doc.Problems = append(doc.Problems, sh.Name+": "+e.Status)
			}
			dr.Shards = append(dr.Shards, e)
		}
	}
	for _, name := range partFiles(dir) {
		if !named[name] {
			dr.NotCommitted = append(dr.NotCommitted, name)
		}
	}
	dr.Temporary = temporaryParts(dir)
	for _, e := range dr.Shards { // rows of the first shard that checks out
		if e.Status != "ok" {
			continue
		}
		p := filepath.Join(dir, e.Name)
		sr, rows, err := ins.shardFile(p, ins.opts.rows)
		dr.First, doc.Rows, doc.RowsFrom = sr, rows, p
		return err
	}
	return nil
}

// shardStatus checks the shard file at p against its manifest entry sh:
// "ok", "missing", or what differs (its size; with verify, its SHA-256).
func shardStatus(p string, sh filecommit.ShardInfo, verify bool) string {
	st, err := os.Stat(p)
	switch {
	case err != nil && errors.Is(err, fs.ErrNotExist):
		return "missing"
	case err != nil:
		return err.Error()
	case st.Size() != sh.Bytes:
		return fmt.Sprintf("size %d, manifest says %d", st.Size(), sh.Bytes)
	case verify:
		sum, err := fileSHA256(p)
		if err != nil {
			return err.Error()
		} else if sum != sh.SHA256 {
			return fmt.Sprintf("sha256 %s, manifest says %s", short(sum), short(sh.SHA256))
		}
	}
	return "ok"
}

// temporaryParts lists dir's shards being written (.part-*.tmp).
func temporaryParts(dir string) []string {
	var out []string
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if n := e.Name(); strings.HasPrefix(n, ".part-") && strings.HasSuffix(n, ".tmp") {
			out = append(out, n)
		}
	}
	return out
}

func fileSHA256(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

func short(sum string) string {
	if len(sum) > 12 {
		return sum[:12]
	}
	return sum
}

// ---- JSONL files ----

type jsonlReport struct {
	Path  string `json:"path"`
	Bytes int64  `json:"bytes"`
	Lines int64  `json:"lines"`
	// Committed is the lines the commit index holds; nil without an index
	// (a file not written by pipe's commit log).
	Committed *int64 `json:"committed"`
	Index     string `json:"index,omitempty"`
	// Journal is set for a journal (lines {"port", "record"}).
	Journal  bool    `json:"journal,omitempty"`
	WithTok  int64   `json:"rows_with_tokens"`
	Tokens   int64   `json:"tokens"`
	LossTok  int64   `json:"loss_tokens"`
	Rejected []tally `json:"rejected,omitempty"`
	Failed   []tally `json:"failed,omitempty"`
}

type tally struct {
	Stage  string `json:"stage"`
	Reason string `json:"reason"`
	Count  int64  `json:"count"`
}

func (ins *inspector) jsonlFile(path string, n int) (*jsonlReport, []rowReport, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, nil, err
	}
	jr := &jsonlReport{Path: path, Bytes: st.Size()}
	ids, err := commitlog.ReadIDs(path)
	if err != nil {
		return nil, nil, fmt.Errorf("pipe inspect: %w", err)
	}
	if _, err := os.Stat(commitlog.IndexPath(path)); err == nil {
		c := int64(len(ids))
		jr.Committed, jr.Index = &c, commitlog.IndexPath(path)
	}
	rejects := map[[2]string]int64{}
	fails := map[[2]string]int64{}
	var first []*record.Record
	bad := map[int]string{} // index in first: why the line did not decode
	r := bufio.NewReaderSize(f, 1<<20)
	var line []byte
	for {
		if jr.Lines%4096 == 0 {
			if err := ins.ctx.Err(); err != nil {
				return jr, nil, err
			}
		}
		var rerr error
		line, rerr = readWholeLine(r, line[:0])
		if t := bytes.TrimSpace(line); len(t) > 0 {
			jr.Lines++
			if jr.Lines == 1 && bytes.HasPrefix(t, []byte(`{"port":`)) {
				jr.Journal = true
			}
			if len(first) < n {
				first = jr.takeRecord(first, t, bad)
			}
			jr.scan(t, rejects, fails)
		}
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			return jr, ins.rows(first), fmt.Errorf("pipe inspect: reading %s: %w", path, rerr)
		}
	}
	jr.Rejected, jr.Failed = sortTally(rejects), sortTally(fails)
	rows := ins.rows(first)
	for i, why := range bad {
		rows[i] = rowReport{Unreadable: why}
	}
	return jr, rows, nil
}

// readWholeLine appends the next line of r, however long, to line; err is
// r's error after it (io.EOF at the end).
func readWholeLine(r *bufio.Reader, line []byte) ([]byte, error) {
	for {
		chunk, err := r.ReadSlice('\n')
		line = append(line, chunk...)
		if err != bufio.ErrBufferFull {
			return line, err
		}
	}
}

// takeRecord appends the record of line, the jr.Lines-th, to first; a
// line that is not one is an empty record, and bad says why at its index.
func (jr *jsonlReport) takeRecord(first []*record.Record, line []byte, bad map[int]string) []*record.Record {
	rec, err := decodeLine(line, jr.Journal)
	if err != nil {
		bad[len(first)] = fmt.Sprintf("line %d is not a record: %v", jr.Lines, err)
		rec = &record.Record{}
	}
	return append(first, rec)
}

func decodeLine(line []byte, journal bool) (*record.Record, error) {
	if journal {
		var je struct {
			Record *record.Record `json:"record"`
		}
		if err := json.Unmarshal(line, &je); err != nil || je.Record == nil {
			return nil, errors.New("not a journal entry")
		}
		return je.Record, nil
	}
	var rec record.Record
	if err := json.Unmarshal(line, &rec); err != nil {
		return nil, err
	}
	return &rec, nil
}

var (
	keyTokens  = []byte(`"tokens":{"input_ids":`)
	keyNum     = []byte(`"num_tokens":`)
	keyNumLoss = []byte(`"num_loss_tokens":`)
	keyReject  = []byte(`"reject":{`)
	keyFailure = []byte(`"failure":{`)
)

// failureChars is how much of a failure's error a tally keeps.
const failureChars = 60

// scan counts a record line's tokens and its rejection or failure without
// decoding the whole line: a key with its quotes cannot occur inside a JSON
// string (quotes there are escaped), and a record's fields come in a fixed
// order (tokens, reject, failure, then meta), so the first match is the
// record's own field.
func (jr *jsonlReport) scan(line []byte, rejects, fails map[[2]string]int64) {
	if i := bytes.Index(line, keyTokens); i >= 0 {
		rest := line[i:]
		jr.WithTok++
		jr.Tokens += intAfter(rest, keyNum)
		jr.LossTok += intAfter(rest, keyNumLoss)
	}
	if i := bytes.Index(line, keyReject); i >= 0 {
		var rj record.Rejection
		if json.NewDecoder(bytes.NewReader(line[i+len(keyReject)-1:])).Decode(&rj) == nil {
			rejects[[2]string{rj.Stage, rj.Reason}]++
		}
	}
	if i := bytes.Index(line, keyFailure); i >= 0 {
		var fl record.Failure
		if json.NewDecoder(bytes.NewReader(line[i+len(keyFailure)-1:])).Decode(&fl) == nil {
			fails[[2]string{fl.Stage, firstRunes(fl.Error, failureChars)}]++
		}
	}
}

func intAfter(b, key []byte) int64 {
	i := bytes.Index(b, key)
	if i < 0 {
		return 0
	}
	b = b[i+len(key):]
	j := 0
	for j < len(b) && (b[j] >= '0' && b[j] <= '9' || j == 0 && b[j] == '-') {
		j++
	}
	v, _ := strconv.ParseInt(string(b[:j]), 10, 64)
	return v
}

func firstRunes(s string, n int) string {
	for i := range s {
		if n == 0 {
			return s[:i] + "…"
		}
		n--
	}
	return s
}

func sortTally(m map[[2]string]int64) []tally {
	out := make([]tally, 0, len(m))
	for k, c := range m {
		out = append(out, tally{Stage: k[0], Reason: k[1], Count: c})
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.Stage != b.Stage {
			return a.Stage < b.Stage
		}
		if a.Count != b.Count {
			return a.Count > b.Count
		}
		return a.Reason < b.Reason
	})
	return out
}

// ---- run directories ----

type runReport struct {
	Dir      string         `json:"dir"`
	Pipeline string         `json:"pipeline,omitempty"`
	Created  time.Time      `json:"created,omitzero"`
	Starts   []rundir.Start `json:"starts,omitempty"`
	// From status.json (absent when the run never wrote one).
	State      string        `json:"state,omitempty"`
	Updated    string        `json:"updated,omitempty"`
	PID        int           `json:"pid,omitempty"`
	Error      string        `json:"error,omitempty"`
	Unfinished *int64        `json:"unfinished,omitempty"`
	Stages     []stageCounts `json:"stages,omitempty"`
	Lock       *lockReport   `json:"lock,omitempty"`
	// Finished is the ids in done.ids.
	Finished int64          `json:"finished"`
	Journal  []fileCount    `json:"journal,omitempty"`
	Rejected []*jsonlReport `json:"rejected,omitempty"`
	Failed   []*jsonlReport `json:"failed,omitempty"`
	Outputs  []outputReport `json:"outputs,omitempty"`
	Log      string         `json:"log,omitempty"`
}

// stageCounts are status.json's counts of a stage (declared once, in
// package pipeline).
type stageCounts = engine.StageCounts

// lockReport is the run directory's lock as pipe inspect shows it (read
// by rundir.ReadHolder, the lock file's one reader).
type lockReport struct {
	PID      int       `json:"pid"`
	Host     string    `json:"host"`
	Started  time.Time `json:"started"`
	Released time.Time `json:"released,omitzero"`
	// Alive: the process is running, holding the lock (checked only on
	// the same host).
	Alive *bool `json:"alive,omitempty"`
}

type fileCount struct {
	Stage     string `json:"stage"`
	Path      string `json:"path"`
	Committed int64  `json:"committed"`
	Bytes     int64  `json:"bytes"`
}

type outputReport struct {
	Stage  string `json:"stage"`
	Kind   string `json:"kind"`
	Path   string `json:"path"`
	Exists bool   `json:"exists"`
	// Format and Unit are as the kind says (output.Committed): "parquet"
	// in "shards", "jsonl" in "lines"; "" while nothing is committed.
	Format string `json:"format,omitempty"`
	Unit   string `json:"unit,omitempty"`
	// Rows committed: the manifest's rows, or the commit index's lines.
	Rows int64 `json:"rows"`
	// Files are the committed files (its shards; "shards" in JSON, as
	// before other kinds had outputs).
	Files  int   `json:"shards,omitempty"`
	Tokens int64 `json:"tokens,omitempty"`
	Bytes  int64 `json:"bytes,omitempty"`
}

func (ins *inspector) runDir(doc *inspectDoc, dir string) error {
	rr := &runReport{Dir: dir}
	doc.Run = rr
	run, err := rundir.ReadRun(dir)
	if err != nil {
		return fmt.Errorf("pipe inspect: %w", err)
	}
	if run != nil {
		rr.Pipeline, rr.Created, rr.Starts = run.Pipeline, run.Created, run.History
		rr.Outputs = runOutputs(run)
	}
	if err := rr.readStatus(dir); err != nil {
		return err
	}
	rr.Lock = readLock(dir)
	if n, err := commitlog.CountIDs(filepath.Join(dir, pipeline.DoneFile)); err != nil {
		return fmt.Errorf("pipe inspect: %w", err)
	} else {
		rr.Finished = n
	}
	if rr.Journal, err = readJournals(dir); err != nil {
		return err
	}
	for _, class := range layout.DeadLetterClasses {
		for _, p := range jsonlIn(layout.DeadLetterDir(dir, class)) {
			jr, _, err := ins.jsonlFile(p, 0)
			if err != nil {
				return err
			}
			if class == layout.Rejected {
				rr.Rejected = append(rr.Rejected, jr)
			} else {
				rr.Failed = append(rr.Failed, jr)
			}
		}
	}
	if _, err := os.Stat(filepath.Join(dir, runLogFile)); err == nil {
		rr.Log = filepath.Join(dir, runLogFile)
	}
	return nil
}

// readStatus takes the state and counts of the last run from dir's
// status.json, if it has one.
func (rr *runReport) readStatus(dir string) error {
	st, err := rundir.ReadStatus[json.RawMessage](dir)
	var unreadable *fs.PathError
	switch {
	case errors.As(err, &unreadable):
		return nil // left out, as when there is none
	case err != nil:
		return fmt.Errorf("pipe inspect: %v", err)
	case st == nil:
		return nil
	}
	rr.State, rr.Updated, rr.PID, rr.Error, rr.Unfinished = st.State, st.Updated, st.PID, st.Error, &st.Unfin
	for _, s := range st.Stages {
		rr.Stages = append(rr.Stages, s.StageCounts)
	}
	return nil
}

// readLock is what dir's lock says (rundir.ReadHolder): on this host, an
// unreleased lock also says whether its process is alive (holds it). nil
// when there is none (or it is unreadable).
func readLock(dir string) *lockReport {
	h, err := rundir.ReadHolder(dir)
	if err != nil || h == nil || h.PID <= 0 {
		return nil
	}
	l := &lockReport{PID: h.PID, Host: h.Host, Started: h.Started, Released: h.Released}
	if !h.Remote && l.Released.IsZero() {
		alive := h.Alive
		l.Alive = &alive
	}
	return l
}

// readJournals counts the entries and bytes of each stage's journal in
// dir: segments journal/STAGE/NNNNN.jsonl (those whose ids are all
// finished are deleted), after an earlier pipe's single journal/STAGE.jsonl.
func readJournals(dir string) ([]fileCount, error) {
	journalDir := layout.JournalDir(dir)
	var out []fileCount
	byStage := map[string]int{}
	for _, p := range commitlog.JournalFiles(journalDir, "") {
		ids, err := commitlog.ReadIDs(p)
		if err != nil {
			return out, fmt.Errorf("pipe inspect: %w", err) // what was read is shown
		}
		stage, at := strings.TrimSuffix(filepath.Base(p), ".jsonl"), p
		if filepath.Dir(p) != journalDir {
			stage, at = filepath.Base(filepath.Dir(p)), filepath.Dir(p)
		}
		i, ok := byStage[stage]
		if !ok {
			i = len(out)
			byStage[stage] = i
			out = append(out, fileCount{Stage: stage, Path: at})
		}
		out[i].Committed += int64(len(ids))
		if st, err := os.Stat(p); err == nil {
			out[i].Bytes += st.Size()
		}
	}
	return out, nil
}

// jsonlIn lists dir's *.jsonl files (not the hidden indexes), sorted.
func jsonlIn(dir string) []string {
	entries, _ := os.ReadDir(dir)
	var out []string
	for _, e := range entries {
		if n := e.Name(); !e.IsDir() && !strings.HasPrefix(n, ".") && strings.HasSuffix(n, ".jsonl") {
			out = append(out, filepath.Join(dir, n))
		}
	}
	return out
}

// runOutputs reads what each output of the run committed, as its kind
// reads it (output.Spec): a manifest's shards, a commit index's
// lines. The outputs are run.json's; one written before it recorded them
// has its writers found in its settings (their "path").
func runOutputs(run *rundir.Run) []outputReport {
	outs := run.Outputs
	if len(outs) == 0 {
		outs = settingsOutputs(run.Settings)
	}
	var out []outputReport
	for _, ro := range outs {
		spec := pipeline.OutputOf(ro.Kind)
		if spec == nil || spec.Committed == nil {
			continue // not data of its own (an upload)
		}
		o := outputReport{Stage: ro.Stage, Kind: ro.Kind, Path: ro.Path}
		if _, err := os.Stat(ro.Path); err == nil {
			o.Exists = true
			if c, err := spec.Committed(ro.Path); err == nil && c != nil {
				o.Format, o.Unit = c.Format, c.Unit
				o.Rows, o.Tokens, o.Bytes = c.Rows, c.Tokens, c.Bytes
				o.Files = len(c.Files)
			}
		}
		out = append(out, o)
	}
	return out
}

// settingsOutputs are the outputs of an older run.json, by stage id: the
// stages whose kind keeps an output, at their "path".
func settingsOutputs(settings map[string]any) []rundir.Output {
	var out []rundir.Output
	for _, s := range rundir.RecordedStages(settings) {
		path := s.Str("path")
		if spec := pipeline.OutputOf(s.Kind); path != "" && spec != nil && spec.Committed != nil {
			out = append(out, rundir.Output{Stage: s.ID, Kind: s.Kind, Path: path})
		}
	}
	return out
}

// ---- rows ----

type rowReport struct {
	ID           string            `json:"id"`
	FinishReason string            `json:"finish_reason,omitempty"`
	Reject       *record.Rejection `json:"reject,omitempty"`
	Failure      *record.Failure   `json:"failure,omitempty"`
	LastUser     string            `json:"last_user,omitempty"`
	// Tools are the declared tools' names; ToolSteps the calls and
	// results after the last user message, then the completion's calls.
	Tools      []string          `json:"tools,omitempty"`
	ToolSteps  []record.ToolStep `json:"tool_steps,omitempty"`
	Answer     *string           `json:"answer,omitempty"`
	Reasoning  string            `json:"reasoning,omitempty"`
	PromptTok  int               `json:"prompt_tokens,omitempty"`
	CompTok    int               `json:"completion_tokens,omitempty"`
	HasTokens  bool              `json:"has_tokens"`
	NumTokens  int               `json:"num_tokens,omitempty"`
	NumLossTok int               `json:"num_loss_tokens,omitempty"`
	LossSpans  [][2]int          `json:"loss_spans,omitempty"`
	// Unreadable says why a JSONL line shown is not a record.
	Unreadable string `json:"unreadable,omitempty"`
	// Decoded is input_ids as text (with --tokenizer), loss spans in ⟦ ⟧.
	Decoded string `json:"decoded,omitempty"`
	// segments of Decoded, for shortening each in the text output.
	segs []decodedSeg
}

type decodedSeg struct {
	text   string
	masked bool
}

func (ins *inspector) rows(recs []*record.Record) []rowReport {
	out := make([]rowReport, 0, len(recs))
	for _, rec := range recs {
		r := rowReport{ID: rec.ID, Reject: rec.Reject, Failure: rec.Failure}
		for i := len(rec.Messages) - 1; i >= 0; i-- {
			if rec.Messages[i].Role == "user" {
				r.LastUser = rec.Messages[i].Content
				break
			}
		}
		r.Tools, r.ToolSteps = rec.ToolNames(), rec.ToolSteps()
		if c := rec.Completion; c != nil {
			r.FinishReason = c.FinishReason
			a := c.Answer
			r.Answer = &a
			r.Reasoning = c.Reasoning
			r.PromptTok, r.CompTok = c.PromptTokens, c.CompletionTokens
		}
		if t := rec.Tokens; t != nil {
			r.HasTokens = true
			r.NumTokens, r.NumLossTok = t.NumTokens, t.NumLossTokens
			r.LossSpans = lossSpans(t.LossMask)
			if ins.tok != nil {
				r.segs = ins.decode(t.InputIDs, t.LossMask)
				var b strings.Builder
				for _, s := range r.segs {
					if s.masked {
						b.WriteString("⟦" + s.text + "⟧")
					} else {
						b.WriteString(s.text)
					}
				}
				r.Decoded = b.String()
			}
		}
		out = append(out, r)
	}
	return out
}

// lossSpans are the [from, to) index ranges where mask is 1.
func lossSpans(mask record.LossMask) [][2]int {
	var out [][2]int
	start := -1
	for i, m := range mask {
		switch {
		case m != 0 && start < 0:
			start = i
		case m == 0 && start >= 0:
			out = append(out, [2]int{start, i})
			start = -1
		}
	}
	if start >= 0 {
		out = append(out, [2]int{start, len(mask)})
	}
	return out
}

// decode turns ids into runs of text that are trained on (mask 1) or not.
func (ins *inspector) decode(ids []int32, mask record.LossMask) []decodedSeg {
	var segs []decodedSeg
	buf := make([]int, 0, len(ids))
	cur := false
	flush := func() {
		if len(buf) > 0 {
			segs = append(segs, decodedSeg{text: strings.ToValidUTF8(ins.tok.Decode(buf), "\uFFFD"), masked: cur})
			buf = buf[:0]
		}
	}
	for i, id := range ids {
		m := i < len(mask) && mask[i] != 0
		if m != cur {
			flush()
			cur = m
		}
		buf = append(buf, int(id))
	}
	flush()
	return segs
}

// ---- text output ----

const (
	fieldChars     = 200 // a message or answer, shortened in the middle
	reasoningChars = 120
	segmentChars   = 240 // each masked / unmasked run of decoded text
)

func (d *inspectDoc) print(w io.Writer) {
	bw := bufio.NewWriter(w)
	defer bw.Flush()
	switch {
	case d.Shard != nil:
		printShard(bw, d.Shard, true)
	case d.Dir != nil:
		printDir(bw, d.Dir)
	case d.JSONL != nil:
		printJSONL(bw, d.JSONL)
	case d.Run != nil:
		printRun(bw, d.Run)
	case d.Output != nil:
		printOutput(bw, d.Output)
	}
	if len(d.Rows) > 0 {
		from := ""
		if d.RowsFrom != "" {
			from = " of " + d.RowsFrom
		}
		fmt.Fprintf(bw, "\nfirst %s%s:\n", plural(len(d.Rows), "row"), from)
		for i, r := range d.Rows {
			printRow(bw, i+1, &r)
		}
	}
	for _, p := range d.Problems {
		fmt.Fprintf(bw, "PROBLEM: %s\n", p)
	}
}

// plural is "1 shard", "2 shards".
func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	if strings.HasSuffix(what, "ch") {
		return fmt.Sprintf("%d %ses", n, what)
	}
	return fmt.Sprintf("%d %ss", n, what)
}

func kv(w io.Writer, key, format string, args ...any) {
	fmt.Fprintf(w, "%-10s %s\n", key, fmt.Sprintf(format, args...))
}

func printShard(w io.Writer, s *shardReport, head bool) {
	if head {
		kv(w, "shard", "%s", s.Path)
	}
	schema := ""
	if s.Schema != "" {
		schema = ", schema " + s.Schema
	}
	unit := "row group"
	if s.Format == arrowrow.FormatArrow {
		unit = "record batch"
	}
	kv(w, "format", "%s%s, %s, %s", s.Format, schema, plural(s.Groups, unit), numfmt.Bytes(s.Bytes))
	kv(w, "rows", "%d", s.Rows)
	kv(w, "tokens", "%d (trained on %d)", s.Tokens, s.LossTok)
	parts := make([]string, len(s.Columns))
	for i, c := range s.Columns {
		parts[i] = c.Name + " " + c.Type
	}
	kv(w, "columns", "%d", len(s.Columns))
	for _, line := range wrapJoin(parts, ", ", 78) {
		fmt.Fprintf(w, "  %s\n", line)
	}
	if !s.PipeShard {
		fmt.Fprintf(w, "not a pipe shard (no string column %q): rows are not shown\n", arrowrow.ColID)
	}
}

// wrapJoin joins parts with sep into lines of at most width characters.
func wrapJoin(parts []string, sep string, width int) []string {
	var lines []string
	cur := ""
	for i, p := range parts {
		if i < len(parts)-1 {
			p += strings.TrimRight(sep, " ")
		}
		switch {
		case cur == "":
			cur = p
		case len(cur)+1+len(p) > width:
			lines = append(lines, cur)
			cur = p
		default:
			cur += " " + p
		}
	}
	if cur != "" {
		lines = append(lines, cur)
	}
	return lines
}

func printDir(w io.Writer, d *dirReport) {
	if !d.Manifest {
		kv(w, "shards", "%s: no %s, so no shard here is committed", d.Dir, filecommit.ManifestName)
	} else {
		kv(w, "shards", "%s (%s updated %s)", d.Dir, filecommit.ManifestName, d.Updated.UTC().Format(time.RFC3339))
		schema := ""
		if d.Schema != "" {
			schema = ", schema " + d.Schema
		}
		kv(w, "format", "%s%s", d.Format, schema)
		kv(w, "rows", "%d", d.Rows)
		kv(w, "tokens", "%d", d.Tokens)
		kv(w, "bytes", "%d (%s)", d.Bytes, numfmt.Bytes(d.Bytes))
		kv(w, "committed", "%s", plural(len(d.Shards), "shard"))
	}
	nameW := 0
	for _, s := range d.Shards {
		nameW = max(nameW, len(s.Name))
	}
	for _, s := range d.Shards {
		fmt.Fprintf(w, "  %-*s  %8d rows  %10d tokens  %10s  sha256 %s  %s\n",
			nameW, s.Name, s.Rows, s.Tokens, numfmt.Bytes(s.Bytes), short(s.SHA256), s.Status)
	}
	for _, n := range d.NotCommitted {
		fmt.Fprintf(w, "  %s  not committed (not in %s; a writer that resumes here removes it)\n", n, filecommit.ManifestName)
	}
	for _, n := range d.Temporary {
		fmt.Fprintf(w, "  %s  being written (or left by a writer that stopped)\n", n)
	}
	if d.Manifest {
		bad := 0
		for _, s := range d.Shards {
			if s.Status != "ok" {
				bad++
			}
		}
		what := "present with the manifest's sizes (sha256 not checked; --verify reads them)"
		if d.Verified {
			what = "present with the manifest's sizes and sha256"
		}
		if bad == 0 {
			kv(w, "verified", "%s %s", plural(len(d.Shards), "shard"), what)
		} else {
			kv(w, "verified", "%d of %s FAILED", bad, plural(len(d.Shards), "shard"))
		}
	}
	if d.First != nil {
		fmt.Fprintln(w)
		printShard(w, d.First, true)
	}
}

func printJSONL(w io.Writer, j *jsonlReport) {
	what := "jsonl"
	if j.Journal {
		what = "journal"
	}
	kv(w, what, "%s (%s)", j.Path, numfmt.Bytes(j.Bytes))
	kv(w, "lines", "%d", j.Lines)
	if j.Committed != nil {
		note := ""
		if *j.Committed < j.Lines {
			note = fmt.Sprintf("; %d line(s) past the last commit are cut when the file is next opened for writing", j.Lines-*j.Committed)
		}
		kv(w, "committed", "%d (from %s)%s", *j.Committed, filepath.Base(j.Index), note)
	} else {
		kv(w, "committed", "unknown: no commit index %s (not written by pipe's commit log)", filepath.Base(commitlog.IndexPath(j.Path)))
	}
	if j.WithTok > 0 {
		kv(w, "tokens", "%d in %d row(s) (trained on %d)", j.Tokens, j.WithTok, j.LossTok)
	}
	printTally(w, "rejected", j.Rejected)
	printTally(w, "failed", j.Failed)
}

// printTally prints per stage "rejected by STAGE: reason N, reason N", or
// for failures, whose errors are phrases, one "N  error" line each.
func printTally(w io.Writer, what string, t []tally) {
	for i := 0; i < len(t); {
		j := i
		var parts []string
		var sum int64
		for ; j < len(t) && t[j].Stage == t[i].Stage; j++ {
			parts = append(parts, fmt.Sprintf("%s %d", t[j].Reason, t[j].Count))
			sum += t[j].Count
		}
		by := ""
		if t[i].Stage != "" {
			by = " by " + t[i].Stage
		}
		if what == "failed" {
			fmt.Fprintf(w, "%s%s: %d\n", what, by, sum)
			for _, x := range t[i:j] {
				fmt.Fprintf(w, "  %6d  %s\n", x.Count, x.Reason)
			}
		} else {
			all := ""
			if len(parts) > 1 {
				all = fmt.Sprintf(" (%d in all)", sum)
			}
			fmt.Fprintf(w, "%s%s: %s%s\n", what, by, strings.Join(parts, ", "), all)
		}
		i = j
	}
}

// committedText says what the output holds, in its kind's unit.
func (o *outputReport) committedText() string {
	switch {
	case !o.Exists:
		return "not found"
	case o.Unit == "":
		return "nothing committed"
	case o.Unit != "lines":
		return fmt.Sprintf("%d rows, %d tokens in %s, %s", o.Rows, o.Tokens, plural(o.Files, strings.TrimSuffix(o.Unit, "s")), numfmt.Bytes(o.Bytes))
	}
	return fmt.Sprintf("%d committed, %s", o.Rows, numfmt.Bytes(o.Bytes))
}

func printOutput(w io.Writer, o *outputReport) {
	kv(w, "output", "%s (%s)", o.Path, o.Kind)
	if o.Format != "" {
		kv(w, "format", "%s", o.Format)
	}
	kv(w, "committed", "%s", o.committedText())
}

func printRun(w io.Writer, r *runReport) {
	kv(w, "run dir", "%s", r.Dir)
	if r.Pipeline != "" {
		kv(w, "pipeline", "%s", r.Pipeline)
		kv(w, "created", "%s", r.Created.UTC().Format(time.RFC3339))
	} else {
		kv(w, "pipeline", "unknown (no %s)", rundir.RunFile)
	}
	if n := len(r.Starts); n > 0 {
		last := r.Starts[n-1]
		kv(w, "starts", "%d, last %s: %s", n, last.At.UTC().Format(time.RFC3339), strings.Join(last.Command, " "))
	}
	if r.State != "" {
		kv(w, "state", "%s (status.json updated %s)", r.State, r.Updated)
	} else {
		kv(w, "state", "unknown (no status.json)")
	}
	if r.Error != "" {
		kv(w, "error", "%s", firstRunes(strings.ReplaceAll(r.Error, "\n", " "), 300))
	}
	printRunLock(w, r.Lock)
	unfinished := ""
	if r.Unfinished != nil && *r.Unfinished > 0 {
		unfinished = fmt.Sprintf("; %d unfinished in the last run", *r.Unfinished)
	}
	kv(w, "finished", "%d ids (done.ids)%s", r.Finished, unfinished)
	printRunStages(w, r)
	printRunFiles(w, r)
	if r.Log != "" {
		kv(w, "log", "%s", r.Log)
	}
}

// printRunLock says who holds the run directory's lock, if anyone.
func printRunLock(w io.Writer, l *lockReport) {
	if l != nil {
		switch {
		case !l.Released.IsZero():
			kv(w, "lock", "free (pid %d on %s released it %s)", l.PID, l.Host, l.Released.UTC().Format(time.RFC3339))
		case l.Alive != nil && *l.Alive:
			kv(w, "lock", "held by pid %d on %s since %s: running", l.PID, l.Host, l.Started.UTC().Format(time.RFC3339))
		case l.Alive != nil:
			kv(w, "lock", "pid %d on %s (since %s) is gone without releasing it: killed or crashed; run again to resume", l.PID, l.Host, l.Started.UTC().Format(time.RFC3339))
		default:
			kv(w, "lock", "pid %d on %s since %s, not released (another host: not checked)", l.PID, l.Host, l.Started.UTC().Format(time.RFC3339))
		}
	}
}

// printRunStages writes the last run's counts per stage (status.json).
func printRunStages(w io.Writer, r *runReport) {
	if len(r.Stages) > 0 {
		fmt.Fprintln(w, "last run (status.json):")
		idW, kindW := len("stage"), len("kind")
		for _, s := range r.Stages {
			idW, kindW = max(idW, len(s.ID)), max(kindW, len(s.Kind))
		}
		fmt.Fprintf(w, "  %-*s  %-*s  %9s  %9s  %9s  %9s  %9s\n", idW, "stage", kindW, "kind", "in", "out", "rejected", "failed", "skipped")
		for _, s := range r.Stages {
			fmt.Fprintf(w, "  %-*s  %-*s  %9d  %9d  %9d  %9d  %9d\n", idW, s.ID, kindW, s.Kind, s.In, s.Out, s.Rejected, s.Failed, s.Skipped)
		}
	}
}

// printRunFiles writes the run's journal, rejected/ and failed/ files and
// outputs.
func printRunFiles(w io.Writer, r *runReport) {
	if len(r.Journal) > 0 {
		fmt.Fprintln(w, "journal:")
		for _, j := range r.Journal {
			fmt.Fprintf(w, "  %s: %d entries, %s\n", j.Stage, j.Committed, numfmt.Bytes(j.Bytes))
		}
	}
	for _, class := range []struct {
		name  string
		files []*jsonlReport
	}{{"rejected", r.Rejected}, {"failed", r.Failed}} {
		if len(class.files) == 0 {
			continue
		}
		fmt.Fprintf(w, "%s/:\n", class.name)
		for _, f := range class.files {
			committed := "no index"
			if f.Committed != nil {
				committed = fmt.Sprintf("%d committed", *f.Committed)
			}
			fmt.Fprintf(w, "  %s: %s, %s, %s\n", filepath.Base(f.Path), plural(int(f.Lines), "line"), committed, numfmt.Bytes(f.Bytes))
			t := f.Rejected
			if class.name == "failed" {
				t = f.Failed
			}
			for _, x := range t {
				fmt.Fprintf(w, "    %6d  %s\n", x.Count, x.Reason)
			}
		}
	}
	if len(r.Outputs) > 0 {
		fmt.Fprintln(w, "outputs:")
		for _, o := range r.Outputs {
			fmt.Fprintf(w, "  %s (%s): %s: %s\n", o.Stage, o.Kind, o.Path, o.committedText())
		}
	}
}

func printRow(w io.Writer, n int, r *rowReport) {
	field := func(k, v string) { fmt.Fprintf(w, "  %-9s %s\n", k, v) }
	if r.Unreadable != "" {
		fmt.Fprintf(w, "\n#%d\n", n)
		field("unreadable", readable(r.Unreadable, fieldChars))
		return
	}
	fmt.Fprintf(w, "\n#%d  id %s\n", n, r.ID)
	if r.Answer != nil {
		field("finish", r.FinishReason)
	}
	if r.Reject != nil {
		v := r.Reject.Reason
		if r.Reject.Stage != "" {
			v = r.Reject.Stage + ": " + v
		}
		if r.Reject.Detail != "" {
			v += " (" + readable(r.Reject.Detail, 120) + ")"
		}
		field("rejected", v)
	}
	if r.Failure != nil {
		field("failed", r.Failure.Stage+": "+readable(r.Failure.Error, 160))
	}
	if r.LastUser != "" {
		field("user", readable(r.LastUser, fieldChars))
	}
	if len(r.Tools) > 0 {
		field("tools", readable(strings.Join(r.Tools, ", "), fieldChars))
	}
	for _, s := range r.ToolSteps {
		if s.Call {
			k := "call"
			if s.Reply {
				k = "calls" // the reply's own
			}
			field(k, readable(s.Name, 80)+" "+readable(s.Text, fieldChars))
		} else if s.Name != "" {
			field("result", readable(s.Name, 80)+": "+readable(s.Text, fieldChars))
		} else {
			field("result", readable(s.Text, fieldChars))
		}
	}
	if r.Answer != nil {
		field("answer", orEmpty(readable(*r.Answer, fieldChars)))
		field("reasoning", orEmpty(readable(r.Reasoning, reasoningChars)))
		field("generated", fmt.Sprintf("%d tokens, prompt %d tokens", r.CompTok, r.PromptTok))
	}
	if r.HasTokens {
		field("tokens", fmt.Sprintf("num_tokens %d, num_loss_tokens %d", r.NumTokens, r.NumLossTok))
		if r.segs == nil {
			spans := make([]string, len(r.LossSpans))
			for i, s := range r.LossSpans {
				spans[i] = fmt.Sprintf("[%d,%d)", s[0], s[1])
			}
			field("trained", strings.Join(spans, " ")+"  (token indexes with loss_mask 1; --tokenizer DIR shows the text)")
		} else {
			var b strings.Builder
			for _, s := range r.segs {
				t := readable(s.text, segmentChars)
				if s.masked {
					t = "⟦" + t + "⟧"
				}
				b.WriteString(t)
			}
			field("text", b.String())
		}
	}
}

func orEmpty(s string) string {
	if s == "" {
		return "(empty)"
	}
	return s
}

// readable shortens s in the middle to about n characters and shows
// control characters as escapes, so a row stays on one line.
func readable(s string, n int) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	r := []rune(s)
	if len(r) <= n {
		return termsafe.Line(s)
	}
	h := n / 2
	return termsafe.Line(string(r[:h])) + fmt.Sprintf(" …[%d chars]… ", len(r)-2*h) + termsafe.Line(string(r[len(r)-h:]))
}

// hasManifest reports whether dir has a manifest, under either name.
func hasManifest(dir string) bool {
	_, ok := filecommit.ManifestPath(dir)
	return ok
}
