package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/BurntSushi/toml"

	"github.com/pipe-dev/pipe/pipeline"
	"github.com/pipe-dev/pipe/pipeline/pipefile"
	"github.com/pipe-dev/pipe/pipeline/rundir"
)

// initRevalidate writes a pipeline file that re-validates a run's
// completions: the run's recorded pipeline (run.json names its file) with
// its generation stage and everything upstream replaced by a reader of
// what that stage produced, as pipe run --from does, every key written
// out so the file stands on its own.
func initRevalidate(std *stdio, f initFlags) error {
	if f.from == "" {
		return usageErrorf("usage: pipe init revalidate --from RUN_DIR [-o FILE]")
	}
	out := f.out
	if out == "regenerate.toml" {
		out = "revalidate.toml"
	}
	if _, err := os.Stat(out); err == nil {
		return &exitError{code: exitUsage, err: fmt.Errorf("%s exists: pipe init never overwrites a file (-o FILE)", out)}
	}
	runDir, err := filepath.Abs(f.from)
	if err != nil {
		return err
	}
	run, err := rundir.ReadRun(runDir)
	if err != nil {
		return err
	}
	if run == nil {
		return &exitError{code: exitUsage, err: fmt.Errorf("%s is not a run directory: it has no %s", f.from, rundir.RunFile)}
	}
	if _, err := os.Stat(run.Pipeline); err != nil {
		return &exitError{code: exitUsage, err: fmt.Errorf("%s: the run's pipeline file %s: %v; write one with a read-journal stage (pipe stages read-journal)", f.from, run.Pipeline, err)}
	}
	stage, err := expensiveStage(run.Pipeline)
	if err != nil {
		return &exitError{code: exitUsage, err: err}
	}
	plan, probs := loadShardPlan(run.Pipeline, nil, "", "", stage+"="+runDir)
	if len(probs) > 0 {
		return &exitError{code: exitUsage, err: fmt.Errorf("replaying %s from %s: %w", run.Pipeline, stage, probs)}
	}
	absOut, err := filepath.Abs(out)
	if err != nil {
		return err
	}
	text, err := revalidateText(plan, filepath.Dir(absOut), runDir)
	if err != nil {
		return err
	}
	if err := os.WriteFile(out, text, 0o644); err != nil {
		return err
	}
	fmt.Fprintf(std.Err, "pipe init: wrote %s: re-validates %s from its %s stage's completions (pipe check %s; pipe run %s)\n", out, f.from, stage, out, out)
	return nil
}

// expensiveStage is the first stage of the file whose work is costly to
// redo (generate): the one a re-validation replays.
func expensiveStage(path string) (string, error) {
	file, probs := pipefile.Load(path, pipefile.Options{})
	if file == nil {
		return "", probs
	}
	for _, sd := range file.Stages {
		if s := pipeline.DefaultRegistry.Lookup(sd.Kind); s != nil && s.Expensive {
			return sd.ID, nil
		}
	}
	return "", fmt.Errorf("%s has no generation stage to replay from (a kind such as generate)", path)
}

// revalidateText is the pipeline file of plan, paths relative to dir.
func revalidateText(plan *pipeline.Plan, dir, runDir string) ([]byte, error) {
	rel := func(p string) string {
		if r, err := filepath.Rel(dir, p); err == nil && !strings.HasPrefix(r, "../..") {
			return r
		}
		return p
	}
	paths := map[[2]string][]string{}
	for _, u := range plan.Paths() {
		if u.Stage != "" {
			k := [2]string{u.Stage, u.Key}
			paths[k] = append(paths[k], rel(u.Path))
		}
	}
	fr := plan.File.From
	var b bytes.Buffer
	fmt.Fprintf(&b, "# Re-validate the completions of %s with today's rules, without a server:\n", rel(runDir))
	fmt.Fprintf(&b, "# %s below reads what stage %q produced in that run, in place of %s\n", fr.Stage, fr.Stage, strings.Join(fr.Replaced, ", "))
	fmt.Fprintf(&b, "# of %s. Change a rule below (or --set check.min_answer_length=20), then\n", rel(plan.File.Path))
	fmt.Fprintf(&b, "#   pipe check FILE && pipe run FILE\n")
	fmt.Fprintf(&b, "# and see what changed: pipe report %s %s\n\n", rel(runDir), rel(plan.File.RunDir))
	fmt.Fprintf(&b, "[pipeline]\nname    = %q\nrun_dir = %q\n", plan.File.Name+"-revalidate", rel(plan.File.RunDir))
	for _, sd := range plan.File.Stages {
		ps := plan.Lookup(sd.ID)
		fmt.Fprintf(&b, "\n# %s\n", ps.Spec.Summary)
		if sd.ID == fr.Stage {
			fmt.Fprintf(&b, "# (in the run: %s)\n", strings.Join(fr.Replaced, " → "))
		}
		fmt.Fprintf(&b, "[[stage]]\nid   = %q\nkind = %q\n", sd.ID, ps.Spec.Kind)
		writeInputs(&b, sd.Inputs)
		if err := writeStageKeys(&b, plan, sd, paths); err != nil {
			return nil, err
		}
		// The rules left at their defaults, to change here.
		if sd.ID != fr.Stage {
			for _, d := range ps.Spec.FieldDocs() {
				if _, set := sd.Raw[d.Key]; set || d.Default == "" || slices.Contains(ps.Spec.OperationalKeys(), d.Key) {
					continue
				}
				fmt.Fprintf(&b, "# %s = %s    # %s\n", d.Key, d.Default, docLine(d.Doc))
			}
		}
	}
	return b.Bytes(), nil
}

// writeInputs writes a stage's input key: one input, or a list.
func writeInputs(b *bytes.Buffer, inputs []string) {
	if len(inputs) == 1 {
		fmt.Fprintf(b, "input = %q\n", inputs[0])
	} else if len(inputs) > 1 {
		q := make([]string, len(inputs))
		for i, in := range inputs {
			q[i] = fmt.Sprintf("%q", in)
		}
		fmt.Fprintf(b, "input = [%s]\n", strings.Join(q, ", "))
	}
}

// writeStageKeys writes the keys the file gives stage sd, sorted, as TOML;
// its paths (by stage and key) are those of paths, relative.
func writeStageKeys(b *bytes.Buffer, plan *pipeline.Plan, sd *pipefile.StageDecl, paths map[[2]string][]string) error {
	keys := make([]string, 0, len(sd.Raw))
	for k := range sd.Raw {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		v := sd.Raw[k]
		if p, ok := paths[[2]string{sd.ID, k}]; ok {
			if _, isList := v.([]any); isList {
				v = p
			} else {
				v = p[0]
			}
		}
		var kv bytes.Buffer
		if err := toml.NewEncoder(&kv).Encode(map[string]any{k: v}); err != nil {
			return fmt.Errorf("stage %q: key %s: %v", sd.ID, k, err)
		}
		if bytes.HasPrefix(bytes.TrimSpace(kv.Bytes()), []byte("[")) {
			return fmt.Errorf("stage %q: key %s is a table, which this file cannot write inline; copy it from %s", sd.ID, k, plan.File.Path)
		}
		b.Write(kv.Bytes())
	}
	return nil
}

func docLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	if r := []rune(s); len(r) > 100 {
		s = string(r[:100]) + "…"
	}
	return s
}
