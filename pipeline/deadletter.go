package pipeline

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sync"
)

// deadLetters appends records that leave a stage without a connected port —
// rejections with no "rejected" edge, and failures — to
// RUN_DIR/{rejected,failed}/STAGE.jsonl, so no record ends nowhere. Files are
// opened on first use, appended to across runs, and fsynced on Close.
type deadLetters struct {
	dir   string
	mu    sync.Mutex
	files map[string]*dlFile
}

type dlFile struct {
	f *os.File
	w *bufio.Writer
}

func newDeadLetters(runDir string) *deadLetters {
	return &deadLetters{dir: runDir, files: map[string]*dlFile{}}
}

// Path is where records of the given class ("rejected", "failed") from stage go.
func (d *deadLetters) Path(class, stage string) string {
	return filepath.Join(d.dir, class, stage+".jsonl")
}

func (d *deadLetters) write(class, stage string, rec *Record) error {
	line, err := json.Marshal(rec)
	if err != nil {
		return fmt.Errorf("encoding record %q: %w", rec.ID, err)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	p := d.Path(class, stage)
	df := d.files[p]
	if df == nil {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		f, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return err
		}
		df = &dlFile{f: f, w: bufio.NewWriter(f)}
		d.files[p] = df
	}
	df.w.Write(line)
	df.w.WriteByte('\n')
	// Flushed per record: these are rare, and a crash must not lose them.
	return df.w.Flush()
}

// Close flushes, fsyncs and closes every file; it returns the paths written.
func (d *deadLetters) Close() ([]string, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	var paths []string
	var first error
	for p, df := range d.files {
		paths = append(paths, p)
		for _, err := range []error{df.w.Flush(), df.f.Sync(), df.f.Close()} {
			if err != nil && first == nil {
				first = err
			}
		}
	}
	d.files = map[string]*dlFile{}
	return paths, first
}
