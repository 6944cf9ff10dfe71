package pipefile_test

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/pipe-dev/pipe/pipeline/commitlog"
	"github.com/pipe-dev/pipe/pipeline/pipefile"
)

// balanceIDs are n ids of one of the two kinds runs have: given ones
// (sequential names) and read-prompts' content hashes ("sha256:" + 32 hex).
func balanceIDs(kind string, n int) []string {
	out := make([]string, n)
	for i := range out {
		switch kind {
		case "given":
			out[i] = fmt.Sprintf("prompt-%07d", i)
		default:
			sum := sha256.Sum256([]byte(fmt.Sprint("conversation ", i)))
			out[i] = "sha256:" + hex.EncodeToString(sum[:16])
		}
	}
	return out
}

// A shard depends only on the id and N: the same in every run, on every
// machine and whatever the input order. The pinned values guard the
// layout of existing runs: changing ShardOf would split a running job's
// ids differently between its shards.
func TestShardOfIsStable(t *testing.T) {
	pinned := []struct {
		id   string
		n, i int
	}{
		{"a", 16, 0}, {"b", 16, 3}, {"prompt-0000042", 16, 7},
		{"sha256:00112233445566778899aabbccddeeff", 16, 8}, {"", 16, 15}, {"a", 3, 0}, {"a", 1, 0},
	}
	for _, p := range pinned {
		if got := pipefile.ShardOf(p.id, p.n); got != p.i {
			t.Errorf("ShardOf(%q, %d) = %d, pinned %d", p.id, p.n, got, p.i)
		}
	}
	ids := balanceIDs("given", 100_000)
	want := map[string]int{}
	for _, id := range ids {
		want[id] = pipefile.ShardOf(id, 16)
	}
	rand.New(rand.NewPCG(1, 2)).Shuffle(len(ids), func(i, j int) { ids[i], ids[j] = ids[j], ids[i] })
	for _, id := range ids {
		if got := pipefile.ShardOf(id, 16); got != want[id] {
			t.Fatalf("ShardOf(%q) = %d after shuffling the input, %d before", id, got, want[id])
		}
	}
}

// Shard choice is independent of done.ids' hash (FNV-1a): in every one of
// that hash's buckets (its top bits), a shard holds its 1/N share.
func TestShardIndependentOfDoneHash(t *testing.T) {
	ids := balanceIDs("given", 200_000)
	var inBucket, inShard [16]int
	for _, id := range ids {
		b := commitlog.Hash(id) >> 60
		inBucket[b]++
		if pipefile.ShardOf(id, 16) == 5 {
			inShard[b]++
		}
	}
	for b := range inBucket {
		want := float64(inBucket[b]) / 16
		if dev := (float64(inShard[b]) - want) / want; dev > 0.15 || dev < -0.15 {
			t.Errorf("done.ids bucket %d: shard 5 holds %d of its %d ids (%.0f%% off 1/16)", b, inShard[b], inBucket[b], 100*dev)
		}
	}
}

func TestParseShard(t *testing.T) {
	for _, tc := range []struct{ in, want, err string }{
		{"3/16", "3/16", ""},
		{" 0 / 1 ", "0/1", ""},
		{"15/16", "15/16", ""},
		{"16/16", "", `shard index must be 0..15 (counted from 0) for 16 shards, got 16 in "16/16"`},
		{"-1/4", "", `shard index must be 0..3 (counted from 0) for 4 shards, got -1 in "-1/4"`},
		{"1/0", "", `shard count must be 1..9999, got 0 in "1/0"`},
		{"/16", "", `shard must be "I/N" (shard I of N, counted from 0, e.g. "3/16"), got "/16"`},
		{"3", "", `shard must be "I/N" (shard I of N, counted from 0, e.g. "3/16"), got "3"`},
	} {
		s, err := pipefile.ParseShard(tc.in)
		switch {
		case tc.err != "" && (err == nil || err.Error() != tc.err):
			t.Errorf("ParseShard(%q) error = %v, want %s", tc.in, err, tc.err)
		case tc.err == "" && (err != nil || s.String() != tc.want):
			t.Errorf("ParseShard(%q) = %v, %v; want %s", tc.in, s, err, tc.want)
		}
	}
	if got := (pipefile.Shard{Index: 3, Count: 16}).Name(); got != "shard-0003-of-0016" {
		t.Errorf("Name = %q", got)
	}
}

// [pipeline] shard reads the environment (as a Slurm array task or a
// Kubernetes indexed pod sets it); ${shard} is usable anywhere; the run
// directory gets the shard's name unless it has it; --shard wins.
func TestShardInPipelineFile(t *testing.T) {
	env := func(vals map[string]string) func(string) (string, bool) {
		return func(k string) (string, bool) { v, ok := vals[k]; return v, ok }
	}
	src := `[pipeline]
run_dir = "runs/x"
shard = "${env:SLURM_ARRAY_TASK_ID}/16"
[vars]
tag = "part ${shard}"
`
	f, probs := pipefile.Parse("/p/a.toml", []byte(src), pipefile.Options{Getenv: env(map[string]string{"SLURM_ARRAY_TASK_ID": "3"})})
	if len(probs) > 0 {
		t.Fatal(probs)
	}
	if f.Shard == nil || *f.Shard != (pipefile.Shard{Index: 3, Count: 16}) {
		t.Fatalf("Shard = %v, want 3/16", f.Shard)
	}
	if f.RunDir != "/p/runs/x/shard-0003-of-0016" {
		t.Errorf("RunDir = %s", f.RunDir)
	}
	if f.Vars["tag"] != "part shard-0003-of-0016" {
		t.Errorf("${shard} in [vars] = %q", f.Vars["tag"])
	}

	own := strings.Replace(src, `"runs/x"`, `"runs/x-${shard}"`, 1)
	f, _ = pipefile.Parse("/p/a.toml", []byte(own), pipefile.Options{Getenv: env(map[string]string{"SLURM_ARRAY_TASK_ID": "3"}), Shard: "1/2"})
	if f.RunDir != "/p/runs/x-shard-0001-of-0002" {
		t.Errorf("with ${shard} in run_dir and --shard 1/2: RunDir = %s", f.RunDir)
	}

	_, probs = pipefile.Parse("/p/a.toml", []byte(src), pipefile.Options{Getenv: env(map[string]string{"SLURM_ARRAY_TASK_ID": "16"})})
	if got := probs.Error(); !strings.Contains(got, `/p/a.toml:3:1: [pipeline]: shard index must be 0..15 (counted from 0) for 16 shards, got 16 in "16/16"`) {
		t.Errorf("out-of-range index: %s", got)
	}
	_, probs = pipefile.Parse("/p/a.toml", []byte(src), pipefile.Options{Getenv: env(nil)})
	if got := probs.Error(); !strings.Contains(got, `/p/a.toml:3:1: [pipeline]: shard: environment variable SLURM_ARRAY_TASK_ID is not set`) {
		t.Errorf("unset variable: %s", got)
	}
}

func BenchmarkShardOf(b *testing.B) {
	ids := balanceIDs("content", 1024)
	b.Run("ShardOf", func(b *testing.B) {
		for i := 0; b.Loop(); i++ {
			pipefile.ShardOf(ids[i&1023], 16)
		}
	})
	b.Run("reference=commitlog.Hash", func(b *testing.B) {
		for i := 0; b.Loop(); i++ {
			commitlog.Hash(ids[i&1023])
		}
	})
}
