package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/pipe-dev/pipe/cmd/pipe/internal/cmdline"
	"github.com/pipe-dev/pipe/pipeline"
	"github.com/pipe-dev/pipe/pipeline/commitlog"
	"github.com/pipe-dev/pipe/pipeline/filecommit"
	"github.com/pipe-dev/pipe/pipeline/record"
	"github.com/pipe-dev/pipe/pipeline/rundir"
	"github.com/pipe-dev/pipe/stages"
	"github.com/pipe-dev/pipe/stages/trainrow"
)

// exportCmd is pipe export and its flags.
type exportCmd struct {
	layout, stage, tooLong, trainer string
	maxLength                       int
}

func init() {
	register(&command{
		Name:      "export",
		UsageLine: "pipe export --layout specforge|conversations [--stage ID] OUT.jsonl PATH...",
		Short:     "gather committed outputs into the one JSONL file a trainer (SpecForge) reads",
		Long: `Export reads the committed records of each PATH — a write-arrow directory or
shard file, a write-jsonl file, a run directory (its output --stage, or its
only data output), a sharded run's parent directory (every shard-*-of-*
run in it) or a glob of these — and writes them into OUT.jsonl in one
layout, as write-jsonl's layout setting does:

  specforge      {"id", "input_ids", "loss_mask"}: SpecForge data.prompts_path
  conversations  {"id", "conversations": [...]}: SpecForge data.train_data_path

SpecForge reads one JSON or JSONL file (specforge/data/prompt_builder.py),
so the shards of a run, or of every shard of a sharded run, go into one.
Records are streamed (one batch or line at a time); an id already
exported is skipped. With --max-length and --trainer set as in the
trainer's config, rows it would cut are cut the same way and rows it would
drop without a word are left out and counted by reason. OUT.jsonl is
written under a temporary name and renamed when complete; a file already
there is kept as OUT.jsonl.prev-TIME. The ids exported are remembered (8
bytes each), so memory grows with them, not with the rows.`,
		New: func() runner { return &exportCmd{} },
	})
}

func (c *exportCmd) setFlags(fs *flag.FlagSet) {
	fs.StringVar(&c.layout, "layout", "", "specforge or conversations (required)")
	fs.StringVar(&c.stage, "stage", "", "run directories: the output stage to export (default: their only output that holds records)")
	fs.IntVar(&c.maxLength, "max-length", 0, "the trainer's max_length (SpecForge data.max_length); 0: no limit")
	fs.StringVar(&c.tooLong, "too-long", "cut", "a row longer than --max-length: cut (as SpecForge does) or reject")
	fs.StringVar(&c.trainer, "trainer", trainrow.TrainerEAGLE3, "eagle3 (1 loss token) or dflash (2, adjacent)")
}

func (c *exportCmd) run(ctx context.Context, std *stdio, fs *flag.FlagSet) error {
	if fs.NArg() < 2 {
		return usageErrorf("usage: pipe export --layout specforge|conversations [--stage ID] OUT.jsonl PATH...")
	}
	if c.layout != trainrow.SpecForge && c.layout != trainrow.Conversations {
		return usageErrorf("pipe export: --layout %q: want specforge or conversations", c.layout)
	}
	if c.tooLong != "cut" && c.tooLong != "reject" {
		return usageErrorf("pipe export: --too-long %q: want cut or reject", c.tooLong)
	}
	if c.trainer != trainrow.TrainerEAGLE3 && c.trainer != trainrow.TrainerDFlash {
		return usageErrorf("pipe export: --trainer %q: want eagle3 or dflash", c.trainer)
	}
	if c.maxLength < 0 {
		return usageErrorf("pipe export: --max-length %d: want 0 or more", c.maxLength)
	}
	out := fs.Arg(0)
	inputs, err := exportInputs(fs.Args()[1:], c.stage)
	if err != nil {
		return usageErrorf("pipe export: %v", err)
	}
	if _, err := os.Stat(commitlog.IndexPath(out)); err == nil {
		return usageErrorf("pipe export: %s is a run's output (it has a commit index): export into another file", out)
	}
	rules := trainrow.Rules{MaxLength: c.maxLength, TooLong: c.tooLong, Trainer: c.trainer}
	if err := rulesFromRuns(fs, &rules, fs.Args()[1:], std.Err); err != nil {
		return usageErrorf("pipe export: %v", err)
	}
	ex := &exporter{layout: c.layout, rules: rules,
		seen: map[uint64]struct{}{}, reasons: map[string]int64{}}
	if err := ex.run(ctx, out, inputs); err != nil {
		return fmt.Errorf("pipe export: %w", err)
	}
	ex.report(std.Err, out, len(inputs))
	if ex.rows == 0 {
		return errors.New("pipe export: no row to export: " + out + " not written")
	}
	return nil
}

