//go:build e2e

package stages

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pipe-dev/pipe/internal/testrig/testenv"
)

// earlyRun runs `pipe run` of read-prompts → generate (genKeys) →
// validate-thinking → write-jsonl over n prompts and returns its output,
// its exit code and the completions written.
func earlyRun(t *testing.T, genKeys string, n int) (string, int, int) {
	t.Helper()
	qwen := testenv.Qwen3Dir(t)
	src := genPipeline(genKeys) + fmt.Sprintf(`
[[stage]]
id        = "check"
kind      = "validate-thinking"
input     = "gen"
tokenizer = %q

[[stage]]
id    = "rows"
kind  = "write-jsonl"
input = "check.accepted"
path  = "out/rows.jsonl"

[[stage]]
id    = "bad"
kind  = "write-jsonl"
input = "check.rejected"
path  = "out/bad.jsonl"
`, qwen)
	dir := writeGenRun(t, src, n)
	out, err := pipeCmd(t, nil, "run", filepath.Join(dir, "p.toml"))
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	lines := 0
	if b, err := os.ReadFile(filepath.Join(dir, "out/completions.jsonl")); err == nil {
		lines = strings.Count(string(b), "\n")
	}
	return out, code, lines
}

// A tokenizer that is not the servers', thinking the servers ignore, and
// a max_output_tokens far below what the model writes each stop a run
// with exit 2 within its first completions (not after max_rejected's
// 2,000), naming what was seen and what to fix.
func TestEarlyMismatchesStopTheRunProcess(t *testing.T) {
	if testing.Short() {
		t.Skip("real processes")
	}
	bin := testenv.PipeBinary(t)
	qwen := testenv.Qwen3Dir(t)
	for _, c := range []struct {
		name, keys string
		sim        []string
		want       []string
	}{
		{"tokenizer", fmt.Sprintf("api = \"generate\"\ntokenizer = %q\n", qwen), nil,
			[]string{": the output ids of its first 20 completions do not spell their text: the tokenizer is not the server's", "its ids decode to", "Set the gen stage's tokenizer"}},
		{"validate-thinking", "", nil,
			[]string{": the output ids of its first 20 completions do not spell their text: the tokenizer is not the server's", "Set the check stage's tokenizer"}},
		{"thinking", "", []string{"--tokenizer", qwen, "--fault", "empty-thinking:1"},
			[]string{"thinking is not happening: none of the first 50 completions with enable_thinking = true has any reasoning"}},
		{"length", "", []string{"--tokenizer", qwen, "--think-mean", "3000"},
			[]string{"of the first 100 completions were cut at the length limit (max_output_tokens = 64) and rejected for it", "Raise max_output_tokens"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv := testenv.StartSim(t, bin, 2, append([]string{"--speed", "2000", "--think-mean", "60", "--answer-mean", "20"}, c.sim...)...)
			keys := serversKey(srv.URLs) + readyKey + "concurrency = 4\nbackoff_min = \"5ms\"\n" + c.keys
			if c.name == "length" {
				keys += "max_output_tokens = 64\n"
			} else {
				keys += "max_output_tokens = 2048\n"
			}
			out, code, done := earlyRun(t, keys, 2000)
			if code != 2 {
				t.Fatalf("exit %d, want 2\n%s", code, out)
			}
			for _, w := range c.want {
				if !strings.Contains(out, w) {
					t.Errorf("output lacks %q:\n%s", w, out)
				}
			}
			limit := 64
			switch c.name {
			case "thinking": // generate halts at its 50th: 7 more were in flight (2 servers × 4)
				limit = 50 + 2*4 - 1
			case "length":
				limit = 100 + 16 // the window, and what was in flight and queued
			}
			if done > limit {
				t.Errorf("%d completions written before the stop, want at most %d", done, limit)
			}
			t.Logf("%s: stopped after %d completions:\n%s", c.name, done, out)
		})
	}
}
