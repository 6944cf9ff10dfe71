package rundir

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/pipe-dev/pipe/pipeline"
)

// CheckDir refuses a run directory that is the root directory or the
// user's home directory (symbolic links resolved): pipe would put its lock,
// run.json, logs and journal there, and --fresh would move it aside whole.
func CheckDir(dir string) error {
	if dir == "" {
		return errors.New("run directory: empty path")
	}
	real := resolved(dir)
	if real == string(filepath.Separator) {
		return fmt.Errorf("run directory %s is the root directory: give a directory of its own (--run-dir DIR or [pipeline] run_dir)", dir)
	}
	if home, err := os.UserHomeDir(); err == nil && home != "" && real == resolved(home) {
		return fmt.Errorf("run directory %s is your home directory: give a directory of its own (--run-dir DIR or [pipeline] run_dir)", dir)
	}
	return nil
}

// checkFresh refuses, for --fresh, to move aside an existing directory that
// is not a pipe run directory: one that has entries but neither run.json
// nor done.ids. (--fresh --run-dir ~/project once renamed a home folder.)
func checkFresh(dir string) error {
	if err := CheckDir(dir); err != nil {
		return fmt.Errorf("--fresh: %w", err)
	}
	for _, marker := range []string{RunFile, pipeline.DoneFile} {
		if _, err := os.Lstat(filepath.Join(dir, marker)); err == nil {
			return nil
		}
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("--fresh: %w", err)
	}
	if len(entries) == 0 {
		return nil
	}
	return fmt.Errorf("--fresh: %s is not a pipe run directory (no %s in it): not moving it aside; give --run-dir a directory of its own", dir, RunFile)
}

// resolved is dir absolute, cleaned, with symbolic links resolved when it
// exists.
func resolved(dir string) string {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return filepath.Clean(dir)
	}
	if r, err := filepath.EvalSymlinks(abs); err == nil {
		return r
	}
	return abs
}
