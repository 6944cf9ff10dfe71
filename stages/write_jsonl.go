package stages

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/pipe-dev/pipe/pipeline"
)

func init() {
	pipeline.Register(pipeline.Spec{
		Kind:    "write-jsonl",
		Summary: "write records as JSONL, committed atomically at the end of the input",
		Description: `Writes one record per line (id, messages, completion, tokens, reject...)
into a temporary file beside path, then fsyncs and renames it onto path when
the input ends — also when the run is stopped with Ctrl-C, or when another
stage fails, so every record that reached it is kept. An existing file at
path is never lost: it is renamed to PATH.prev-TIME before the new one takes
its place.`,
		Config:    writeJSONLConfig{},
		MaxInputs: 0,
		KeySettings: func(c any) string {
			return pipeline.DisplayPath(c.(*writeJSONLConfig).Path)
		},
		Example: `[[stage]]
id   = "prompts"
kind = "read-prompts"
path = "prompts.jsonl"

[[stage]]
id    = "out"
kind  = "write-jsonl"
input = "prompts"
path  = "out/prompts.jsonl"
`,
		New: func(c any) (pipeline.Stage, error) { return &writeJSONL{cfg: *c.(*writeJSONLConfig)}, nil },
	})
}

type writeJSONLConfig struct {
	// Path is the output file, relative to the pipeline file. Required.
	Path string `toml:"path" required:"true" path:"out" doc:"output file, relative to the pipeline file; its directory is created"`
}

type writeJSONL struct {
	cfg writeJSONLConfig

	mu      sync.Mutex
	tmp     *os.File
	w       *bufio.Writer
	records int64
	bytes   int64
	prev    string // where the previous output was kept, if there was one
}

var (
	_ pipeline.Processor = (*writeJSONL)(nil)
	_ pipeline.Opener    = (*writeJSONL)(nil)
	_ pipeline.Finisher  = (*writeJSONL)(nil)
	_ pipeline.Closer    = (*writeJSONL)(nil)
	_ pipeline.Reporter  = (*writeJSONL)(nil)
)

func (w *writeJSONL) Open(_ context.Context, _ *pipeline.Env) error {
	dir := filepath.Dir(w.cfg.Path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, "."+filepath.Base(w.cfg.Path)+".tmp-*")
	if err != nil {
		return err
	}
	w.tmp, w.w = f, bufio.NewWriterSize(f, 1<<20)
	return nil
}

func (w *writeJSONL) Process(_ context.Context, rec *pipeline.Record, _ pipeline.Emitter) error {
	line, err := json.Marshal(rec)
	if err != nil {
		return fmt.Errorf("encoding record %q: %w", rec.ID, err)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, err := w.w.Write(line); err != nil {
		return err
	}
	if err := w.w.WriteByte('\n'); err != nil {
		return err
	}
	w.records++
	w.bytes += int64(len(line) + 1)
	return nil
}

// Finish commits: flush, fsync, rename onto the target, fsync the directory.
func (w *writeJSONL) Finish(_ context.Context, _ pipeline.Emitter) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	f := w.tmp
	w.tmp = nil
	if err := w.w.Flush(); err != nil {
		f.Close()
		os.Remove(f.Name())
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		os.Remove(f.Name())
		return err
	}
	if err := f.Close(); err != nil {
		os.Remove(f.Name())
		return err
	}
	if err := os.Chmod(f.Name(), 0o644); err != nil { // CreateTemp makes it 0600
		os.Remove(f.Name())
		return err
	}
	if _, err := os.Stat(w.cfg.Path); err == nil {
		// Outputs can hold days of GPU work: keep the previous one.
		prev := w.cfg.Path + ".prev-" + time.Now().UTC().Format("20060102T150405.000")
		if err := os.Rename(w.cfg.Path, prev); err != nil {
			os.Remove(f.Name())
			return fmt.Errorf("keeping the previous %s: %w", w.cfg.Path, err)
		}
		w.prev = prev
	}
	if err := os.Rename(f.Name(), w.cfg.Path); err != nil {
		os.Remove(f.Name())
		return err
	}
	return syncDir(filepath.Dir(w.cfg.Path))
}

// Close removes the temporary file if the output was never committed.
func (w *writeJSONL) Close() error {
	if w.tmp == nil {
		return nil
	}
	w.tmp.Close()
	return os.Remove(w.tmp.Name())
}

func (w *writeJSONL) Report() []pipeline.Stat {
	w.mu.Lock()
	defer w.mu.Unlock()
	stats := []pipeline.Stat{{Name: "written", Value: fmt.Sprintf("%d records, %s to %s", w.records, pipeline.HumanBytes(w.bytes), pipeline.DisplayPath(w.cfg.Path))}}
	if w.prev != "" {
		stats = append(stats, pipeline.Stat{Name: "previous output kept as", Value: pipeline.DisplayPath(w.prev)})
	}
	return stats
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
