//go:build e2e

package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"

	"github.com/pipe-dev/pipe/internal/testrig/testenv"
)

// On a terminal, pipe run draws the live display (mpb): the input read of
// its size, each stage, the fleet's tokens/s and each server's state; a
// notice appears above it, and the last frame stays above the summary.
func TestLiveDisplayOnTerminal(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: a real process on a pseudo-terminal")
	}
	t.Parallel() // a process of its own: waits on simulated time, not CPU
	bin := testenv.PipeBinary(t)
	// Slow enough (about 5 s) for several frames on a fast machine: the
	// display redraws once a second.
	path, out := genPipelineFile(t, "servers = [\"sim:2?speed=8&think_mean=200&answer_mean=40&faults=empty-answer:0.5\"]\nconcurrency = 8\nmax_output_tokens = 4096")
	cmd := exec.Command(bin, "run", path)
	ptmx, err := pty.StartWithSize(cmd, &pty.Winsize{Rows: 40, Cols: 160})
	if err != nil {
		t.Fatal(err)
	}
	defer ptmx.Close()
	var screen bytes.Buffer
	copied := make(chan struct{})
	go func() { io.Copy(&screen, ptmx); close(copied) }() // EIO once the process is gone
	if err := waitCmd(cmd, 2*time.Minute); err != nil {
		t.Fatalf("pipe run on a terminal: %v\n%s", err, screen.String())
	}
	<-copied
	got := screen.String()
	for _, want := range []*regexp.Regexp{
		// A redraw moves the cursor up over the display and clears it.
		regexp.MustCompile(`\x1b\[\d+A\x1b\[J`),
		regexp.MustCompile(`running \d+s(\x1b\[0m)?  (\x1b\[1m)?ETA `),
		regexp.MustCompile(`prompts \d+ of ~?\d+ read +\[[=>-]+\] +\d+% of [\d.]+ KiB`),
		regexp.MustCompile(`gen +generate +\d+ of \d+`),
		regexp.MustCompile(`tokens [\d.K]+ of at most [\d.KM]+ \([\d.]+%\)  [\d.K]+ tok/s 1m  (\x1b\[2m)?in flight \d+/16`),
		regexp.MustCompile(`127\.0\.0\.1:\d+ +(\x1b\[32m)?ready(\x1b\[0m)?  \d+/8  [\d.]+/s`),
		// The final frame: everything read.
		regexp.MustCompile(`prompts 122 of 122 read +\[=+\] +100% of `),
		regexp.MustCompile(`\n *out +write-jsonl +122 +122 +0 +0 +0 +yes`),
	} {
		if !want.MatchString(got) {
			t.Errorf("the terminal never showed %q:\n%s", want, tail(got, 4000))
		}
	}
	// Lines printed during the run (the first one, the early warning of
	// empty answers) are whole on their own lines above the display, not
	// cut by a redraw.
	for _, line := range []*regexp.Regexp{
		regexp.MustCompile(`(?m)^pipe: running \S+p\.toml; log in \S+run\.log\r$`),
		regexp.MustCompile(`(?m)^(\x1b\[\d+A\x1b\[J)?pipe: warning \[\d+s\]: \d+% of answers so far are tiny \(under 8 characters; \d+ of \d+\): check the servers and the prompts \(pipe inspect the output\)\r$`),
	} {
		if !line.MatchString(got) {
			t.Errorf("%q is not whole on its own line:\n%s", line, tail(got, 3000))
		}
	}
	if n := len(readJSONL(t, out)); n != 122 {
		t.Errorf("%d records written, want 122", n)
	}
}

func waitCmd(cmd *exec.Cmd, limit time.Duration) error {
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		return err
	case <-time.After(limit):
		cmd.Process.Kill()
		<-done
		return fmt.Errorf("did not exit within %s", limit)
	}
}

// status.json is replaced while the run goes on (state running, this
// process's pid, figures that grow) and says finished at the end; pipe
// status reads it and the lock: alive during the run, not after, and
// "process gone" for a run killed with -9.
func TestStatusDuringAndAfterRun(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: real processes")
	}
	t.Parallel() // processes of its own: waits on simulated time, not CPU
	bin := testenv.PipeBinary(t)
	path, _ := genPipelineFile(t, "servers = [\"sim:1?speed=5&think_mean=200&answer_mean=40\"]\nconcurrency = 4\nmax_output_tokens = 4096")
	runDir := filepath.Join(filepath.Dir(path), "run")
	statusPath := filepath.Join(runDir, "status.json")

	start := func(extra ...string) *exec.Cmd {
		cmd := exec.Command(bin, append([]string{"run", path}, extra...)...)
		cmd.Stderr = io.Discard
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		return cmd
	}
	cmd := start()
	var doc statusDoc
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(50 * time.Millisecond) { // polling for a state, not timing
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			t.Fatalf("status.json never showed completions while running: %+v", doc)
		}
		data, err := os.ReadFile(statusPath)
		if err != nil || json.Unmarshal(data, &doc) != nil {
			continue // not written yet (a reader never sees a part: it is replaced atomically)
		}
		if doc.State == stateRunning && doc.PID == cmd.Process.Pid && doc.Fleet != nil && doc.Fleet.Servers != nil && len(doc.Stages) == 3 && doc.Stages[1].Out > 0 {
			break
		}
	}
	if doc.Fingerprint == "" || doc.Started == "" || doc.Input == nil || doc.Input.Bytes == 0 {
		t.Errorf("status.json lacks the fingerprint, start or input: %+v", doc)
	}
	status := func(args ...string) string {
		out, err := exec.Command(bin, append([]string{"status"}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("pipe status %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	got := status(runDir)
	for _, want := range []string{
		"\nstate      running (updated ",
		fmt.Sprintf("\nprocess    pid %d on ", cmd.Process.Pid),
		": alive, started ",
		"\nconfig     " + doc.Fingerprint,
		"\n  gen      generate      in ",
		" ready\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("pipe status during the run lacks %q:\n%s", want, got)
		}
	}
	var raw map[string]any
	if err := json.Unmarshal([]byte(status("--json", runDir)), &raw); err != nil || raw["alive"] != true || raw["state"] != "running" {
		t.Errorf("pipe status --json: alive %v, state %v (%v)", raw["alive"], raw["state"], err)
	}

	// Killed: the status still says running, the lock is free: gone.
	syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	cmd.Wait()
	got = status(runDir)
	if !strings.Contains(got, "\nstate      process gone (updated ") || !strings.Contains(got, "the process ended without finishing (killed or crashed); run the same command again to continue") {
		t.Errorf("pipe status after kill -9:\n%s", got)
	}

	// Run again (faster servers: an operational setting) to the end:
	// finished, not alive.
	cmd = start("--set", `gen.servers=["sim:1?speed=100&think_mean=200&answer_mean=40"]`)
	if err := waitCmd(cmd, 3*time.Minute); err != nil {
		t.Fatal(err)
	}
	got = status(runDir)
	for _, want := range []string{"\nstate      finished (updated ", fmt.Sprintf("pid %d on ", cmd.Process.Pid), ": not running, started ", "\nfinished   122 ids ("} {
		if !strings.Contains(got, want) {
			t.Errorf("pipe status after the run lacks %q:\n%s", want, got)
		}
	}
}
