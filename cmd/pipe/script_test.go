package main

import (
	"flag"
	"os"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"
)

var update = flag.Bool("update", false, "rewrite the expected output in testdata/script/*.txtar")

func TestMain(m *testing.M) {
	testscript.Main(m, map[string]func(){
		"pipe": func() { os.Exit(Main()) },
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
			return nil
		},
	})
}
