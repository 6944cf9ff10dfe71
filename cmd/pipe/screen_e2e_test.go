//go:build e2e

package main

import (
	"bytes"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/creack/pty"

	"github.com/pipe-dev/pipe/internal/testrig/testenv"
)

// csi matches a terminal control sequence (colour, cursor movement, erase).
var csi = regexp.MustCompile(`\x1b\[[0-9;?]*[A-Za-z]`)

// The demo pipeline, run against `pipe sim` on an 80×24 pseudo-terminal,
// shows what matters first and whole: the state and ETA, the reject share
// with its top reason labelled as a share of the rejects, the servers not
// ready, tokens against the input's budget; in colour, no line wider than
// the terminal, nothing cut ("…").
func TestLiveDisplayAt80Columns(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: a real process on a pseudo-terminal")
	}
	t.Parallel() // waits on simulated time, not CPU
	qwen := testenv.Qwen3Dir(t)
	bin := testenv.PipeBinary(t)
	sim := testenv.StartSim(t, bin, 2, "--speed", "20", "--tokenizer", qwen, "--fault", "empty-answer:0.3")
	// A third server nobody listens on: probed, never ready.
	dead := testenv.DeadURL(t)
	dir := t.TempDir()
	servers := `["` + sim.URLs[0] + `", "` + sim.URLs[1] + `", "` + dead + `"]`
	cmd := exec.Command(bin, "run", "../../pipelines/demo.toml", "--run-dir", filepath.Join(dir, "run"),
		"--set", "gen.servers="+servers, "--set", "gen.concurrency=16", "--set", "gen.tokenizer="+quoteTOML(qwen),
		"--set", "check.tokenizer="+quoteTOML(qwen), "--set", "tok.tokenizer="+quoteTOML(qwen),
		"--set", "train.path="+quoteTOML(filepath.Join(dir, "train")), "--set", "rejects.path="+quoteTOML(filepath.Join(dir, "rejected.jsonl")))
	cmd.Env = append(withoutEnv(os.Environ(), "NO_COLOR", "TERM"), "TERM=xterm-256color")
	ptmx, err := pty.StartWithSize(cmd, &pty.Winsize{Rows: 24, Cols: 80})
	if err != nil {
		t.Fatal(err)
	}
	defer ptmx.Close()
	var screen bytes.Buffer
	copied := make(chan struct{})
	go func() { io.Copy(&screen, ptmx); close(copied) }()
	if err := waitCmd(cmd, 3*time.Minute); err != nil {
		t.Fatalf("pipe run on a terminal: %v\n%s", err, screen.String())
	}
	<-copied
	raw := screen.String()
	text := csi.ReplaceAllString(raw, "")
	// The display's frames: before the summary, without the notices
	// printed above it once (a terminal wraps those; they are not redrawn).
	frames, _, found := strings.Cut(text, "\n  stage    kind ")
	if !found {
		t.Fatalf("no summary after the run:\n%s", tail(text, 4000))
	}
	if strings.Contains(frames, "…") {
		t.Errorf("something was cut (…) at 80 columns:\n%s", tail(frames, 4000))
	}
	for _, line := range strings.FieldsFunc(frames, func(r rune) bool { return r == '\n' || r == '\r' }) {
		if strings.HasPrefix(line, "pipe: ") || strings.HasPrefix(line, `stage "`) {
			continue
		}
		if n := utf8.RuneCountInString(line); n > 80 {
			t.Errorf("a line of %d columns on an 80-column terminal: %q", n, line)
		}
	}
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`(?m)^running \d+s  ETA \S+  \d+ left at [\d.]+/s`),
		regexp.MustCompile(`(?m)^prompts \d+ of ~?\d+ read +\[[=>-]+\] +\d+% of [\d.]+ KiB`),
		regexp.MustCompile(`(?m)^rejected [1-9]\d* = \d+% of \d+ done; of rejects: empty_answer \d+%`),
		regexp.MustCompile(`(?m)^servers 2 of 3 ready; not ready: ` + regexp.QuoteMeta(strings.TrimPrefix(dead, "http://")) + ` (probing|never_ready)`),
		regexp.MustCompile(`(?m)^tokens [\d.K]+ of at most [\d.KM]+ \([\d.]+%\)  [\d.K]+ tok/s 1m`),
		regexp.MustCompile(`(?m)^gen +generate +\d+ of \d+`),
		regexp.MustCompile(`(?m)^  127\.0\.0\.1:\d+ +ready  \d+/16  [\d.]+/s`),
		regexp.MustCompile(`(?m)^finished \d+s  nothing left`),
	} {
		if !want.MatchString(text) {
			t.Errorf("the terminal never showed %q:\n%s", want, tail(text, 4000))
		}
	}
	// Colour: the states in green and yellow, the run's state in bold.
	for _, want := range []string{"\x1b[32mready\x1b[0m", "\x1b[1mrunning ", "\x1b[32mfinished "} {
		if !strings.Contains(raw, want) {
			t.Errorf("no %q in the terminal's output", want)
		}
	}
}

func withoutEnv(env []string, names ...string) []string {
	var out []string
	for _, kv := range env {
		keep := true
		for _, n := range names {
			if strings.HasPrefix(kv, n+"=") {
				keep = false
			}
		}
		if keep {
			out = append(out, kv)
		}
	}
	return out
}
