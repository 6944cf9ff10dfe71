package pipeline

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"

	"github.com/pipe-dev/pipe/internal/suggest"
	"github.com/pipe-dev/pipe/pipeline/commitlog"
	"github.com/pipe-dev/pipe/pipeline/output"
	"github.com/pipe-dev/pipe/pipeline/pipefile"
	"github.com/pipe-dev/pipe/pipeline/rundir/layout"
	"github.com/pipe-dev/pipe/pipeline/rundir/runfile"
)

// fromPorts are the ports the readers have: a stage with other ports
// (validate-thinking's accepted) cannot be replaced by one.
var fromPorts = []string{"out", RejectedPort}

// replaceFrom does the surgery of f.From on f's stages before the graph is
// built: STAGE and its upstream out, a reader in STAGE's place (same id, so
// every input naming it still does), the run directory and the outputs
// moved beside the original run. With checkFiles the original run is
// looked at to choose the reader; without, a journal is assumed.
func replaceFrom(f *pipefile.File, reg *Registry, checkFiles bool) pipefile.Problems {
	fr := f.From
	if fr == nil || fr.Applied {
		return nil
	}
	fr.Applied = true
	var probs pipefile.Problems
	prob := func(format string, args ...any) {
		probs = append(probs, pipefile.Problem{Pos: fr.Pos, Msg: fmt.Sprintf(format, args...), Structural: true})
	}
	byID := map[string]*pipefile.StageDecl{}
	var ids []string
	for _, sd := range f.Stages {
		byID[sd.ID] = sd
		ids = append(ids, sd.ID)
	}
	target := byID[fr.Stage]
	if target == nil {
		prob("no stage %q%s", fr.Stage, suggest.DidYouMean(fr.Stage, ids))
		return probs
	}
	if msg := replayablePorts(reg, target); msg != "" {
		prob("%s", msg)
		return probs
	}

	kept := cutUpstream(f, target, byID, prob)
	if len(probs) > 0 {
		return probs
	}

	reader, err := fromReader(f, reg, target, byID, checkFiles)
	if err != nil {
		prob("%v", err)
		return probs
	}
	for i, sd := range kept {
		if sd == target {
			kept[i] = reader
		}
	}
	f.Stages = kept

	// The replay is a run of its own, beside the original.
	if !strings.HasPrefix(f.RunDirPos.File, "--set ") {
		f.RunDir = pipefile.ReplayRunDir(fr.RunDir, fr.Stage)
		if f.Shard != nil {
			f.RunDir = filepath.Clean(f.Shard.ShardPrefix(f.RunDir))
		}
	}
	if filepath.Clean(f.RunDir) == fr.RunDir {
		prob("the replay would run in the original run directory %s: give it another (--run-dir DIR)", fr.RunDir)
		return probs
	}
	probs = append(probs, redirectOutputs(f, reg)...)
	return probs
}

// replayablePorts says why target's ports are not a replay reader's
// (fromPorts), or "".
func replayablePorts(reg *Registry, target *pipefile.StageDecl) string {
	spec := reg.Lookup(target.Kind)
	if spec == nil {
		return ""
	}
	for _, p := range spec.Outputs {
		if !slices.Contains(fromPorts, p) {
			return fmt.Sprintf("stage %q (%s) has port %q; a replay reader has ports %s: replay from a stage upstream of it", target.ID, target.Kind, p, strings.Join(fromPorts, ", "))
		}
	}
	return ""
}

