package main

import (
	"encoding/json"
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pipe-dev/pipe/pipeline"
	"github.com/pipe-dev/pipe/pipeline/rundir"
	"github.com/pipe-dev/pipe/stages/trainrow"
)

// pipe export takes the trainer's rules from the runs' [trainer], and
// refuses to put into one file runs made for different trainers or with
// different chat templates (the digest run.json records beside the
// tokenizer): one trainer labels its rows by one template.
func TestExportRulesFromRuns(t *testing.T) {
	dir := t.TempDir()
	run := func(name, digest string, tr *rundir.Trainer) string {
		d := filepath.Join(dir, name)
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		r := rundir.Run{Settings: map[string]any{"tok": map[string]any{"kind": "tokenize-and-mask", "tokenizer": "/m",
			"tokenizer" + pipeline.TemplateDigestSuffix: digest}}, Trainer: tr}
		b, _ := json.Marshal(r)
		if err := os.WriteFile(filepath.Join(d, rundir.RunFile), b, 0o644); err != nil {
			t.Fatal(err)
		}
		return d
	}
	dflash := &rundir.Trainer{Name: "specforge", Method: "dflash", MaxLength: 4096, ChatTemplate: "qwen3.5"}
	a := run("a", strings.Repeat("a", 64), dflash)
	b := run("b", strings.Repeat("a", 64), dflash)
	c := run("c", strings.Repeat("c", 64), dflash)
	eagle := *dflash
	eagle.Method = "eagle3"
	d := run("d", strings.Repeat("a", 64), &eagle)

	rules := func(args ...string) (trainrow.Rules, error) {
		r := trainrow.Rules{MaxLength: 0, Trainer: trainrow.TrainerEAGLE3}
		return r, rulesFromRuns(flag.NewFlagSet("export", flag.ContinueOnError), &r, args, io.Discard)
	}
	if r, err := rules(a, b); err != nil || r.MaxLength != 4096 || r.Trainer != "dflash" {
		t.Errorf("same trainer and template: %+v, %v; want dflash 4096", r, err)
	}
	if _, err := rules(a, c); err == nil || !strings.Contains(err.Error(), "different chat templates (aaaaaaaaaaaa against cccccccccccc)") {
		t.Errorf("different templates: %v", err)
	}
	if _, err := rules(a, d); err == nil || !strings.Contains(err.Error(), "different trainers") {
		t.Errorf("different trainers: %v", err)
	}
}
