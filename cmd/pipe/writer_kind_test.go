package main

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
	"sync"
	"testing"

	"github.com/pipe-dev/pipe/pipeline"
	"github.com/pipe-dev/pipe/pipeline/commitlog"
	"github.com/pipe-dev/pipe/pipeline/output"
	"github.com/pipe-dev/pipe/pipeline/record"
	"github.com/pipe-dev/pipe/pipeline/shardruns"
)

// A writer kind is one file: write-tsv below is a whole writer (id, prompt,
// answer per line, committed by a sidecar PATH.committed naming the rows
// and bytes) with its Spec's Output and Verify, registered from this test
// alone. pipe inspect, merge, verify, export and run --from (replay) then
// handle its outputs with no other file knowing it: issue 23's "a new
// writer kind needs one new file plus its test".
func TestNewWriterKindNeedsNoOtherFile(t *testing.T) {
	registerTSV()
	dir := t.TempDir()
	var prompts strings.Builder
	const n = 16
	for i := range n {
		fmt.Fprintf(&prompts, `{"id":"p%02d","prompt":"Question %d\twith a tab"}`+"\n", i, i)
	}
	writeFile(t, filepath.Join(dir, "p.jsonl"), prompts.String())
	writeFile(t, filepath.Join(dir, "tsv.toml"), `[pipeline]
name    = "tsv"
run_dir = "runs/tsv"

[[stage]]
id   = "prompts"
kind = "read-prompts"
path = "p.jsonl"

[[stage]]
id                = "gen"
kind              = "generate"
input             = "prompts"
servers           = ["sim:1?speed=5000&think_mean=20&answer_mean=20"]
api               = "chat"
max_output_tokens = 1024

[[stage]]
id    = "rows"
kind  = "write-tsv"
input = "gen"
path  = "out/rows.tsv"
`)
	t.Chdir(dir)
	pipe := func(want int, args ...string) string {
		t.Helper()
		var out, errb bytes.Buffer
		if code := run(args, &stdio{Out: &out, Err: &errb, Signals: make(chan os.Signal)}); code != want {
			t.Fatalf("pipe %s: exit %d, want %d\n%s%s", strings.Join(args, " "), code, want, out.String(), errb.String())
		}
		return out.String() + errb.String()
	}
	pipe(0, "run", "--shard", "0/2", "tsv.toml")
	pipe(0, "run", "--shard", "1/2", "tsv.toml")
	shard := func(i int) string { return filepath.Join("runs", "tsv", fmt.Sprintf("shard-%04d-of-0002", i)) }
	rowsIn := func(i int) int64 {
		c, err := tsvCommitted(filepath.Join(dir, "out", fmt.Sprintf("shard-%04d-of-0002", i), "rows.tsv"))
		if err != nil || c == nil {
			t.Fatalf("shard %d: %v, %v", i, c, err)
		}
		return c.Rows
	}
	r0, r1 := rowsIn(0), rowsIn(1)
	if r0+r1 != n || r0 == 0 || r1 == 0 {
		t.Fatalf("the shards' TSV files hold %d and %d rows, want %d in all", r0, r1, n)
	}

	// inspect RUN_DIR: the output, with the rows, bytes and unit its kind says.
	var doc inspectDoc
	if err := json.Unmarshal([]byte(pipe(0, "inspect", "--json", shard(0))), &doc); err != nil {
		t.Fatal(err)
	}
	if doc.Run == nil || len(doc.Run.Outputs) != 1 {
		t.Fatalf("inspect: outputs %+v, want the write-tsv one", doc.Run)
	}
	if o := doc.Run.Outputs[0]; o.Stage != "rows" || o.Kind != "write-tsv" || !o.Exists || o.Rows != r0 || o.Format != "tsv" || o.Unit != "lines" || o.Bytes == 0 {
		t.Errorf("inspect: output %+v, want stage rows (write-tsv), %d rows in tsv lines", o, r0)
	}
	if text := pipe(0, "inspect", shard(0)); !strings.Contains(text, fmt.Sprintf("rows (write-tsv): %s: %d committed", filepath.Join(dir, "out", "shard-0000-of-0002", "rows.tsv"), r0)) {
		t.Errorf("inspect shows no committed rows of write-tsv:\n%s", text)
	}

	// report RUN_DIR: its rows counted and sampled, read through its Spec
	// (Each), with their answers' lengths.
	var rep struct {
		Samples []struct {
			ID     string `json:"id"`
			Output string `json:"output"`
			Answer string `json:"answer"`
		} `json:"samples"`
		Outputs []struct {
			Stage string `json:"stage"`
			Kind  string `json:"kind"`
			Rows  int64  `json:"rows"`
			Dists []struct {
				Name string `json:"name"`
			} `json:"distributions"`
		} `json:"outputs"`
		Notes []string `json:"notes"`
	}
	var repOut, repErr bytes.Buffer
	if code := run([]string{"report", "--json", shard(0)}, &stdio{Out: &repOut, Err: &repErr, Signals: make(chan os.Signal)}); code != 0 {
		t.Fatalf("pipe report: exit %d\n%s", code, repErr.String())
	}
	if err := json.Unmarshal(repOut.Bytes(), &rep); err != nil {
		t.Fatalf("pipe report --json: %v\n%s", err, repOut.String())
	}
	if len(rep.Outputs) != 1 || rep.Outputs[0].Stage != "rows" || rep.Outputs[0].Kind != "write-tsv" || rep.Outputs[0].Rows != r0 {
		t.Errorf("report: outputs %+v, notes %q; want write-tsv's %d rows", rep.Outputs, rep.Notes, r0)
	}
	sampled := 0
	for _, x := range rep.Samples {
		if x.Output == "rows" && x.ID != "" && x.Answer != "" {
			sampled++
		}
	}
	if sampled == 0 {
		t.Errorf("report: no samples of write-tsv's rows (samples %+v, notes %q)", rep.Samples, rep.Notes)
	}

	// inspect PATH: the kind claims its file, and reads its first rows.
	doc = inspectDoc{}
	if err := json.Unmarshal([]byte(pipe(0, "inspect", "--json", "--rows", "2", filepath.Join("out", "shard-0000-of-0002", "rows.tsv"))), &doc); err != nil {
		t.Fatal(err)
	}
	if o := doc.Output; doc.Kind != "output" || o == nil || o.Kind != "write-tsv" || o.Rows != r0 || len(doc.Rows) != 2 || doc.Rows[0].Answer == nil || *doc.Rows[0].Answer == "" || !strings.Contains(doc.Rows[0].LastUser, "\twith a tab") {
		t.Errorf("inspect of the TSV file: %+v, %+v, rows %+v", doc, o, doc.Rows)
	}

	// merge: every file of both shards, with its rows; ids compared.
	pipe(0, "merge", "--out", "merged", shard(0), shard(1))
	var m shardruns.Merged
	data, err := os.ReadFile(filepath.Join("merged", shardruns.MergedName))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	if !m.Complete || len(m.Outputs) != 1 || m.Outputs[0].Kind != "write-tsv" || m.Outputs[0].Format != "tsv" || m.Outputs[0].Rows != n || len(m.Outputs[0].Files) != 2 {
		t.Fatalf("merged.json: %s", data)
	}

	// export: the rows back as records, through the kind's row iterator.
	pipe(0, "export", "--layout", "conversations", "conv.jsonl", shard(0), shard(1))
	lines := readLines(t, "conv.jsonl")
	if len(lines) != n {
		t.Fatalf("export wrote %d rows, want %d", len(lines), n)
	}
	var row struct {
		ID            string `json:"id"`
		Conversations []struct{ Role, Content string }
	}
	if err := json.Unmarshal([]byte(lines[0]), &row); err != nil {
		t.Fatal(err)
	}
	if len(row.Conversations) != 2 || !strings.Contains(row.Conversations[0].Content, "\twith a tab") || row.Conversations[1].Role != "assistant" || row.Conversations[1].Content == "" {
		t.Errorf("exported row %s: want the prompt (its tab kept) and the answer", lines[0])
	}

	// replay (--from): without gen's journal (segments are swept once
	// every output committed them; here it is moved aside), what gen made
	// is read back from the writer it fed alone, by the kind's own
	// reader, and written again without a server.
	if err := os.Rename(filepath.Join(shard(0), "journal"), "journal-aside"); err != nil {
		t.Fatal(err)
	}
	replay := []string{"run", "--shard", "0/2", "--from", "gen=" + shard(0), "tsv.toml"}
	if out := pipe(0, append([]string{"run", "--dry-run"}, replay[1:]...)...); !strings.Contains(out, "rows.tsv (written by rows)") {
		t.Errorf("the replay does not read the write-tsv output:\n%s", out)
	}
	out := pipe(0, replay...)
	again := filepath.Join(shard(0)+"-from-gen", "out", "rows.tsv")
	if c, err := tsvCommitted(again); err != nil || c == nil || c.Rows != r0 {
		t.Fatalf("the replay's %s: %+v, %v; want the %d rows of shard 0 again\n%s", again, c, err, r0, out)
	}
	if a, b := readLines(t, again), readLines(t, filepath.Join("out", "shard-0000-of-0002", "rows.tsv")); strings.Join(a, "\n") != strings.Join(b, "\n") {
		t.Errorf("the replay wrote other rows than the run:\n%s\nwant\n%s", strings.Join(a, "\n"), strings.Join(b, "\n"))
	}

	// verify: its own check, ok; then a file cut short is named.
	if out := pipe(0, "verify", shard(0)); !strings.Contains(out, "ok: ") || !strings.Contains(out, fmt.Sprintf("%d lines", r0)) {
		t.Errorf("verify:\n%s", out)
	}
	tsv := filepath.Join("out", "shard-0001-of-0002", "rows.tsv")
	st, err := os.Stat(tsv)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(tsv, st.Size()-3); err != nil {
		t.Fatal(err)
	}
	if out := pipe(1, "verify", shard(1)); !strings.Contains(out, "NOT OK") || !strings.Contains(out, "rows.tsv is "+fmt.Sprint(st.Size()-3)+" bytes") {
		t.Errorf("verify of a cut file:\n%s", out)
	}

	// merge reads the ids: shard 1's output replaced by shard 0's holds
	// ids of shard 0, which it refuses.
	for _, name := range []string{"rows.tsv", "rows.tsv.committed"} {
		b, err := os.ReadFile(filepath.Join("out", "shard-0000-of-0002", name))
		if err != nil {
			t.Fatal(err)
		}
		writeFile(t, filepath.Join("out", "shard-0001-of-0002", name), string(b))
	}
	if out := pipe(1, "merge", "--out", "merged2", shard(0), shard(1)); !strings.Contains(out, fmt.Sprintf("stage rows: %d ids are in two shards", r0)) {
		t.Errorf("merge of shards with the same ids:\n%s", out)
	}
}

