package main

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"
)

var update = flag.Bool("update", false, "rewrite the expected output in testdata/script/*.txtar")

func TestMain(m *testing.M) {
	testscript.Main(m, map[string]func(){
		"pipe":            func() { os.Exit(Main()) },
		"hfdatafiles":     func() { os.Exit(hfDataFilesMain()) },
		"specforgeload":   func() { os.Exit(specForgeLoadMain()) },
		"trainrows":       func() { os.Exit(trainRowsMain()) },
		"specforgeconfig": func() { os.Exit(specForgeConfigMain()) },
	})
}

// TestScripts runs every CLI behaviour script in testdata/script: one
// .txtar per behaviour, with its input files and expected output.
func TestScripts(t *testing.T) {
	repo, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	testscript.Run(t, testscript.Params{
		Dir:           "testdata/script",
		UpdateScripts: *update,
		Setup: func(env *testscript.Env) error {
			env.Setenv("REPO", repo+"/../..")
			env.Setenv("QWEN3", qwen3Dir(repo))
			// PIPEBIN holds only the pipe command, for scripts that set a
			// PATH of their own (graph.txtar: with and without dot).
			bin, err := exec.LookPath("pipe")
			if err != nil {
				return err
			}
			env.Setenv("PIPEBIN", filepath.Dir(bin))
			return nil
		},
		// [qwen3] holds when the real Qwen3 tokenizer files are installed
		// (scripts/fetch-qwen3.sh); under PIPE_CI=1 their absence is an
		// error, not a skip.
		Condition: func(cond string) (bool, error) {
			if cond != "qwen3" {
				return false, fmt.Errorf("unknown condition %q", cond)
			}
			_, err := os.Stat(filepath.Join(qwen3Dir(repo), "tokenizer.json"))
			if err != nil && os.Getenv("PIPE_CI") == "1" {
				return false, fmt.Errorf("Qwen3 tokenizer files missing (run scripts/fetch-qwen3.sh): %v", err)
			}
			return err == nil, nil
		},
	})
}

func qwen3Dir(pkgDir string) string {
	if d := os.Getenv("PIPE_QWEN3_DIR"); d != "" {
		return d
	}
	return filepath.Join(pkgDir, "..", "..", ".cache", "qwen3")
}
