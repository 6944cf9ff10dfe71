package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pipe-dev/pipe/internal/testrig/trainers"
	"github.com/pipe-dev/pipe/pipeline/commitlog"
	"github.com/pipe-dev/pipe/pipeline/record"
	"github.com/pipe-dev/pipe/pipeline/record/recordline"
	"github.com/pipe-dev/pipe/stages/trainrow"
)

const handoffPipeline = `[pipeline]
name    = "h"
run_dir = "runs/h"

[trainer]
name          = "specforge"
method        = "dflash"
max_length    = 8
chat_template = "qwen3.5"

[[stage]]
id   = "completions"
kind = "read-completions"
path = "c.jsonl"

[[stage]]
id        = "tok"
kind      = "tokenize-and-mask"
input     = "completions"
tokenizer = "model"

[[stage]]
id     = "sf"
kind   = "write-jsonl"
input  = "tok"
path   = "out/sf.jsonl"
layout = "specforge"

[[stage]]
id     = "conv"
kind   = "write-jsonl"
input  = "tok"
path   = "out/conv.jsonl"
layout = "conversations"

[[stage]]
id    = "train"
kind  = "write-arrow"
input = "tok"
path  = "train"

[[stage]]
id     = "inside"
kind   = "write-jsonl"
input  = "tok"
path   = "train/sf.jsonl"
layout = "specforge"
`

// A finished run with [trainer] writes the data: block of each trainer
// layout's output beside it; the block passes SpecForge's schema rules
// (trainers.CheckSpecForgeConfigYAML), names the output absolutely, and,
// for the pre-tokenized route, says the memory SpecForge would hold. A
// block that would land in a write-arrow directory is not written.
func TestWriteHandoffs(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "h.toml")
	os.WriteFile(file, []byte(handoffPipeline), 0o644)
	plan, probs := loadGraph(file, nil, "")
	if plan == nil || len(probs) > 0 {
		t.Fatalf("plan: %v", probs)
	}
	// Two rows as write-jsonl commits them: 12 tokens, cut to 8 by the
	// trainer's max_length (6 of them ids above 256), and 3 tokens.
	rows := []*record.Record{
		{ID: "a", Tokens: &record.Tokens{InputIDs: []int32{151644, 872, 198, 4340, 1657, 5, 151645, 300, 301, 302, 303, 304}, LossMask: record.LossMask{0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1}},
			Messages: []record.Message{{Role: "user", Content: "q"}}, Completion: &record.Completion{Reasoning: "r", Answer: "a", FinishReason: "stop"}},
		{ID: "b", Tokens: &record.Tokens{InputIDs: []int32{1, 2, 3}, LossMask: record.LossMask{0, 1, 1}},
			Messages: []record.Message{{Role: "user", Content: "q"}}, Completion: &record.Completion{Reasoning: "r", Answer: "a", FinishReason: "stop"}},
	}
	for _, o := range []struct{ path, layout string }{{"out/sf.jsonl", trainrow.SpecForge}, {"out/conv.jsonl", trainrow.Conversations}} {
		os.MkdirAll(filepath.Join(dir, "out"), 0o755)
		l, err := commitlog.Open(filepath.Join(dir, o.path), recordline.ID)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rows {
			line, prob, err := trainrow.Encode(o.layout, trainrow.Rules{MaxLength: 8, Trainer: trainrow.TrainerDFlash}, r)
			if err != nil || prob != nil {
				t.Fatal(err, prob)
			}
			l.Append(r.ID, line)
		}
		l.Commit()
		l.Close()
	}
	written, err := writeHandoffs(context.Background(), plan)
	if err == nil || !strings.Contains(err.Error(), filepath.Join(dir, "train", "sf.specforge.yaml")+": not written: it would be inside "+filepath.Join(dir, "train")) {
		t.Errorf("the block inside a write-arrow directory: %v", err)
	}
	want := []string{filepath.Join(dir, "out", "sf.specforge.yaml"), filepath.Join(dir, "out", "conv.specforge.yaml")}
	if strings.Join(written, " ") != strings.Join(want, " ") {
		t.Fatalf("written %v, want %v", written, want)
	}
	for i, p := range written {
		text, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s:\n%s", p, text)
		if errs := trainers.CheckSpecForgeConfigYAML(text); errs != nil {
			t.Errorf("%s fails SpecForge's schema: %v\n%s", p, errs, text)
		}
		wantLines := []string{"  max_length: 8\n", "  chat_template: qwen3.5\n"}
		if i == 0 {
			// 2 rows of 8 and 3 tokens, 6 ids above 256: 2×600 + 11×16 + 6×32.
			wantLines = append(wantLines, "  prompts_path: "+filepath.Join(dir, "out", "sf.jsonl")+"\n",
				"# (specforge/data/prompt_builder.py _materialize_prompt_tasks): about 0.0 MiB for 2 rows of 11 tokens\n",
				"# (8 B a list slot, 32 B an int object above 256: 6 of the ids).")
		} else {
			wantLines = append(wantLines, "  train_data_path: "+filepath.Join(dir, "out", "conv.jsonl")+"\n", "  is_preformatted: false\n")
		}
		for _, w := range wantLines {
			if !strings.Contains(string(text), w) {
				t.Errorf("%s lacks %q:\n%s", p, w, text)
			}
		}
	}
	if got := trainrowMemory(2, 11, 6); got != 2*600+11*16+6*32 {
		t.Errorf("PromptsMemory %d", got)
	}
	// HF datasets, given the write-arrow directory, takes its shards only.
	if files, err := trainers.DataFiles(filepath.Join(dir, "train")); err == nil {
		for _, f := range files["train"] {
			if strings.HasSuffix(f, ".yaml") {
				t.Errorf("a handoff in the shard directory: %v", files)
			}
		}
	}
}

func trainrowMemory(rows, tokens, big int64) int64 { return trainrow.PromptsMemory(rows, tokens, big) }
