//go:build e2e

package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pipe-dev/pipe/internal/testrig/testenv"
	"github.com/pipe-dev/pipe/pipeline/commitlog"
	"github.com/pipe-dev/pipe/pipeline/pipefile"
	"github.com/pipe-dev/pipe/pipeline/shardruns"
)

// slurmPipeline: prompts → dedupe → generate on an in-process pipe sim
// (the servers on the task's own node; about 10% empty answers) →
// validate → accepted and rejected JSONL outputs.
const slurmPipeline = `[pipeline]
name    = "arr"
run_dir = "runs/arr"

[[stage]]
id   = "prompts"
kind = "read-prompts"
path = "prompts.jsonl"

[[stage]]
id    = "todo"
kind  = "dedupe-against-progress"
input = "prompts"

[[stage]]
id          = "gen"
kind        = "generate"
input       = "todo"
servers     = ["sim:1?speed=4&think_mean=60&answer_mean=30&faults=empty-answer:0.1"]
concurrency = 8
max_output_tokens = 256

[[stage]]
id    = "check"
kind  = "validate-thinking"
input = "gen"

[[stage]]
id    = "train"
kind  = "write-jsonl"
input = "check.accepted"
path  = "out/train.jsonl"

[[stage]]
id    = "rejects"
kind  = "write-jsonl"
input = "check.rejected"
path  = "out/rejected.jsonl"
`

