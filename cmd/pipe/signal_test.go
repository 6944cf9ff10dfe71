package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// syncBuffer is a bytes.Buffer safe for the run's goroutines and the test.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// genPipelineFile writes read-prompts (the demo prompts) → generate with
// genKeys → write-jsonl of both generate ports, and returns the file and
// the output path.
func genPipelineFile(t *testing.T, genKeys string) (path, out string) {
	t.Helper()
	dir := t.TempDir()
	prompts, err := filepath.Abs("../../testdata/prompts/demo.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	out = filepath.Join(dir, "out.jsonl")
	src := fmt.Sprintf(`
[pipeline]
run_dir = "run"

[[stage]]
id   = "prompts"
kind = "read-prompts"
path = %q

[[stage]]
id    = "gen"
kind  = "generate"
input = "prompts"
%s

[[stage]]
id    = "out"
kind  = "write-jsonl"
input = ["gen", "gen.rejected"]
path  = %q
`, prompts, genKeys, out)
	path = filepath.Join(dir, "p.toml")
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	return path, out
}

// slowPipeline's generation takes a few seconds: one simulated server, four
// requests in flight.
func slowPipeline(t *testing.T) (path, out string) {
	return genPipelineFile(t, "servers = [\"sim:1?speed=20\"]\nconcurrency = 4\nmax_output_tokens = 4096")
}

// startRun runs `pipe run` in-process and returns once generation has
// produced its first completions.
func startRun(t *testing.T, path string) (sigs chan os.Signal, stderr *syncBuffer, code chan int) {
	sigs = make(chan os.Signal, 2)
	stderr = &syncBuffer{}
	code = make(chan int, 1)
	go func() {
		code <- run([]string{"run", "--progress", "20ms", path}, &stdio{Out: &bytes.Buffer{}, Err: stderr, Signals: sigs})
	}()
	deadline := time.Now().Add(60 * time.Second)
	for !strings.Contains(stderr.String(), " gen 1") && !strings.Contains(stderr.String(), " gen 2") {
		if time.Now().After(deadline) {
			t.Fatalf("no completion within 60s:\n%s", stderr.String())
		}
		time.Sleep(10 * time.Millisecond) // polling for a condition, not timing
	}
	return sigs, stderr, code
}

// The first interrupt stops intake, lets requests in flight finish, commits
// the output and exits 130 with a resume hint.
func TestFirstInterruptDrainsAndCommits(t *testing.T) {
	defer goleak.VerifyNone(t)
	path, out := slowPipeline(t)
	sigs, stderr, code := startRun(t, path)
	sigs <- syscall.SIGINT
	var c int
	select {
	case c = <-code:
	case <-time.After(60 * time.Second):
		t.Fatal("run did not drain within 60s")
	}
	if c != exitInterrupted {
		t.Fatalf("exit %d, want %d\n%s", c, exitInterrupted, stderr)
	}
	log := stderr.String()
	for _, want := range []string{"stopping intake and draining", "interrupted (in-flight requests finished and everything was committed). To continue where it stopped: pipe run --progress 20ms "} {
		if !strings.Contains(log, want) {
			t.Fatalf("stderr lacks %q:\n%s", want, log)
		}
	}
	recs := readRecords(t, out)
	if len(recs) == 0 || len(recs) >= 122 {
		t.Fatalf("committed %d records; want some but not all 122", len(recs))
	}
	// Every record generation took in was finished and committed: the
	// summary balances for gen and out.
	for _, line := range strings.Split(log, "\n") {
		f := strings.Fields(line)
		if len(f) >= 8 && (f[0] == "gen" || f[0] == "out") && f[7] != "yes" {
			t.Fatalf("stage %s unbalanced after drain: %s", f[0], line)
		}
	}
}

// A second interrupt stops at once: the run returns promptly, still with 130,
// and what reached the writer is committed.
func TestSecondInterruptStopsAtOnce(t *testing.T) {
	defer goleak.VerifyNone(t)
	path, out := slowPipeline(t)
	sigs, stderr, code := startRun(t, path)
	sigs <- syscall.SIGINT
	sigs <- syscall.SIGINT
	select {
	case c := <-code:
		if c != exitInterrupted {
			t.Fatalf("exit %d, want %d\n%s", c, exitInterrupted, stderr)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("run did not stop within 15s of the second interrupt")
	}
	if !strings.Contains(stderr.String(), "stopped at once") {
		t.Fatalf("stderr:\n%s", stderr)
	}
	if _, err := os.Stat(out); err != nil {
		t.Fatalf("output not committed: %v", err)
	}
}

// Ctrl-C while generate waits for servers to become ready ends the wait at
// once (exit 130) instead of after ready_timeout.
func TestInterruptWhileWaitingForServers(t *testing.T) {
	defer goleak.VerifyNone(t)
	path, _ := genPipelineFile(t, "servers = [\"http://127.0.0.1:1\"]\nmax_output_tokens = 64\nready_timeout = \"10m\"")
	sigs := make(chan os.Signal, 1)
	stderr := &syncBuffer{}
	code := make(chan int, 1)
	go func() {
		code <- run([]string{"run", path}, &stdio{Out: &bytes.Buffer{}, Err: stderr, Signals: sigs})
	}()
	for !strings.Contains(stderr.String(), "pipe: running") {
		time.Sleep(5 * time.Millisecond) // polling for a condition, not timing
	}
	sigs <- syscall.SIGINT
	select {
	case c := <-code:
		if c != exitInterrupted {
			t.Fatalf("exit %d, want %d\n%s", c, exitInterrupted, stderr)
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("still waiting for servers 20s after Ctrl-C\n%s", stderr)
	}
}
