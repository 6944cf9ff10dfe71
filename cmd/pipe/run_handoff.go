package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/pipe-dev/pipe/pipeline"
	"github.com/pipe-dev/pipe/pipeline/commitlog"
	"github.com/pipe-dev/pipe/pipeline/output"
	"github.com/pipe-dev/pipe/pipeline/record/recordline"
	"github.com/pipe-dev/pipe/stages/trainrow"
)

// handoff is one output of a trainer layout and the SpecForge data: block
// that loads it.
type handoff struct {
	stage, layout, out string
	block              trainrow.DataBlock
	notes              []string
}

// writeHandoffs writes, for a run with [trainer], the SpecForge data:
// block that loads each output of a trainer layout (write-jsonl layout
// "specforge" → data.prompts_path, "conversations" → data.train_data_path)
// beside it, as OUT.specforge.yaml (trainrow.HandoffPath), and returns the
// files written. A run without [trainer] writes none: the trainer's
// max_length and template are not known. ctx ends the scan of a large
// output early (nothing is written for it then).
func writeHandoffs(ctx context.Context, plan *pipeline.Plan) ([]string, error) {
	t := plan.File.Trainer
	if t == nil {
		return nil, nil
	}
	var written []string
	var errs []string
	for _, h := range handoffsOf(plan) {
		if err := ctx.Err(); err != nil {
			return written, err
		}
		path := trainrow.HandoffPath(h.out)
		if dir := shardDirHolding(plan, path); dir != "" {
			errs = append(errs, fmt.Sprintf("%s: not written: it would be inside %s, which another output fills and a loader may list", path, dir))
			continue
		}
		if h.layout == trainrow.SpecForge {
			// One pass over the output: the eagle3 counts' pass also
			// counts what the memory note needs.
			var fig promptsFig
			var err error
			if t.Method == trainrow.TrainerEAGLE3 {
				var freq string
				if freq, fig, err = writeTokenFreq(ctx, h.out, h.block.MaxLength); err == nil {
					written = append(written, freq)
					h.notes = append(h.notes, tokenFreqNote(freq))
				}
			} else {
				fig.rows, fig.tokens, fig.big, err = promptsFigures(ctx, h.out, h.block.MaxLength)
			}
			if err != nil {
				errs = append(errs, fmt.Sprintf("%s: %v", h.out, err))
				continue
			}
			h.notes = append(h.notes, promptsMemoryNote(fig))
		}
		text, err := h.block.YAML(h.notes)
		if err == nil {
			err = commitlog.WriteFileAtomic(path, text)
		}
		if err != nil {
			errs = append(errs, fmt.Sprintf("%s: %v", path, err))
			continue
		}
		written = append(written, path)
	}
	if len(errs) > 0 {
		return written, fmt.Errorf("SpecForge handoff: %s", strings.Join(errs, "; "))
	}
	return written, nil
}

// handoffsOf lists the plan's outputs of a trainer layout: the stages
// whose config says it is one (output.TrainerFile). The stage's own
// max_length is [trainer]'s (its trainer tag), or overrides it.
func handoffsOf(plan *pipeline.Plan) []handoff {
	t := plan.File.Trainer
	var out []handoff
	for _, s := range plan.Stages {
		tf, ok := s.Config.(output.TrainerFile)
		if !ok {
			continue
		}
		layout, path, maxLength, ok := tf.TrainerFile()
		if !ok {
			continue
		}
		if maxLength <= 0 {
			maxLength = t.MaxLength
		}
		block, err := trainrow.NewDataBlock(layout, path, maxLength, t.ChatTemplate)
		if err != nil {
			continue
		}
		h := handoff{stage: s.ID(), layout: layout, out: path, block: block}
		h.notes = append(h.notes, fmt.Sprintf("SpecForge data: block for %s, output %q of the pipe run in %s.\n"+
			"Put it in the run config given to `specforge train --config` (one data source: specforge/config/schema.py DataConfig).",
			filepath.Base(path), s.ID(), pipeline.DisplayPath(plan.File.RunDir)))
		if t.ChatTemplate == "" {
			h.notes = append(h.notes, "chat_template: [trainer] names none, so SpecForge takes its default, \"llama3\" (schema.py DataConfig); set [trainer] chat_template.")
		}
		out = append(out, h)
	}
	return out
}

// shardDirHolding is the directory output of the plan (a write-arrow
// directory) that path would be inside, or "": a file there could be
// taken as data (trainers.DataFiles: HF datasets lists every file of a
// directory it is given).
func shardDirHolding(plan *pipeline.Plan, path string) string {
	for _, u := range plan.Paths() {
		if u.Mode != "dir" || u.Key == "run_dir" {
			continue
		}
		if rel, err := filepath.Rel(u.Path, path); err == nil && !strings.HasPrefix(rel, "..") {
			return u.Path
		}
	}
	return ""
}

// promptsMemoryNote says what SpecForge's pre-tokenized route would hold
// in memory for the output at path (trainrow.PromptsMemory), against the
// conversation route, which holds no row.
func promptsMemoryNote(f promptsFig) string {
	mem := trainrow.PromptsMemory(f.rows, f.tokens, f.big)
	return fmt.Sprintf("memory: data.prompts_path holds every row in Python lists before training starts\n"+
		"(specforge/data/prompt_builder.py _materialize_prompt_tasks): about %s for %d rows of %d tokens\n"+
		"(8 B a list slot, 32 B an int object above 256: %d of the ids). data.train_data_path\n"+
		"(write-jsonl layout = \"conversations\") streams its rows from Arrow and holds none.",
		gib(mem), f.rows, f.tokens, f.big)
}

// promptsFig is what promptsMemoryNote needs of a specforge-layout
// output: its rows, their tokens cut at max_length, and the ids among
// them above 256.
type promptsFig struct{ rows, tokens, big int64 }

func gib(n int64) string {
	if n >= 1<<30 {
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	}
	return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
}

// promptsFigures counts the committed rows of a specforge-layout output,
// their tokens (each row cut at maxLength, as the trainer cuts it; 0: no
// cut) and the ids among them above 256.
func promptsFigures(ctx context.Context, path string, maxLength int) (rows, tokens, big int64, err error) {
	err = eachCommittedLine(ctx, path, func(_ int, line []byte) error {
		if recordline.EachInputID(line, maxLength, func(id int, _ bool) {
			tokens++
			if id > 256 {
				big++
			}
		}) {
			rows++
		}
		return nil
	})
	return rows, tokens, big, err
}

// eachCommittedLine calls each with the committed lines of the commit log
// at path, numbered from 1, until it returns an error or ctx ends.
func eachCommittedLine(ctx context.Context, path string, each func(n int, line []byte) error) error {
	_, size, err := commitlog.Committed(path)
	if err != nil {
		return err
	}
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	sc := bufio.NewScanner(io.LimitReader(f, size))
	sc.Buffer(make([]byte, 0, 1<<20), 1<<30)
	for n := 1; sc.Scan(); n++ {
		if n%4096 == 0 && ctx.Err() != nil {
			return ctx.Err()
		}
		if err := each(n, sc.Bytes()); err != nil {
			return err
		}
	}
	return sc.Err()
}
