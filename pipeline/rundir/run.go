package rundir

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/pipe-dev/pipe/pipeline"
	"github.com/pipe-dev/pipe/pipeline/commitlog"
	"github.com/pipe-dev/pipe/pipeline/pipefile"
	"github.com/pipe-dev/pipe/pipeline/rundir/layout"
	"github.com/pipe-dev/pipe/pipeline/rundir/runfile"
)

// RunFile is run.json's name inside the run directory. The file is
// declared in package runfile, which package pipeline reads too.
const RunFile = runfile.Name

type (
	// Run is RUN_DIR/run.json: the settings that define the run's data
	// and every start of it.
	Run = runfile.Run
	// Output is one place a run writes to.
	Output = runfile.Output
	// ShardSpec is a run's shard as run.json records it.
	ShardSpec = runfile.ShardSpec
	// Start is one `pipe run` of the run directory.
	Start = runfile.Start
	// Trainer is run.json's [trainer].
	Trainer = runfile.Trainer
)

// ReadRun reads dir/run.json; it returns nil, nil when there is none.
func ReadRun(dir string) (*Run, error) { return runfile.Read(dir) }

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

func shardSpec(s *pipefile.Shard) *ShardSpec {
	if s == nil {
		return nil
	}
	return &ShardSpec{Index: s.Index, Count: s.Count, Hash: pipefile.ShardHash}
}

// backfill is old (run.json's settings) with the keys that a newer pipe
// added to a stage's kind since old was written, where they stand at what
// the older pipe did: a key at its default, and the chat template's
// digest (pipeline.TemplateDigestSuffix; the template's path was already
// a setting). A run started by an older pipe then resumes under a newer
// one unless a setting that defines its data really changed. old is not
// modified.
func backfill(old map[string]any, plan *pipeline.Plan) map[string]any {
	out := make(map[string]any, len(old))
	for id, v := range old {
		out[id] = v
		om, ok := v.(map[string]any)
		ps := plan.Lookup(id)
		if !ok || ps == nil || om["kind"] != ps.Decl.Kind {
			continue
		}
		var added map[string]any
		for key, nv := range ps.Settings(false) {
			if _, had := om[key]; had {
				continue
			}
			def, hasDef := ps.DefaultSetting(key)
			if !strings.HasSuffix(key, pipeline.TemplateDigestSuffix) && (!hasDef || !equal(normalize(def), normalize(nv))) {
				continue
			}
			if added == nil {
				added = maps.Clone(om)
			}
			added[key] = nv
		}
		if added != nil {
			out[id] = added
		}
	}
	return out
}

// trainerSpec is [trainer] as run.json records it.
// samplingOf is each stage's resolved sampling (a config with
// ResolvedSampling: generate's).
func samplingOf(plan *pipeline.Plan) map[string]map[string]any {
	var out map[string]map[string]any
	for _, st := range plan.Stages {
		r, ok := st.Config.(interface{ ResolvedSampling() map[string]any })
		if !ok {
			continue
		}
		if m := r.ResolvedSampling(); m != nil {
			if out == nil {
				out = map[string]map[string]any{}
			}
			out[st.ID()] = m
		}
	}
	return out
}

func trainerSpec(t *pipefile.Trainer) *Trainer {
	if t == nil {
		return nil
	}
	return &Trainer{Name: t.Name, Method: t.Method, MaxLength: t.MaxLength, ChatTemplate: t.ChatTemplate}
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
		r = &Run{Pipeline: path, Created: start.At, Settings: settings, Shard: shardSpec(plan.File.Shard), Outputs: outputs(plan), Trainer: trainerSpec(plan.File.Trainer), History: []Start{start}}
		if err := r.Write(dir); err != nil {
			return nil, nil, err
		}
		return r, nil, nil
	}
	if now := shardSpec(plan.File.Shard); !sameShard(r.Shard, now) {
		return r, nil, &ShardChangedError{Dir: dir, Was: r.Shard, Now: now}
	}
	diffs := Compare(backfill(r.Settings, plan), settings)
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
	r.Trainer = trainerSpec(plan.File.Trainer)
	r.Sampling = samplingOf(plan)
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
	if diffs := Compare(backfill(r.Settings, plan), normalizeMap(Settings(plan))); len(diffs) > 0 {
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
	for _, j := range commitlog.JournalFiles(layout.JournalDir(dir), "") {
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