// rulesFromRuns takes the trainer's rules from the [trainer] that the
// run directories among args recorded (run.json), for the flags not given
// on the command line, and says so on w. Runs made for different trainers,
// or whose chat templates differ (the template digests run.json records
// beside each tokenizer key), are an error: their rows cannot go into one
// file for one trainer, whose labelling follows one template.
func rulesFromRuns(fs *flag.FlagSet, r *trainrow.Rules, args []string, w io.Writer) error {
	paths, err := cmdline.ExpandGlobs(args)
	if err != nil {
		return err
	}
	var t *rundir.Trainer
	var from, tmplFrom string
	var tmpl []string
	for _, p := range paths {
		dirs := []string{p}
		if run, _ := rundir.ReadRun(p); run == nil {
			dirs, _ = filepath.Glob(filepath.Join(p, "shard-*-of-*"))
		}
		for _, d := range dirs {
			run, err := rundir.ReadRun(d)
			if err != nil || run == nil {
				continue
			}
			if digests := templateDigests(run); len(digests) > 0 {
				if tmpl != nil && !slices.Equal(tmpl, digests) {
					return fmt.Errorf("%s and %s were made with different chat templates (%s against %s): their rows are labelled by different templates; export them separately",
						tmplFrom, d, strings.Join(tmpl, ", "), strings.Join(digests, ", "))
				}
				tmpl, tmplFrom = digests, d
			}
			if run.Trainer == nil {
				continue
			}
			if t != nil && *t != *run.Trainer {
				return fmt.Errorf("%s and %s were made for different trainers ([trainer] %s %s, max_length %d, chat_template %q against %s %s, max_length %d, chat_template %q): export them separately",
					from, d, t.Name, t.Method, t.MaxLength, t.ChatTemplate, run.Trainer.Name, run.Trainer.Method, run.Trainer.MaxLength, run.Trainer.ChatTemplate)
			}
			t, from = run.Trainer, d
		}
	}
	if t == nil {
		return nil
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if !set["max-length"] {
		r.MaxLength = t.MaxLength
	}
	if !set["trainer"] {
		r.Trainer = t.Method
	}
	fmt.Fprintf(w, "pipe export: rows judged by the runs' [trainer]: %s %s, max_length %d\n", t.Name, r.Trainer, r.MaxLength)
	return nil
}

// templateDigests are the distinct chat template digests a run recorded
// (pipeline.TemplateDigestSuffix settings of any stage), shortened and
// sorted.
func templateDigests(run *rundir.Run) []string {
	var out []string
	for _, v := range run.Settings {
		keys, _ := v.(map[string]any)
		for k, d := range keys {
			if s, ok := d.(string); ok && strings.HasSuffix(k, pipeline.TemplateDigestSuffix) && len(s) >= 12 && !slices.Contains(out, s[:12]) {
				out = append(out, s[:12])
			}
		}
	}
	slices.Sort(out)
	return out
}

// exportInput is one output to export: its path and how its kind reads
// it back (output.Spec.Each).
type exportInput struct {
	path string
	each func(ctx context.Context, path string, fn func(*record.Record) error) error
}

// exportInputs resolves the PATH arguments to outputs (files or shard
// directories), in order.
func exportInputs(args []string, stage string) ([]exportInput, error) {
	paths, err := cmdline.ExpandGlobs(args)
	if err != nil {
		return nil, err
	}
	var out []exportInput
	for _, p := range paths {
		st, err := os.Stat(p)
		if err != nil {
			return nil, err
		}
		if _, o := pipeline.DefaultRegistry.OutputAt(p); o != nil && o.Each != nil {
			out = append(out, exportInput{p, o.Each})
			continue
		}
		if !st.IsDir() {
			// Read as pipe's records, whatever its name (an output
			// of no kind that claims it).
			out = append(out, exportInput{p, stages.EachJSONLRecord})
			continue
		}
		run, err := rundir.ReadRun(p)
		if err != nil {
			return nil, err
		}
		if run != nil {
			o, err := runOutput(p, run, stage)
			if err != nil {
				return nil, err
			}
			out = append(out, o)
			continue
		}
		shards, _ := filepath.Glob(filepath.Join(p, "shard-*-of-*"))
		var runs []string
		for _, s := range shards {
			if r, err := rundir.ReadRun(s); err == nil && r != nil {
				runs = append(runs, s)
			}
		}
		if len(runs) == 0 {
			return nil, fmt.Errorf("%s: neither an output (shards, %s) nor a run directory (%s) nor a sharded run's parent (shard-*-of-*/%s)", p, filecommit.ManifestName, rundir.RunFile, rundir.RunFile)
		}
		more, err := exportInputs(runs, stage)
		if err != nil {
			return nil, err
		}
		out = append(out, more...)
	}
	return out, nil
}

// runOutput is the output of a run directory to export: the stage's, or
// its only output that holds records.
func runOutput(dir string, run *rundir.Run, stage string) (exportInput, error) {
	var data []exportInput
	var names []string
	for _, o := range run.Outputs {
		if spec := pipeline.OutputOf(o.Kind); spec != nil && spec.Each != nil {
			if stage != "" && o.Stage == stage {
				return exportInput{o.Path, spec.Each}, nil
			}
			data = append(data, exportInput{o.Path, spec.Each})
			names = append(names, o.Stage)
		}
	}
	switch {
	case stage != "":
		return exportInput{}, fmt.Errorf("%s: no output stage %q (its outputs: %s)", dir, stage, strings.Join(names, ", "))
	case len(data) == 1:
		return data[0], nil
	case len(data) == 0:
		return exportInput{}, fmt.Errorf("%s: the run has no output that holds records (of a %s stage)", dir, strings.Join(recordKinds(), " or "))
	}
	return exportInput{}, fmt.Errorf("%s: the run has %d outputs (%s): choose one with --stage", dir, len(data), strings.Join(names, ", "))
}

// recordKinds are the kinds whose outputs hold records.
func recordKinds() []string {
	var out []string
	for _, k := range pipeline.DefaultRegistry.Kinds() {
		if o := pipeline.DefaultRegistry.Output(k); o != nil && o.Each != nil {
			out = append(out, k)
		}
	}
	return out
}

type exporter struct {
	layout  string
	rules   trainrow.Rules
	seen    map[uint64]struct{} // hashes of the ids exported
	rows    int64
	reasons map[string]int64 // rows left out, by reason
	example map[string]string
	keptAs  string // where a file that was at OUT went
}

func (ex *exporter) run(ctx context.Context, out string, inputs []exportInput) (err error) {
	dir := filepath.Dir(out)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(out)+".*.tmp")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	w := bufio.NewWriterSize(tmp, 1<<20)
	ex.example = map[string]string{}
	for _, input := range inputs {
		in := input.path
		err := input.each(ctx, in, func(rec *record.Record) error {
			h := commitlog.Hash(rec.ID)
			if _, dup := ex.seen[h]; dup {
				ex.leaveOut(pipeline.ReasonDuplicate, rec.ID+" (already exported)")
				return nil
			}
			line, prob, err := trainrow.Encode(ex.layout, ex.rules, rec)
			if err != nil {
				return fmt.Errorf("%s: record %q: %w", in, rec.ID, err)
			}
			if prob != nil {
				ex.leaveOut(prob.Reason, rec.ID+": "+prob.Detail)
				return nil
			}
			ex.seen[h] = struct{}{}
			ex.rows++
			w.Write(line)
			return w.WriteByte('\n')
		})
		if err != nil {
			return err
		}
	}
	if ex.rows == 0 { // not written; the caller says so
		tmp.Close()
		return os.Remove(tmp.Name())
	}
	if err := errors.Join(w.Flush(), tmp.Chmod(0o644), tmp.Sync(), tmp.Close()); err != nil {
		return fmt.Errorf("writing %s: %w", out, err)
	}
	if _, err := os.Stat(out); err == nil {
		// Not ours to lose: an earlier export, or anything else.
		if ex.keptAs, err = pipeline.KeepAside(out); err != nil {
			return fmt.Errorf("keeping the existing %s: %w", out, err)
		}
	}
	if err := os.Rename(tmp.Name(), out); err != nil {
		return err
	}
	return commitlog.SyncDir(dir)
}

func (ex *exporter) leaveOut(reason, example string) {
	ex.reasons[reason]++
	if _, ok := ex.example[reason]; !ok {
		ex.example[reason] = example
	}
}

func (ex *exporter) report(w io.Writer, out string, inputs int) {
	if ex.rows > 0 {
		fmt.Fprintf(w, "pipe export: wrote %s (%s layout): %d rows from %d outputs\n", out, ex.layout, ex.rows, inputs)
	}
	if ex.keptAs != "" {
		fmt.Fprintf(w, "pipe export: the file that was at %s is kept as %s\n", out, ex.keptAs)
	}
	reasons := make([]string, 0, len(ex.reasons))
	for r := range ex.reasons {
		reasons = append(reasons, r)
	}
	sort.Strings(reasons)
	for _, r := range reasons {
		fmt.Fprintf(w, "pipe export: left out %d rows: %s (e.g. %s)\n", ex.reasons[r], r, ex.example[r])
	}
}
