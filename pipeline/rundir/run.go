package rundir

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/pipe-dev/pipe/pipeline"
	"github.com/pipe-dev/pipe/pipeline/commitlog"
	"github.com/pipe-dev/pipe/pipeline/pipefile"
)

// RunFile is run.json's name inside the run directory.
const RunFile = "run.json"

// Run is RUN_DIR/run.json: the settings that define the run's data and every
// start of it.
type Run struct {
	// Pipeline is the absolute path of the pipeline file that created the run.
	Pipeline string    `json:"pipeline"`
	Created  time.Time `json:"created"`
	// Settings are as Settings returns them (after a JSON round trip when
	// read back; numbers are json.Number).
	Settings map[string]any `json:"settings"`
	// Shard is the part of the input the run takes; nil for the whole.
	// It is fixed for the run's life: see ShardChangedError.
	Shard *ShardSpec `json:"shard,omitempty"`
	// Outputs are where the run writes, as of its last start (an upload's
	// prefix may change on resume): what pipe merge joins.
	Outputs []Output `json:"outputs,omitempty"`
	History []Start  `json:"history"`
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

// outputs lists where plan writes: its output files and directories, then
// its destination prefixes.
func outputs(plan *pipeline.Plan) []Output {
	var out []Output
	for _, u := range append(plan.Paths(), plan.Prefixes()...) {
		if u.Stage == "" || (u.Mode != "out" && u.Mode != "dir" && u.Mode != "prefix") {
			continue
		}
		o := Output{Stage: u.Stage, Kind: u.Kind, Path: u.Path}
		if u.Mode == "prefix" {
			if s := plan.Lookup(u.Stage); s != nil {
				for _, e := range s.Inputs {
					o.From = append(o.From, e.From.ID())
				}
			}
		}
		out = append(out, o)
	}
	return out
}

// ShardSpec is a run's shard as run.json records it.
type ShardSpec struct {
	Index int    `json:"index"`
	Count int    `json:"count"`
	Hash  string `json:"hash"` // pipefile.ShardHash
}

func shardSpec(s *pipefile.Shard) *ShardSpec {
	if s == nil {
		return nil
	}
	return &ShardSpec{Index: s.Index, Count: s.Count, Hash: pipefile.ShardHash}
}

func (s *ShardSpec) String() string {
	if s == nil {
		return "the whole input (not sharded)"
	}
	return fmt.Sprintf("shard %d/%d", s.Index, s.Count)
}

// ShardChangedError refuses to run a run directory as another shard than
// the one it was created for: the ids it finished belong to that shard, so
// continuing with another split would take some ids twice across shards
// and others never. Not even --force-new-config continues it.
type ShardChangedError struct {
	Dir      string
	Was, Now *ShardSpec
}

func (e *ShardChangedError) Error() string {
	return fmt.Sprintf("the run in %s is %s of its input (%s), this run would be %s: the shards of an existing run cannot change; start it in another run directory, or with --fresh",
		e.Dir, e.Was, RunFile, e.Now)
}

// Start is one `pipe run` of the run directory.
type Start struct {
	At      time.Time `json:"at"`
	PID     int       `json:"pid"`
	Command []string  `json:"command"`
	// ForcedNewConfig lists the differences (as Compare) accepted with
	// --force-new-config at this start.
	ForcedNewConfig []string `json:"forced_new_config,omitempty"`
}

// ReadRun reads dir/run.json; it returns nil, nil when there is none.
func ReadRun(dir string) (*Run, error) {
	path := filepath.Join(dir, RunFile)
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
		return fmt.Errorf("run directory: encoding %s: %w", RunFile, err)
	}
	if err := commitlog.WriteFileAtomic(filepath.Join(dir, RunFile), buf.Bytes()); err != nil {
		return fmt.Errorf("run directory: %w", err)
	}
	return nil
}

// ConfigChangedError refuses a resume whose settings differ from those the
// run directory recorded.
type ConfigChangedError struct {
	Dir   string
	Diffs []string // as Compare
}

func (e *ConfigChangedError) Error() string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "the pipeline's settings differ from those of the run in %s (%s):\n", e.Dir, RunFile)
	for _, d := range e.Diffs {
		sb.WriteString("  " + d + "\n")
	}
	sb.WriteString("refusing to resume with different settings; use --force-new-config to continue anyway (recorded in run.json), or --fresh to start over")
	return sb.String()
}