// Four shards of one prompt file run as a real Slurm job array
// (deploy/slurm/pipe-array.sbatch, sbatch --array=0-3) on a single-node
// cluster; array task 2 is requeued mid-run (Slurm sends SIGTERM, pipe
// commits and exits 130, the task runs again and resumes). After pipe
// merge, every input id is exactly once in the shards' outputs. Then the
// script's handling of pipe's exit codes 1 (requeued) and 2 (not).
func TestSlurmJobArray(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Slurm cluster and runs a job array; skipped with -short")
	}
	t0 := time.Now()
	sl := testenv.StartSlurm(t)
	t.Logf("Slurm cluster up in %.1fs", time.Since(t0).Seconds())
	bin := testenv.PipeBinary(t)
	t.Logf("pipe built at %.1fs", time.Since(t0).Seconds())
	script := filepath.Join(testenv.RepoRoot(t), "deploy", "slurm", "pipe-array.sbatch")
	dir := t.TempDir()
	const n = 400
	var prompts strings.Builder
	for i := range n {
		fmt.Fprintf(&prompts, `{"id":"p%04d","prompt":"question number %d"}`+"\n", i, i)
	}
	writeFile(t, filepath.Join(dir, "prompts.jsonl"), prompts.String())
	writeFile(t, filepath.Join(dir, "arr.toml"), slurmPipeline)
	logs := filepath.Join(dir, "logs")
	if err := os.Mkdir(logs, 0o755); err != nil {
		t.Fatal(err)
	}

	sub := sl.Command("sbatch", "--parsable", "--array=0-3", "--chdir="+dir, "--output="+logs+"/task-%a.log",
		"--export=ALL,PIPE="+bin, script, "arr.toml", "--commit-every", "1s", "--progress", "1s")
	out, err := sub.CombinedOutput()
	if err != nil {
		t.Fatalf("sbatch: %v\n%s", err, out)
	}
	jobID := strings.TrimSpace(string(out))
	start := time.Now()

	// Task 2 is requeued once its shard has generated some completions.
	shard2 := filepath.Join(dir, "runs", "arr", pipefile.Shard{Index: 2, Count: 4}.Name())
	waitUntil(t, 60*time.Second, "array task 2 to journal completions", func() bool {
		n := 0
		for _, seg := range commitlog.JournalFiles(filepath.Join(shard2, "journal"), "gen") {
			n += lines(seg)
		}
		return n >= 10
	})
	task2 := taskState(t, sl, "2")
	if task2["JobState"] != "RUNNING" {
		t.Fatalf("array task 2 is %s when requeued, want RUNNING", task2["JobState"])
	}
	if out, err := sl.Command("scontrol", "requeue", jobID+"_2").CombinedOutput(); err != nil {
		t.Fatalf("scontrol requeue %s_2: %v\n%s", jobID, err, out)
	}
	requeued := time.Now()

	waitUntil(t, 120*time.Second, "every array task to complete", func() bool {
		for i := range 4 {
			if taskState(t, sl, strconv.Itoa(i))["JobState"] != "COMPLETED" {
				return false
			}
		}
		return true
	})
	t.Logf("job array done %.1fs after sbatch (task 2 requeued at %.1fs)", time.Since(start).Seconds(), requeued.Sub(start).Seconds())
	for i := range 4 {
		j := taskState(t, sl, strconv.Itoa(i))
		wantRestarts := "0"
		if i == 2 {
			wantRestarts = "1"
		}
		if j["ExitCode"] != "0:0" || j["Restarts"] != wantRestarts {
			t.Errorf("array task %d: ExitCode %s, Restarts %s; want 0:0 and %s\n%s", i, j["ExitCode"], j["Restarts"], wantRestarts, readFile(t, filepath.Join(logs, fmt.Sprintf("task-%d.log", i))))
		}
	}

	// Task 2's log (--open-mode=append) holds both attempts: the first
	// stopped by the requeue's SIGTERM (exit 130) with its work committed,
	// the second resumed it.
	log2 := readFile(t, filepath.Join(logs, "task-2.log"))
	for _, want := range []string{
		"shard 2/4, attempt 1 on ",
		"pipe-array: shard 2/4: pipe run exited 130",
		"shard 2/4, attempt 2 on ",
		"pipe: resuming the run in ",
		"pipe-array: shard 2/4: pipe run exited 0",
	} {
		if !strings.Contains(log2, want) {
			t.Errorf("task 2's log lacks %q:\n%s", want, log2)
		}
	}
	if m := regexp.MustCompile(`finished ids in \S+: \d+ \((\d+) before this run`).FindAllStringSubmatch(log2, -1); len(m) != 2 || m[1][1] == "0" {
		t.Errorf("task 2: want its second attempt to start from ids the first finished; summaries: %v\n%s", m, log2)
	}

	merged := filepath.Join(dir, "merged")
	cmd := exec.Command(bin, "merge", "--out", merged, filepath.Join(dir, "runs", "arr", "shard-*"))
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("pipe merge: %v\n%s", err, out)
	}
	var m shardruns.Merged
	if err := json.Unmarshal([]byte(readFile(t, filepath.Join(merged, shardruns.MergedName))), &m); err != nil {
		t.Fatal(err)
	}
	if !m.Complete || m.Shards != 4 || len(m.Runs) != 4 {
		t.Fatalf("merged.json: complete %v, %d shards, %d runs", m.Complete, m.Shards, len(m.Runs))
	}
	seen := map[string]int{}
	for _, o := range m.Outputs {
		if len(o.Files) != 4 {
			t.Errorf("output %s: %d files, want one per shard", o.Stage, len(o.Files))
		}
		for _, f := range o.Files {
			for _, id := range committedIDs(t, f) {
				seen[id]++
			}
		}
	}
	for i := range n {
		id := fmt.Sprintf("p%04d", i)
		if seen[id] != 1 {
			t.Errorf("id %s is %d times in the shards' outputs, want exactly once", id, seen[id])
		}
		delete(seen, id)
	}
	if len(seen) > 0 {
		t.Errorf("ids in the outputs that are not in the input: %v", seen)
	}

	// The script's exit-code policy, on the same cluster, with a stand-in
	// for pipe that exits as told: 1 is requeued up to MAX_RESTARTS, 2 never.
	fake := filepath.Join(dir, "fake-pipe")
	writeFile(t, fake, "#!/bin/sh\necho \"fake pipe $*\"\nexit $((SLURM_ARRAY_TASK_ID + 1))\n")
	if err := os.Chmod(fake, 0o755); err != nil {
		t.Fatal(err)
	}
	sub = sl.Command("sbatch", "--parsable", "--array=0-1", "--chdir="+dir, "--output="+logs+"/codes-%a.log",
		"--export=ALL,PIPE="+fake+",MAX_RESTARTS=1", script, "arr.toml")
	if out, err := sub.CombinedOutput(); err != nil {
		t.Fatalf("sbatch: %v\n%s", err, out)
	}
	codes := func() (testenv.Job, testenv.Job) {
		var j1, j2 testenv.Job
		jobs, err := sl.Jobs()
		if err != nil {
			t.Fatal(err)
		}
		for _, j := range jobs {
			if strings.Contains(j["StdOut"], "/codes-") {
				switch j["ArrayTaskId"] {
				case "0":
					j1 = j
				case "1":
					j2 = j
				}
			}
		}
		return j1, j2
	}
	waitUntil(t, 60*time.Second, "the exit-code tasks to fail for good", func() bool {
		j1, j2 := codes()
		return j1["JobState"] == "FAILED" && j2["JobState"] == "FAILED"
	})
	j1, j2 := codes()
	if j1["ExitCode"] != "1:0" || j1["Restarts"] != "1" {
		t.Errorf("pipe exiting 1: ExitCode %s, Restarts %s; want 1:0 after 1 restart (MAX_RESTARTS=1)\n%s", j1["ExitCode"], j1["Restarts"], readFile(t, filepath.Join(logs, "codes-0.log")))
	}
	if j2["ExitCode"] != "2:0" || j2["Restarts"] != "0" {
		t.Errorf("pipe exiting 2: ExitCode %s, Restarts %s; want 2:0, never requeued\n%s", j2["ExitCode"], j2["Restarts"], readFile(t, filepath.Join(logs, "codes-1.log")))
	}
}

// taskState is array task i's job record.
func taskState(t *testing.T, sl *testenv.Slurm, i string) testenv.Job {
	t.Helper()
	jobs, err := sl.Jobs()
	if err != nil {
		t.Fatal(err)
	}
	for _, j := range jobs {
		if j["ArrayTaskId"] == i {
			return j
		}
	}
	return testenv.Job{}
}

// committedIDs reads the ids of a merged JSONL file's committed part.
func committedIDs(t *testing.T, f shardruns.File) []string {
	t.Helper()
	fh, err := os.Open(f.Path)
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	var ids []string
	sc := bufio.NewScanner(io.LimitReader(fh, f.Bytes))
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		var rec struct{ ID string }
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
			t.Fatalf("%s: %v", f.Path, err)
		}
		ids = append(ids, rec.ID)
	}
	if int64(len(ids)) != f.Rows {
		t.Errorf("%s: %d committed lines, merged.json says %d", f.Path, len(ids), f.Rows)
	}
	return ids
}

func lines(path string) int {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	return strings.Count(string(b), "\n")
}

func waitUntil(t *testing.T, limit time.Duration, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("waited %s for %s", limit, what)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