func readLines(t *testing.T, path string) []string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
}

// ---- write-tsv: a whole writer kind, as a stage file would hold it ----

var tsvOnce sync.Once

func registerTSV() {
	tsvOnce.Do(func() {
		pipeline.Register(pipeline.Spec{
			Kind:    "write-tsv",
			Summary: "write id, prompt and answer as tab-separated lines (a test's writer)",
			Verify:  pipeline.VerifyFor(verifyTSV),
			Output: &output.Spec{
				Committed: tsvCommitted,
				IDs: func(path string) ([]uint64, error) {
					var ids []uint64
					err := eachTSVLine(path, func(f []string) error { ids = append(ids, commitlog.Hash(f[0])); return nil })
					return ids, err
				},
				Each: func(ctx context.Context, path string, fn func(*record.Record) error) error {
					return eachTSVLine(path, func(f []string) error {
						if err := ctx.Err(); err != nil {
							return err
						}
						return fn(&record.Record{ID: f[0], Messages: []record.Message{{Role: "user", Content: f[1]}}, Completion: &record.Completion{Answer: f[2]}})
					})
				},
				Claims: func(path string) bool { return filepath.Ext(path) == ".tsv" },
			},
			New: pipeline.NewProcessor(func(c *tsvConfig) (pipeline.Processor, error) { return &tsvWriter{cfg: *c}, nil }),
		})
	})
}

