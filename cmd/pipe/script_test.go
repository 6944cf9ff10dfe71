package main

import (
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/pipe-dev/pipe/internal/testrig/testenv"
)

var update = flag.Bool("update", false, "rewrite the expected output in the *.txtar scripts run")

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
// .txtar per behaviour, with its input files and expected output. $QWEN3
// is the checked-in Qwen3-like tokenizer (testenv.TinyQwen3Dir), so they
// run on a fresh clone; the scripts whose output holds Qwen3's real ids
// are in testdata/script-e2e (TestScriptsE2E, the e2e layer).
func TestScripts(t *testing.T) {
	runScripts(t, "testdata/script", testenv.TinyQwen3Dir(t))
}

// runScripts runs the scripts in dir with $REPO, $QWEN3 (the tokenizer
// directory) and $PIPEBIN set.
func runScripts(t *testing.T, dir, qwen3 string) {
	repo := testenv.RepoRoot(t)
	testscript.Run(t, testscript.Params{
		Dir:           dir,
		UpdateScripts: *update,
		Setup: func(env *testscript.Env) error {
			env.Setenv("REPO", repo)
			env.Setenv("QWEN3", qwen3)
			// PIPEBIN holds only the pipe command, for scripts that set a
			// PATH of their own (graph.txtar: with and without dot).
			bin, err := exec.LookPath("pipe")
			if err != nil {
				return err
			}
			env.Setenv("PIPEBIN", filepath.Dir(bin))
			return nil
		},
	})
}