// Check records a start of plan in run directory dir (which the caller has
// locked). With no run.json it starts a new run: run.json is written with the
// plan's Settings. With one whose settings are the plan's, the start is
// appended. With other settings it returns the differences (as Compare) and
// a *ConfigChangedError, writing nothing, unless force: then the start
// records the differences, the settings become the plan's, and diffs are
// returned with a nil error. command is the command line to record (e.g.
// os.Args). The Run returned is run.json as now written (as read, on a
// refusal).
func Check(dir string, plan *pipeline.Plan, force bool, command []string) (*Run, []string, error) {
	settings := normalizeMap(Settings(plan))
	start := Start{At: time.Now().UTC(), PID: os.Getpid(), Command: command}
	r, err := ReadRun(dir)
	if err != nil {
		return nil, nil, err
	}
	if r == nil {
		path := plan.File.Path
		if abs, err := filepath.Abs(path); err == nil {
			path = abs
		}
		r = &Run{Pipeline: path, Created: start.At, Settings: settings, Shard: shardSpec(plan.File.Shard), Outputs: outputs(plan), History: []Start{start}}
		if err := r.Write(dir); err != nil {
			return nil, nil, err
		}
		return r, nil, nil
	}
	if now := shardSpec(plan.File.Shard); !sameShard(r.Shard, now) {
		return r, nil, &ShardChangedError{Dir: dir, Was: r.Shard, Now: now}
	}
	diffs := Compare(r.Settings, settings)
	if len(diffs) > 0 && !force && !didWork(dir) {
		// Nothing was finished or generated under the old settings (e.g.
		// the first start failed at a typo): nothing to protect.
		force = true
	}
	if len(diffs) > 0 && !force {
		return r, diffs, &ConfigChangedError{Dir: dir, Diffs: diffs}
	}
	start.ForcedNewConfig = diffs
	r.Settings = settings
	r.Outputs = outputs(plan)
	r.History = append(r.History, start)
	if err := r.Write(dir); err != nil {
		return nil, diffs, err
	}
	return r, diffs, nil
}

// Describe says, for a dry run, what `pipe run` would do with the run
// directory: start a new run, or continue one (with how many ids finished),
// or refuse because the settings changed. It changes nothing.
func Describe(dir string, plan *pipeline.Plan) string {
	r, err := ReadRun(dir)
	switch {
	case err != nil:
		return fmt.Sprintf("cannot read it: %v", err)
	case r == nil:
		return "new run"
	}
	finished, _ := commitlog.CountIDs(filepath.Join(dir, pipeline.DoneFile))
	msg := fmt.Sprintf("continues the run started %s (%d starts, %d ids finished)",
		r.Created.Local().Format(time.DateTime), len(r.History), finished)
	if now := shardSpec(plan.File.Shard); !sameShard(r.Shard, now) {
		return msg + "; REFUSED: " + (&ShardChangedError{Dir: dir, Was: r.Shard, Now: now}).Error()
	}
	if diffs := Compare(r.Settings, normalizeMap(Settings(plan))); len(diffs) > 0 {
		if !didWork(dir) { // as Check decides
			return msg + "; the settings changed, but nothing was done under the old ones: the new ones are taken:\n  " + strings.Join(diffs, "\n  ")
		}
		msg += "; REFUSED without --force-new-config or --fresh, the settings changed:\n  " + strings.Join(diffs, "\n  ")
	}
	return msg
}

// didWork reports whether the run directory holds finished ids or
// journaled completions: work that other settings would not match.
func didWork(dir string) bool {
	if st, err := os.Stat(filepath.Join(dir, pipeline.DoneFile)); err == nil && st.Size() > 8 {
		return true
	}
	for _, j := range commitlog.JournalFiles(filepath.Join(dir, "journal"), "") {
		if st, err := os.Stat(j); err == nil && st.Size() > 0 {
			return true
		}
	}
	return false
}

// sameShard: a run of shard 0 of 1 is the whole input.
func sameShard(a, b *ShardSpec) bool {
	whole := func(s *ShardSpec) bool { return s == nil || s.Count == 1 }
	if whole(a) || whole(b) {
		return whole(a) && whole(b)
	}
	return *a == *b
}
