// Package runfile declares RUN_DIR/run.json: the settings that define a
// run's data, where it writes, its shard and every start. Package rundir
// writes and checks it (and re-exports these names); this package imports
// nothing of pipe's but commitlog, so package pipeline reads it too (a
// replay's --from finds the original run's outputs here).
package runfile

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/pipe-dev/pipe/pipeline/commitlog"
	"github.com/pipe-dev/pipe/pipeline/rundir/layout"
)

// Name is run.json's name inside the run directory.
const Name = layout.Run

// Run is RUN_DIR/run.json: the settings that define the run's data and every
// start of it.
type Run struct {
	// Pipeline is the absolute path of the pipeline file that created the run.
	Pipeline string    `json:"pipeline"`
	Created  time.Time `json:"created"`
	// Settings are as rundir.Settings returns them (after a JSON round
	// trip when read back; numbers are json.Number).
	Settings map[string]any `json:"settings"`
	// Shard is the part of the input the run takes; nil for the whole.
	// It is fixed for the run's life: see rundir.ShardChangedError.
	Shard *ShardSpec `json:"shard,omitempty"`
	// Outputs are where the run writes, as of its last start (an upload's
	// prefix may change on resume): what pipe merge joins.
	Outputs []Output `json:"outputs,omitempty"`
	// Trainer is the pipeline file's [trainer] as of the run's last start;
	// nil when it has none.
	Trainer *Trainer `json:"trainer,omitempty"`
	// Sampling is, per generation stage, every sampling field its
	// requests carry and where each value came from (the stage, the
	// model's generation_config.json, the server's default), as of the
	// run's last start; absent where the servers fill what the stage
	// leaves out.
	Sampling map[string]map[string]any `json:"sampling,omitempty"`
	History  []Start                   `json:"history"`
	// Recovered, when Read found run.json damaged and read its copy,
	// says so (a warning to show); it is not written.
	Recovered string `json:"-"`
}

// Trainer is [trainer] as run.json records it: what the report and pipe
// export judge the run's rows by.
type Trainer struct {
	Name         string `json:"name"`
	Method       string `json:"method"`
	MaxLength    int    `json:"max_length"`
	ChatTemplate string `json:"chat_template,omitempty"`
}

// Output is one place a run writes to.
type Output struct {
	Stage string `json:"stage"`
	Kind  string `json:"kind"`
	// Path is the output file or directory (absolute), or an s3:// prefix.
	Path string `json:"path"`
	// From are the stages an upload takes shards from (their ids).
	From []string `json:"from,omitempty"`
}

// ShardSpec is a run's shard as run.json records it.
type ShardSpec struct {
	Index int    `json:"index"`
	Count int    `json:"count"`
	Hash  string `json:"hash"` // pipefile.ShardHash
}

func (s *ShardSpec) String() string {
	if s == nil {
		return "the whole input (not sharded)"
	}
	return fmt.Sprintf("shard %d/%d", s.Index, s.Count)
}

// Start is one `pipe run` of the run directory.
type Start struct {
	At      time.Time `json:"at"`
	PID     int       `json:"pid"`
	Command []string  `json:"command"`
	// ForcedNewConfig lists the differences (as rundir.Compare) accepted
	// with --force-new-config at this start.
	ForcedNewConfig []string `json:"forced_new_config,omitempty"`
}

// Read reads dir/run.json; it returns nil, nil when there is none. A
// run.json that does not parse (a bad sector, a torn page) is read from
// its copy, written with it at every start; the Run then says so in
// Recovered. When neither parses the error says what to do.
func Read(dir string) (*Run, error) {
	path := filepath.Join(dir, Name)
	r, err := decode(path)
	if err == nil || errors.Is(err, os.ErrNotExist) {
		return r, nil
	}
	var de *damagedError
	if !errors.As(err, &de) {
		return nil, fmt.Errorf("run directory: %w", err) // an I/O error: not the file's fault
	}
	copyPath := filepath.Join(dir, layout.RunCopy)
	c, cerr := decode(copyPath)
	if cerr != nil || c == nil {
		return nil, fmt.Errorf("run directory: %s is not a run file (%v), and its copy %s cannot stand in for it (%v): "+
			"restore run.json from a backup, or start over with --fresh (it moves this run aside, nothing is deleted)", path, de.err, copyPath, cmpErr(cerr))
	}
	c.Recovered = fmt.Sprintf("%s was damaged (%v): read its copy %s, written with it at start %d; run.json is written again", path, de.err, copyPath, len(c.History))
	return c, nil
}

func cmpErr(err error) error {
	if err == nil {
		return errors.New("it is missing")
	}
	return err
}

// damagedError is a file that was read but is not a run file.
type damagedError struct{ err error }

func (e *damagedError) Error() string { return e.err.Error() }

// decode reads one run file; a missing one is os.ErrNotExist.
func decode(path string) (*Run, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var r Run
	if err := d.Decode(&r); err != nil {
		return nil, &damagedError{err}
	}
	if _, err := d.Token(); err != io.EOF {
		return nil, &damagedError{errors.New("bytes follow its JSON object")}
	}
	return &r, nil
}

// Write replaces dir/run.json atomically: a temp file written and fsynced,
// renamed over it, then the directory fsynced. dir is created if needed.
func (r *Run) Write(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("run directory: %w", err)
	}
	var buf bytes.Buffer
	e := json.NewEncoder(&buf)
	e.SetEscapeHTML(false) // "<think>" stays readable
	e.SetIndent("", "  ")
	if err := e.Encode(r); err != nil {
		return fmt.Errorf("run directory: encoding %s: %w", Name, err)
	}
	// The copy first: run.json and its copy never both hold a half-done
	// start, and a crash between the two leaves run.json as it was.
	for _, name := range []string{layout.RunCopy, Name} {
		if err := commitlog.WriteFileAtomic(filepath.Join(dir, name), buf.Bytes()); err != nil {
			return fmt.Errorf("run directory: %w", err)
		}
	}
	return nil
}
