//go:build e2e

package main

import (
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pipe-dev/pipe/cmd/pipe/internal/cmdline"
	"github.com/pipe-dev/pipe/internal/testrig/testenv"
)

// A password typed in --set reaches no file and no message: not
// detached.log, run.log, run.json, status.json or the outputs, not the
// error about a malformed URL. Under umask 077 every file pipe writes is
// 0600 and every directory 0700; detached.log and run.log are 0600 always.
func TestPasswordInSetAndUmask(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: real processes")
	}
	bin := testenv.PipeBinary(t)
	sim := testenv.StartSim(t, bin, 1, "--speed", "100")
	const pw = "Pw-9f3c1d77e2"
	dir := t.TempDir()
	prompts, _ := filepath.Abs("../../testdata/prompts/demo.jsonl")
	os.WriteFile(filepath.Join(dir, "p.toml"), []byte(fmt.Sprintf(`
[pipeline]
run_dir = "run"

[[stage]]
id   = "prompts"
kind = "read-prompts"
path = %q
limit = 20

[[stage]]
id    = "gen"
kind  = "generate"
input = "prompts"
servers = ["sim:1"]
concurrency = 4
max_output_tokens = 256

[[stage]]
id    = "out"
kind  = "write-jsonl"
input = ["gen", "gen.rejected"]
path  = "out/out.jsonl"

[[stage]]
id       = "shards"
kind     = "write-arrow"
input    = "gen"
path     = "out/completions"
max_rows = 8
`, prompts)), 0o644)
	withPW := strings.Replace(sim.URLs[0], "http://", "http://bob:"+pw+"@", 1)
	var said strings.Builder
	sh := func(args ...string) error {
		cmd := exec.Command("sh", "-c", "umask 077; exec "+cmdline.Join(append([]string{bin}, args...)))
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		said.Write(out)
		return err
	}
	set := fmt.Sprintf(`gen.servers=["%s"]`, withPW)
	if err := sh("run", "p.toml", "--set", set); err != nil {
		t.Fatalf("pipe run: %v\n%s", err, said.String())
	}
	// Detached, and again for a second start in the same run directory.
	if err := sh("run", "--detach", "--fresh", "p.toml", "--set", set); err != nil {
		t.Fatalf("pipe run --detach: %v\n%s", err, said.String())
	}
	deadline := time.Now().Add(time.Minute)
	for {
		st, _ := os.ReadFile(filepath.Join(dir, "run", "status.json"))
		if strings.Contains(string(st), `"state": "finished"`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the detached run did not finish:\n%s", st)
		}
		time.Sleep(50 * time.Millisecond) // polling for a condition, not timing
	}
	for _, args := range [][]string{{"status", "run"}, {"inspect", "run"}, {"report", "run"}} {
		sh(args...)
	}
	// Malformed URLs: the error names the server without the password.
	for _, bad := range []string{"http://bob:" + pw + "@host:bad port", "http://bob:" + pw + " x@host:1"} {
		if err := sh("run", "p.toml", "--set", fmt.Sprintf(`gen.servers=["%s"]`, bad)); err == nil {
			t.Errorf("a malformed URL was accepted")
		}
		sh("check", "p.toml", "--set", fmt.Sprintf(`gen.servers=["%s"]`, bad))
	}
	if strings.Contains(said.String(), pw) {
		t.Errorf("the password was printed:\n%s", said.String())
	}
	if !strings.Contains(said.String(), "is not a server URL") {
		t.Errorf("no error about the malformed URL:\n%s", said.String())
	}
	files := 0
	filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || path == dir || filepath.Base(path) == "p.toml" {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		if perm := info.Mode().Perm(); perm&0o077 != 0 {
			t.Errorf("%s is %v under umask 077", path, perm)
		}
		if d.Type().IsRegular() {
			files++
			data, _ := os.ReadFile(path)
			if strings.Contains(string(data), pw) {
				t.Errorf("%s holds the password", path)
			}
		}
		return nil
	})
	for _, want := range []string{"run/detached.log", "run/run.log", "run/run.json", "run/status.json", "run/report.html", "out/out.jsonl",
		"out/completions/.pipe/manifest.json", "out/completions/part-00000.parquet"} {
		if _, err := os.Stat(filepath.Join(dir, want)); err != nil {
			t.Errorf("no %s to check: %v", want, err)
		}
	}
	t.Logf("%d files checked", files)
}