// cutUpstream returns f's stages without those upstream of target (target
// itself kept, to be replaced by the reader), recording them in
// f.From.Replaced; a kept stage reading one of them is a problem (prob).
func cutUpstream(f *pipefile.File, target *pipefile.StageDecl, byID map[string]*pipefile.StageDecl, prob func(string, ...any)) []*pipefile.StageDecl {
	fr := f.From
	gone := map[string]bool{}
	var walk func(id string)
	walk = func(id string) {
		sd := byID[id]
		if sd == nil || gone[id] {
			return
		}
		gone[id] = true
		for _, in := range sd.Inputs {
			up, _, _ := strings.Cut(in, ".")
			walk(up)
		}
	}
	walk(fr.Stage)
	var kept []*pipefile.StageDecl
	for _, sd := range f.Stages {
		if gone[sd.ID] {
			fr.Replaced = append(fr.Replaced, sd.ID)
			if sd == target {
				kept = append(kept, sd)
			}
			continue
		}
		for _, in := range sd.Inputs {
			if up, _, _ := strings.Cut(in, "."); gone[up] && up != fr.Stage {
				prob("stage %q reads %q, which --from %s replaces (it is upstream of %s): replay from a stage that feeds every stage kept", sd.ID, in, fr.Stage, fr.Stage)
			}
		}
		kept = append(kept, sd)
	}
	return kept
}

// fromReader is the stage decl that reads what target produced in the
// original run: its journal if it has one, else the committed output of a
// writer fed by it alone (run.json's outputs name where it wrote).
func fromReader(f *pipefile.File, reg *Registry, target *pipefile.StageDecl, byID map[string]*pipefile.StageDecl, checkFiles bool) (*pipefile.StageDecl, error) {
	fr := f.From
	sd := &pipefile.StageDecl{ID: target.ID, Pos: target.Pos, KeyPos: map[string]pipefile.Pos{}, BadKeys: map[string]bool{}, EmptyEnv: map[string][]string{},
		Raw: map[string]any{}}
	for _, k := range []string{"id", "kind"} {
		if p, ok := target.KeyPos[k]; ok {
			sd.KeyPos[k] = p
		}
	}
	journal := layout.LegacyJournal(fr.RunDir, fr.Stage)
	files, err := commitlog.StageJournalFiles(fr.RunDir, fr.Stage)
	if err != nil {
		return nil, err
	}
	if len(files) > 0 {
		return journalReader(fr, reg, sd, journal, files)
	}
	outs, err := recordedOutputs(fr.RunDir)
	if err != nil && checkFiles {
		return nil, err
	}
	if o := replayableOutput(reg, outs, byID, fr.Stage); o != nil {
		kind, rs := reg.replayer(output.ReplaysOutput)
		if rs == nil {
			return nil, fmt.Errorf("no stage kind replays a writer's output (a ReplaySpec reading %q)", output.ReplaysOutput)
		}
		sd.Kind = kind
		for k, v := range rs.Config(fr.RunDir, fr.Stage, o.Kind, o.Path) {
			sd.Raw[k] = v
		}
		fr.Kind, fr.Source = sd.Kind, DisplayPath(o.Path)+" (written by "+o.Stage+")"
		return sd, nil
	}
	if !checkFiles {
		return journalReader(fr, reg, sd, journal, files) // a picture: what a run would find is its business
	}
	if _, err := os.Stat(fr.RunDir); err != nil {
		return nil, fmt.Errorf("run directory %s: %s", fr.RunDir, pipefile.DescribeReadError(err))
	}
	return nil, fmt.Errorf("%s has no journal of stage %q (%s) and no committed output of a writer fed by %s alone: nothing to replay (a run keeps what %s produced in a writer with input = %q, e.g. a write-arrow of every completion)", fr.RunDir, fr.Stage, journal, fr.Stage, fr.Stage, fr.Stage)
}

// journalReader makes sd the reader of the stage's journal (files, the
// one file journal or its parts).
func journalReader(fr *pipefile.From, reg *Registry, sd *pipefile.StageDecl, journal string, files []string) (*pipefile.StageDecl, error) {
	kind, rs := reg.replayer(output.ReplaysJournal)
	if rs == nil {
		return nil, fmt.Errorf("no stage kind replays a journal (a ReplaySpec reading %q)", output.ReplaysJournal)
	}
	sd.Kind = kind
	for k, v := range rs.Config(fr.RunDir, fr.Stage, "", "") {
		sd.Raw[k] = v
	}
	fr.Kind, fr.Source = sd.Kind, DisplayPath(journal)
	if len(files) > 1 || (len(files) == 1 && files[0] != journal) {
		fr.Source = DisplayPath(layout.Journal(fr.RunDir, fr.Stage)) + fmt.Sprintf(" (%d files)", len(files))
	}
	return sd, nil
}

