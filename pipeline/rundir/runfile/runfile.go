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
	History []Start  `json:"history"`
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

// Read reads dir/run.json; it returns nil, nil when there is none.
func Read(dir string) (*Run, error) {
	path := filepath.Join(dir, Name)
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("run directory: %w", err)
	}
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var r Run
	if err := d.Decode(&r); err != nil {
		return nil, fmt.Errorf("run directory: %s is not a run file: %v", path, err)
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
	if err := commitlog.WriteFileAtomic(filepath.Join(dir, Name), buf.Bytes()); err != nil {
		return fmt.Errorf("run directory: %w", err)
	}
	return nil
}
