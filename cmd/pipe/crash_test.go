package main

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/pipe-dev/pipe/internal/testrig/testenv"
	"github.com/pipe-dev/pipe/pipeline/commitlog"
	"github.com/pipe-dev/pipe/pipeline/filecommit"
	"github.com/pipe-dev/pipe/stages/arrowrow"
)

// crashRig is the full demo graph as real processes: `pipe sim` serving
// simulated servers that count and sample with the real Qwen3 tokenizer (with
// injected 503s, connection resets and empty answers), and `pipe run`
// processes started, killed and started again on one run directory.
type crashRig struct {
	t       *testing.T
	bin     string
	dir     string
	file    string // the pipeline file
	prompts int
	sim     *testenv.Sim
	log     *os.File // every run's stdout and stderr
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[len(s)-n:]
}

// start starts `pipe run FILE` (the same command every time) in its own
// process group, as a user's shell would.
func (r *crashRig) start(extra ...string) *exec.Cmd {
	r.t.Helper()
	args := append([]string{"run", r.file, "--commit-every", "300ms", "--progress", "1s"}, extra...)
	cmd := exec.Command(r.bin, args...)
	cmd.Dir = r.dir
	cmd.Stdout, cmd.Stderr = r.log, r.log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	fmt.Fprintf(r.log, "\n=== pipe %s\n", strings.Join(args, " "))
	if err := cmd.Start(); err != nil {
		r.t.Fatal(err)
	}
	return cmd
}

// inFlight is the generation requests the servers hold now.
func (r *crashRig) inFlight() int64 {
	return r.sim.Metric(r.t, "sglang:num_running_reqs") + r.sim.Metric(r.t, "sglang:num_queue_reqs")
}

// finish runs the same command to the end and requires exit 0.
func (r *crashRig) finish() {
	r.t.Helper()
	if err := r.wait(r.start(), 4*time.Minute); err != nil {
		r.t.Fatalf("the final run: %v", err)
	}
}

// wait waits for a run to exit and returns its error (nil for exit 0).
func (r *crashRig) wait(cmd *exec.Cmd, limit time.Duration) error {
	r.t.Helper()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		return err
	case <-time.After(limit):
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-done
		r.t.Fatalf("the run did not exit within %s", limit)
		return nil
	}
}

// readJSONL decodes every line of a JSONL file: a torn or unreadable line
// fails the test. A missing file has no records.
func readJSONL(t *testing.T, path string) []map[string]any {
	t.Helper()
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []map[string]any
	br := bufio.NewReaderSize(f, 1<<20)
	for n := 1; ; n++ {
		line, err := br.ReadBytes('\n')
		if len(line) > 0 {
			if line[len(line)-1] != '\n' {
				t.Fatalf("%s:%d: torn last line (no newline): %.80q", path, n, line)
			}
			var rec map[string]any
			if err := json.Unmarshal(line, &rec); err != nil {
				t.Fatalf("%s:%d: unreadable: %v", path, n, err)
			}
			out = append(out, rec)
		}
		if err != nil {
			return out
		}
	}
}

// journalLines counts the completions the generation journal kept: the
// whole lines of its segments, plus the finished ids (done.ids), whose
// segments may be deleted. It fails the test if an id is in the journal
// twice: a completion journaled once is never generated again.
func (r *crashRig) journalLines() int64 {
	r.t.Helper()
	kept := map[uint64]bool{}
	done, err := commitlog.ReadIDLog(filepath.Join(r.dir, "run", "done.ids"))
	if err != nil {
		r.t.Fatal(err)
	}
	for _, h := range done {
		kept[h] = true
	}
	seen := map[string]bool{}
	for _, path := range commitlog.JournalFiles(filepath.Join(r.dir, "run", "journal"), "gen") {
		data, err := os.ReadFile(path)
		if errors.Is(err, os.ErrNotExist) {
			continue // deleted since it was listed
		}
		if err != nil {
			r.t.Fatal(err)
		}
		for _, line := range strings.SplitAfter(string(data), "\n") {
			if !strings.HasSuffix(line, "\n") {
				break // a torn last line: cut by the next run
			}
			var e struct {
				Record struct{ ID string } `json:"record"`
			}
			if err := json.Unmarshal([]byte(line), &e); err != nil {
				break // the next run cuts it too
			}
			if seen[e.Record.ID] {
				r.t.Fatalf("id %s is in the generation journal twice: it was generated again", e.Record.ID)
			}
			seen[e.Record.ID] = true
			kept[commitlog.Hash(e.Record.ID)] = true
		}
	}
	return int64(len(kept))
}

