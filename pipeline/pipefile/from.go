package pipefile

import (
	"fmt"
	"path/filepath"
	"strings"
)

// From is pipe run --from STAGE=RUN_DIR: the run replaces STAGE and every
// stage upstream of it with a reader of what STAGE produced in RUN_DIR, and
// runs the rest of the file as written, in a run directory of its own.
type From struct {
	Stage  string
	RunDir string // absolute: the original run
	Pos    Pos    // "--from STAGE=RUN_DIR", for messages
	// Set by the surgery (pipeline.Build):
	// Replaced are the ids of the stages taken out, in file order (STAGE
	// among them: its id now names the reader).
	Replaced []string
	// Kind and Source are the reader put in STAGE's place and what it
	// reads: a journal's files, or a writer's committed output.
	Kind, Source string
	// Redirected maps each output the file names (its stage and key) to
	// where the replay writes it instead.
	Redirected []Redirect
	// Applied is set once pipeline.Build did the surgery, which it does once.
	Applied bool
}

// Redirect is one output path --from moved into the replay's run directory.
type Redirect struct {
	Stage, Key, From, To string
}

// ParseFrom reads "STAGE=RUN_DIR"; a relative RUN_DIR resolves against dir.
func ParseFrom(s, dir string) (*From, error) {
	stage, runDir, ok := strings.Cut(s, "=")
	if !ok || stage == "" || runDir == "" {
		return nil, fmt.Errorf("want --from STAGE=RUN_DIR (e.g. gen=runs/regenerate)")
	}
	if !filepath.IsAbs(runDir) {
		runDir = filepath.Join(dir, runDir)
	}
	return &From{Stage: stage, RunDir: filepath.Clean(runDir), Pos: Pos{File: "--from " + s}}, nil
}

// ReplayRunDir is the default run directory of a replay: beside the
// original, named after it and the stage (runs/regenerate-from-gen).
func ReplayRunDir(orig, stage string) string {
	return filepath.Clean(orig) + "-from-" + stage
}