type tsvConfig struct {
	Path string `toml:"path" required:"true" path:"out" doc:"the TSV file"`
}

// tsvState is PATH.committed: the rows and bytes from the file's start
// that are committed (written and fsynced before it was replaced).
type tsvState struct {
	Rows  int64 `json:"rows"`
	Bytes int64 `json:"bytes"`
}

type tsvWriter struct {
	cfg     tsvConfig
	f       *os.File
	state   tsvState
	pending bytes.Buffer
	rows    int64 // in pending
}

var tsvEscape = strings.NewReplacer(`\`, `\\`, "\t", `\t`, "\n", `\n`)
var tsvUnescape = strings.NewReplacer(`\\`, `\`, `\t`, "\t", `\n`, "\n")

func (w *tsvWriter) Open(context.Context, *pipeline.Env) error {
	if err := os.MkdirAll(filepath.Dir(w.cfg.Path), 0o755); err != nil {
		return err
	}
	if c, err := tsvCommitted(w.cfg.Path); err != nil {
		return err
	} else if c != nil {
		w.state = tsvState{c.Rows, c.Bytes}
	}
	f, err := os.OpenFile(w.cfg.Path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	// What a killed run wrote past its last commit is not ours.
	if err := f.Truncate(w.state.Bytes); err != nil {
		f.Close()
		return err
	}
	if _, err := f.Seek(w.state.Bytes, io.SeekStart); err != nil {
		f.Close()
		return err
	}
	w.f = f
	return nil
}

func (w *tsvWriter) Process(_ context.Context, rec *record.Record, _ pipeline.Emitter) error {
	prompt, answer := "", ""
	if len(rec.Messages) > 0 {
		prompt = rec.Messages[len(rec.Messages)-1].Content
	}
	if rec.Completion != nil {
		answer = rec.Completion.Answer
	}
	fmt.Fprintf(&w.pending, "%s\t%s\t%s\n", tsvEscape.Replace(rec.ID), tsvEscape.Replace(prompt), tsvEscape.Replace(answer))
	w.rows++
	return nil
}

func (w *tsvWriter) Commit(context.Context, pipeline.Emitter) error {
	if w.rows == 0 {
		return nil
	}
	n, err := w.f.Write(w.pending.Bytes())
	if err == nil {
		err = w.f.Sync()
	}
	if err != nil {
		return err
	}
	next := tsvState{w.state.Rows + w.rows, w.state.Bytes + int64(n)}
	b, _ := json.Marshal(next)
	if err := commitlog.WriteFileAtomic(w.cfg.Path+".committed", b); err != nil {
		return err
	}
	w.state, w.rows = next, 0
	w.pending.Reset()
	return nil
}

func (w *tsvWriter) Close() error { return w.f.Close() }

func (w *tsvWriter) CommittedRows() int64 { return w.state.Rows }

func tsvCommitted(path string) (*output.Committed, error) {
	b, err := os.ReadFile(path + ".committed")
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var s tsvState
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("%s.committed: %v", path, err)
	}
	return &output.Committed{Format: "tsv", Unit: "lines", Rows: s.Rows, Bytes: s.Bytes,
		Files: []output.File{{Path: path, Rows: s.Rows, Bytes: s.Bytes}}}, nil
}

// eachTSVLine calls fn with the fields of each committed line, one line
// in memory at a time.
func eachTSVLine(path string, fn func([]string) error) error {
	c, err := tsvCommitted(path)
	if err != nil || c == nil {
		return err
	}
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	r := bufio.NewReader(io.LimitReader(f, c.Bytes))
	for n := 1; ; n++ {
		line, err := r.ReadString('\n')
		if err == io.EOF && line == "" {
			return nil
		}
		if err != nil {
			return fmt.Errorf("%s:%d: %v (the file is shorter than its %d committed bytes)", path, n, err, c.Bytes)
		}
		fields := strings.Split(strings.TrimSuffix(line, "\n"), "\t")
		if len(fields) != 3 {
			return fmt.Errorf("%s:%d: %d fields, want id, prompt and answer", path, n, len(fields))
		}
		for i := range fields {
			fields[i] = tsvUnescape.Replace(fields[i])
		}
		if err := fn(fields); err != nil {
			return err
		}
	}
}

func verifyTSV(_ context.Context, c *tsvConfig, _ *output.VerifyEnv) (*output.Verified, error) {
	path := c.Path
	v := &output.Verified{Where: pipeline.DisplayPath(path), Unit: "lines", How: "size, lines"}
	com, err := tsvCommitted(path)
	if err != nil {
		return nil, err
	}
	if com == nil {
		v.Problems = append(v.Problems, v.Where+": nothing committed")
		return v, nil
	}
	v.Items, v.Bytes = int(com.Rows), com.Bytes
	st, err := os.Stat(path)
	switch {
	case err != nil:
		v.Problems = append(v.Problems, err.Error())
	case st.Size() < com.Bytes:
		v.Problems = append(v.Problems, fmt.Sprintf("%s is %d bytes, %d committed", v.Where, st.Size(), com.Bytes))
	default:
		var rows int64
		if err := eachTSVLine(path, func([]string) error { rows++; return nil }); err != nil {
			v.Problems = append(v.Problems, err.Error())
		} else if rows != com.Rows {
			v.Problems = append(v.Problems, fmt.Sprintf("%s holds %d committed lines, %d recorded", v.Where, rows, com.Rows))
		}
	}
	return v, nil
}