// afterKill accounts for the answers of one run: each was journaled, or
// was lost in the kill; a kill may lose at most the requests in flight
// (servers × concurrency) and each server's 1-token readiness probe.
func (r *crashRig) afterKill(a *lossAudit, k int) {
	r.t.Helper()
	c, j := r.sim.Metric(r.t, "pipe_sim:completed_requests_total"), r.journalLines()
	lost := (c - a.completed) - (j - a.journaled)
	capacity := int64(len(r.sim.URLs) * (32 + 1))
	if lost > capacity {
		r.t.Fatalf("kill %d: servers answered %d requests, the journal kept %d: %d lost, more than the %d that can be in flight",
			k, c-a.completed, j-a.journaled, lost, capacity)
	}
	a.completed, a.journaled, a.lost = c, j, a.lost+lost
}

// check verifies the end state: every prompt id is exactly once across the
// accepted and rejected outputs (and the run directory's failed records),
// every generated id exactly once in the completions output, nothing torn.
func (r *crashRig) check() {
	t := r.t
	t.Helper()
	count := func(files ...string) map[string]int {
		n := map[string]int{}
		for _, f := range files {
			for _, rec := range readJSONL(t, f) {
				n[rec["id"].(string)]++
			}
		}
		return n
	}
	out := filepath.Join(r.dir, "out")
	failed, _ := filepath.Glob(filepath.Join(r.dir, "run", "failed", "*.jsonl"))
	dead, _ := filepath.Glob(filepath.Join(r.dir, "run", "rejected", "*.jsonl"))
	final := count(append(append([]string{filepath.Join(out, "train.jsonl"), filepath.Join(out, "rejected.jsonl")}, failed...), dead...)...)
	for i := range r.prompts {
		id := fmt.Sprintf("p%d", i)
		if final[id] != 1 {
			t.Fatalf("id %s is in the accepted, rejected and failed outputs %d times, want exactly once", id, final[id])
		}
	}
	if len(final) != r.prompts {
		t.Fatalf("%d distinct ids in the outputs, want %d", len(final), r.prompts)
	}
	comps := shardIDs(t, filepath.Join(out, "completions"))
	for id, n := range comps {
		if n != 1 {
			t.Fatalf("id %s is in the completions shards %d times", id, n)
		}
	}
	if len(comps)+len(failed) < r.prompts*9/10 {
		t.Fatalf("completions.jsonl has %d ids of %d prompts", len(comps), r.prompts)
	}
}

// shardIDs counts the ids in the shards a write-arrow directory's manifest
// names, checking each shard's size and sha256 against the manifest, and
// that no other part file is there.
func shardIDs(t *testing.T, dir string) map[string]int {
	t.Helper()
	m, err := filecommit.ReadManifest(dir)
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string]int{}
	if m == nil {
		return ids
	}
	named := map[string]bool{}
	var rows int64
	for _, sh := range m.Shards {
		named[sh.Name] = true
		path := filepath.Join(dir, sh.Name)
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if sum := sha256.Sum256(data); int64(len(data)) != sh.Bytes || hex.EncodeToString(sum[:]) != sh.SHA256 {
			t.Fatalf("%s: %d bytes, sha256 %x; the manifest says %d bytes, %s", path, len(data), sum, sh.Bytes, sh.SHA256)
		}
		n := 0
		err = arrowrow.ReadFile(context.Background(), path, memory.DefaultAllocator, func(b arrow.RecordBatch) error {
			recs, err := arrowrow.Records(b)
			for _, r := range recs {
				ids[r.ID]++
				n++
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		if int64(n) != sh.Rows {
			t.Fatalf("%s has %d rows; the manifest says %d", path, n, sh.Rows)
		}
		rows += sh.Rows
	}
	if rows != m.Rows {
		t.Fatalf("%s: the manifest's shards hold %d rows, its total says %d", dir, rows, m.Rows)
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), "part-") && !named[e.Name()] {
			t.Fatalf("%s: %s is not in the manifest", dir, e.Name())
		}
	}
	return ids
}

// lossAudit follows what the servers answered and what the journal kept
// across kills.
type lossAudit struct {
	completed, journaled int64 // at the last look
	lost                 int64
}
