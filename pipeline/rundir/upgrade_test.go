package rundir_test

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/pipe-dev/pipe/pipeline/rundir"
)

// A run started by an older pipe, whose run.json lacks a key a newer pipe
// added to a kind, resumes under the newer one while the key stands at
// its default (what the older pipe did); set to something else, the key
// changes the data and the resume is refused as for any changed setting.
func TestCheckAfterAnUpgrade(t *testing.T) {
	for _, tc := range []struct {
		name  string
		edits []string
		diffs []string
	}{
		{"a new key at its default", nil, nil},
		{"a new key set otherwise", []string{"temperature = 0.6", "temperature = 0.6\nmax_output_tokens = 2048"},
			[]string{"gen.max_output_tokens: (not recorded) → 2048"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			runDir := filepath.Join(dir, "run")
			if _, _, err := rundir.Check(runDir, plan(t, dir, basePipeline), false, []string{"pipe", "run"}); err != nil {
				t.Fatal(err)
			}
			os.WriteFile(filepath.Join(runDir, "done.ids"), []byte("PIPEIDS1\x01\x02\x03\x04\x05\x06\x07\x08"), 0o644)
			// The older pipe's run.json: gen had no max_output_tokens.
			r, err := rundir.ReadRun(runDir)
			if err != nil {
				t.Fatal(err)
			}
			delete(r.Settings["gen"].(map[string]any), "max_output_tokens")
			if err := r.Write(runDir); err != nil {
				t.Fatal(err)
			}
			_, diffs, err := rundir.Check(runDir, plan(t, dir, basePipeline, tc.edits...), false, []string{"pipe", "run"})
			var cc *rundir.ConfigChangedError
			if !reflect.DeepEqual(diffs, tc.diffs) || (tc.diffs != nil) != errors.As(err, &cc) {
				t.Fatalf("diffs %q, err %v; want %q", diffs, err, tc.diffs)
			}
		})
	}
}
