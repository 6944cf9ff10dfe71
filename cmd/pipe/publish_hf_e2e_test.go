//go:build e2e

package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"sigs.k8s.io/yaml"

	"github.com/pipe-dev/pipe/internal/testrig/hubtest"
	"github.com/pipe-dev/pipe/internal/testrig/testenv"
	"github.com/pipe-dev/pipe/internal/testrig/trainers"
	"github.com/pipe-dev/pipe/stages/arrowrow"
)

const publishToken = "hf_e2etokenpublish0123456789abcdefXY"

// pipe run generates, tokenizes, writes Parquet shards and publishes
// them to a local Hub with the card the run writes: exit 0 only with
// every shard and the card on the branch. Downloaded as it lies, the
// repository is what datasets' load_dataset takes — every row once — and
// the card's YAML names the split and its rows. The token is in no file
// the run wrote, no output line, and not in what it published.
func TestRunPublishesToTheHubWithItsCard(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: real processes")
	}
	bin, qwen := testenv.PipeBinary(t), testenv.Qwen3Dir(t)
	hub := hubtest.New(t)
	hub.AddToken(publishToken, true)
	dir := t.TempDir()
	var prompts strings.Builder
	for i := range 400 {
		fmt.Fprintf(&prompts, "{\"id\":\"p%04d\",\"prompt\":\"Question %d: explain topic %d with an example.\"}\n", i, i, i*7)
	}
	write := func(name, content string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("prompts.jsonl", prompts.String())
	write("p.toml", fmt.Sprintf(`[pipeline]
name    = "publish"
run_dir = "run"

[trainer]
name       = "specforge"
method     = "dflash"
max_length = 4096

[[stage]]
id   = "prompts"
kind = "read-prompts"
path = "prompts.jsonl"

[[stage]]
id    = "todo"
kind  = "dedupe-against-progress"
input = "prompts"

[[stage]]
id                = "gen"
kind              = "generate"
input             = "todo"
servers           = ["sim:2?speed=300&faults=empty-answer:0.05"]
concurrency       = 16
api               = "generate"
tokenizer         = %[1]q
max_output_tokens = 8192

[[stage]]
id        = "check"
kind      = "validate-thinking"
input     = "gen"
tokenizer = %[1]q

[[stage]]
id        = "tok"
kind      = "tokenize-and-mask"
input     = "check.accepted"
tokenizer = %[1]q

[[stage]]
id       = "train"
kind     = "write-arrow"
input    = "tok"
path     = "run/train"
format   = "parquet"
max_rows = 40

[[stage]]
id               = "hub"
kind             = "upload-hf"
input            = "train.shards"
repo             = "org/regen-qwen3"
endpoint         = %[2]q
files_per_commit = 4

[[stage]]
id    = "rejects"
kind  = "write-jsonl"
input = ["check.rejected", "tok.rejected"]
path  = "run/rejected.jsonl"
`, qwen, hub.URL))
	cmd := exec.Command(bin, "run", "p.toml")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "HF_TOKEN="+publishToken)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("pipe run: %v\n%s", err, tail(string(out), 4000))
	}
	if !strings.Contains(string(out), "dataset card published") || !strings.Contains(string(out), "org/regen-qwen3@main") {
		t.Fatalf("the run did not say it published:\n%s", tail(string(out), 3000))
	}

	// The repository as it lies: the loader's files, every row once.
	got := t.TempDir()
	hub.Download(t, "org/regen-qwen3", "main", got)
	splits, err := trainers.DataFiles(got)
	if err != nil || len(splits) != 1 || len(splits["train"]) == 0 {
		t.Fatalf("load_dataset's files: %v %v", splits, err)
	}
	ids := map[string]int{}
	for _, f := range splits["train"] {
		if err := arrowrow.EachID(context.Background(), filepath.Join(got, f), memory.DefaultAllocator, func(id string) { ids[id]++ }); err != nil {
			t.Fatal(err)
		}
	}
	local := readIDsOfShards(t, filepath.Join(dir, "run/train"))
	if len(ids) != len(local) || len(local) < 300 {
		t.Fatalf("%d ids on the Hub, %d in the local shards", len(ids), len(local))
	}
	for id, n := range ids {
		if n != 1 || !local[id] {
			t.Fatalf("id %s is on the Hub %d times (local: %v)", id, n, local[id])
		}
	}

	// The card: YAML the Hub reads, naming the split and its rows.
	readme, err := os.ReadFile(filepath.Join(got, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("README.md as published:\n%s", readme)
	parts := strings.SplitN(string(readme), "---\n", 3)
	if len(parts) != 3 || parts[0] != "" {
		t.Fatalf("README.md has no YAML header:\n%s", readme)
	}
	var header struct {
		Configs []struct {
			DataFiles []struct{ Split, Path string } `json:"data_files"`
		}
		DatasetInfo struct {
			Features []map[string]any
			Splits   []struct {
				Name        string
				NumExamples int `json:"num_examples"`
			}
		} `json:"dataset_info"`
		SizeCategories []string `json:"size_categories"`
	}
	if err := yaml.Unmarshal([]byte(parts[1]), &header); err != nil {
		t.Fatalf("the card's YAML: %v\n%s", err, parts[1])
	}
	if len(header.DatasetInfo.Splits) != 1 || header.DatasetInfo.Splits[0].Name != "train" || header.DatasetInfo.Splits[0].NumExamples != len(local) ||
		len(header.Configs) != 1 || header.Configs[0].DataFiles[0].Path != "data/train-*" || len(header.DatasetInfo.Features) == 0 {
		t.Fatalf("the card's header: %+v", header)
	}
	for _, want := range []string{"load_dataset(\"org/regen-qwen3\", split=\"train\")", "specforge dflash, max_length 4096", "model, as the servers named it", "model revision", "sampling sent", "max_new_tokens", "gen.max_output_tokens", "decoded tokens per trained token", "rejected"} {
		if !bytes.Contains(readme, []byte(want)) {
			t.Errorf("the card does not say %q:\n%s", want, readme)
		}
	}

	// No token anywhere it could leak.
	if bytes.Contains(out, []byte(publishToken)) {
		t.Fatal("the run printed the token")
	}
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if b, _ := os.ReadFile(p); bytes.Contains(b, []byte(publishToken)) {
				t.Errorf("%s holds the token", p)
			}
		}
		return nil
	})
	for p, b := range hub.Files("org/regen-qwen3", "main") {
		if bytes.Contains(b, []byte(publishToken)) {
			t.Errorf("the published %s holds the token", p)
		}
	}

	// pipe verify checks the published set the same way.
	vcmd := exec.Command(bin, "verify", "p.toml")
	vcmd.Dir = dir
	vcmd.Env = append(os.Environ(), "HF_TOKEN="+publishToken)
	if vout, err := vcmd.CombinedOutput(); err != nil || !strings.Contains(string(vout), "org/regen-qwen3@main") {
		t.Fatalf("pipe verify: %v\n%s", err, vout)
	}
}

// readIDsOfShards is every row id of a shard directory's Parquet files.
func readIDsOfShards(t *testing.T, dir string) map[string]bool {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(dir, "*.parquet"))
	ids := map[string]bool{}
	for _, f := range files {
		if err := arrowrow.EachID(context.Background(), f, memory.DefaultAllocator, func(id string) { ids[id] = true }); err != nil {
			t.Fatal(err)
		}
	}
	return ids
}