// replayableOutput is the first recorded output a replay of stage can
// read: a local file that holds records, written by a writer fed by stage
// alone; nil if none.
func replayableOutput(reg *Registry, outs []runfile.Output, byID map[string]*pipefile.StageDecl, stage string) *runfile.Output {
	for i, o := range outs {
		w := byID[o.Stage]
		if w == nil || !feedsOnly(w, stage) || strings.HasPrefix(o.Path, "s3://") {
			continue
		}
		if out := reg.Output(o.Kind); out == nil || out.Each == nil {
			continue // holds no records (an upload's copies)
		}
		if _, err := os.Stat(o.Path); err != nil {
			continue
		}
		return &outs[i]
	}
	return nil
}

// feedsOnly reports whether w reads stage's first port and nothing else.
func feedsOnly(w *pipefile.StageDecl, stage string) bool {
	if len(w.Inputs) != 1 {
		return false
	}
	return w.Inputs[0] == stage || w.Inputs[0] == stage+".out"
}

// recordedOutputs are the outputs RUN_DIR/run.json records (nil without
// one).
func recordedOutputs(runDir string) ([]runfile.Output, error) {
	r, err := runfile.Read(runDir)
	if err != nil || r == nil {
		return nil, err
	}
	return r.Outputs, nil
}

// redirectOutputs moves every output path of the kept stages into the
// replay's run directory (RUN_DIR/out/NAME), except those given with --set;
// an upload's prefix is refused unless set, as it would land on the
// original run's objects.
func redirectOutputs(f *pipefile.File, reg *Registry) pipefile.Problems {
	var probs pipefile.Problems
	used := map[string]bool{}
	for _, sd := range f.Stages {
		spec := reg.Lookup(sd.Kind)
		if spec == nil || spec.Replay != nil {
			continue // a replay's reader reads the original run: never moved
		}
		fields, _ := fieldsOf(reflect.TypeOf(spec.Config))
		for _, fi := range fields {
			raw, set := sd.Raw[fi.Key]
			s, isStr := raw.(string)
			if !set || !isStr || s == "" {
				continue
			}
			if _, byCommandLine := sd.SetDir[fi.Key]; byCommandLine {
				continue
			}
			switch {
			case fi.Path == "out" || fi.Path == "dir":
				name := filepath.Base(s)
				if used[name] {
					name = sd.ID + "-" + name
				}
				used[name] = true
				to := layout.OutFile(f.RunDir, name)
				from := s
				if !filepath.IsAbs(from) {
					from = filepath.Join(f.Dir, from)
				}
				f.From.Redirected = append(f.From.Redirected, pipefile.Redirect{Stage: sd.ID, Key: fi.Key, From: from, To: to})
				sd.Raw[fi.Key] = to
			case fi.ShardPrefix:
				probs = append(probs, pipefile.Problem{Pos: sd.KeyPosition(fi.Key), Stage: sd.ID, Kind: sd.Kind, Structural: true,
					Msg: fmt.Sprintf("--from does not move %s (%s): the replay would write over the original run's objects; give it its own with --set %s.%s=… (or leave the stage out of the file)", fi.Key, s, sd.ID, fi.Key)})
			}
		}
	}
	return probs
}

// WriteFrom says what --from replaced and where the replay writes, for
// --dry-run and pipe graph; nothing without --from.
func (p *Plan) WriteFrom(w io.Writer) {
	fr := p.File.From
	if fr == nil || !fr.Applied || fr.Kind == "" {
		return
	}
	fmt.Fprintf(w, "replaced by --from %s=%s: %s\n", fr.Stage, DisplayPath(fr.RunDir), strings.Join(fr.Replaced, ", "))
	fmt.Fprintf(w, "  %s (%s) reads %s: no server is asked\n", fr.Stage, fr.Kind, fr.Source)
	for _, r := range fr.Redirected {
		fmt.Fprintf(w, "  %s.%s → %s (the file says %s)\n", r.Stage, r.Key, DisplayPath(r.To), DisplayPath(r.From))
	}
}
