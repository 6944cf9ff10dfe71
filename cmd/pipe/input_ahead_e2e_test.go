//go:build e2e

package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pipe-dev/pipe/internal/testrig/testenv"
)

// A bad line at 99% of a 200,000-line input stops a real `pipe run` within
// 5 seconds of its start, with fewer than 2 × (servers × concurrency)
// generation requests sent (counted by the simulated servers), naming
// file:line; `pipe check --data` names the same line.
func TestBadLineNearTheEndStopsTheRunEarly(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: skipping a test with real processes")
	}
	const (
		lines       = 200_000
		badLine     = 198_000
		servers     = 2
		concurrency = 8
	)
	bin := testenv.PipeBinary(t)
	// Each request decodes for about 2.5 seconds, so a run that went on
	// would send a new wave of requests every 2.5 seconds. (At one second
	// a wave, a CI machine busy with other tests took longer than that to
	// validate the 20 MB ahead of the reader.)
	sim := testenv.StartSim(t, bin, servers, "--decode-tps", "16", "--max-running", "64")
	dir := t.TempDir()
	var b bytes.Buffer
	for i := 1; i <= lines; i++ {
		if i == badLine {
			fmt.Fprintf(&b, `{"id":"p%d","messages":[{"role":"user","content":"Question %d"}]`+"\n", i, i)
			continue
		}
		fmt.Fprintf(&b, `{"id":"p%d","messages":[{"role":"user","content":"Question %d: explain topic %d briefly."}]}`+"\n", i, i, i*7)
	}
	if err := os.WriteFile(filepath.Join(dir, "prompts.jsonl"), b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	urls, _ := json.Marshal(sim.URLs)
	file := filepath.Join(dir, "p.toml")
	src := fmt.Sprintf(`[pipeline]
name    = "ahead"
run_dir = "run"

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
servers           = %s
concurrency       = %d
api               = "chat"
max_output_tokens = 40

[[stage]]
id    = "out"
kind  = "write-jsonl"
input = ["gen", "gen.rejected"]
path  = "out/completions.jsonl"
`, urls, concurrency)
	if err := os.WriteFile(file, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	wantLine := fmt.Sprintf("prompts.jsonl:%d: invalid JSON: unexpected end of JSON input", badLine)

	var stderr bytes.Buffer
	cmd := exec.Command(bin, "run", file, "--progress", "1s")
	cmd.Dir = dir
	cmd.Stderr = &stderr
	start := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var err error
	select {
	case err = <-done:
	case <-time.After(60 * time.Second):
		cmd.Process.Kill()
		<-done
		t.Fatalf("the run did not stop within 60s:\n%s", stderr.String())
	}
	took := time.Since(start)
	sent := sim.Metric(t, "sglang:num_requests_total") + sim.Metric(t, "sglang:num_queue_reqs")
	t.Logf("stopped %s after start with %d requests sent (limit %d); stderr:\n%s", took.Round(time.Millisecond), sent, 2*servers*concurrency, stderr.String())
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != exitUsage { // bad data: running again meets the same line
		t.Fatalf("exit: %v, want %d", err, exitUsage)
	}
	if took > 5*time.Second {
		t.Errorf("the run took %s to stop, want within 5s", took)
	}
	if sent >= 2*servers*concurrency {
		t.Errorf("%d requests were sent, want fewer than %d", sent, 2*servers*concurrency)
	}
	if !strings.Contains(stderr.String(), "run failed: stage \"prompts\" (read-prompts): "+filepath.Join(dir, wantLine)) {
		t.Errorf("stderr does not name %s", wantLine)
	}
	// What was generated is committed: every completion the servers
	// finished is in the output (less the 1-token probe each server gets
	// when it is admitted, which the requests sent above count too).
	committed := 0
	if f, err := os.Open(filepath.Join(dir, "out", "completions.jsonl")); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			committed++
		}
		f.Close()
	}
	if finished := sim.Metric(t, "pipe_sim:completed_requests_total") - servers; int64(committed) < finished {
		t.Errorf("%d completions committed, but the servers finished %d", committed, finished)
	}

	check := exec.Command(bin, "check", "--data", file)
	check.Dir = dir
	var out bytes.Buffer
	check.Stdout = &out
	err = check.Run()
	if !errors.As(err, &ee) || ee.ExitCode() != exitFailed {
		t.Fatalf("pipe check --data: exit %v, want %d\n%s", err, exitFailed, out.String())
	}
	if !strings.Contains(out.String(), "\n    "+wantLine) {
		t.Fatalf("pipe check --data does not name %s:\n%s", wantLine, out.String())
	}
}
