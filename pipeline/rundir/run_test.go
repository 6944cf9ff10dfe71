package rundir_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/pipe-dev/pipe/pipeline/rundir"
)

func TestRunFile(t *testing.T) {
	dir := t.TempDir()
	runDir := filepath.Join(dir, "run")

	r, err := rundir.ReadRun(runDir)
	if r != nil || err != nil {
		t.Fatalf("ReadRun of a missing run = %v, %v; want nil, nil", r, err)
	}

	p := plan(t, dir, basePipeline)
	at := time.Date(2026, 11, 30, 16, 40, 0, 0, time.UTC)
	w := &rundir.Run{
		Pipeline: "/x/test.toml",
		Created:  at,
		Settings: rundir.Settings(p),
		History: []rundir.Start{
			{At: at, PID: 12, Command: []string{"pipe", "run", "test.toml"}},
			{At: at.Add(time.Hour), PID: 13, Command: []string{"pipe", "run", "--force-new-config", "test.toml"}, ForcedNewConfig: []string{"gen.temperature: 0.6 → 0.7"}},
		},
	}
	if err := w.Write(runDir); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(filepath.Join(runDir, rundir.RunFile))
	for _, want := range []string{`"pipeline": "/x/test.toml"`, `"forced_new_config"`, `"created": "2026-11-30T16:40:00Z"`, `<think>`, `"settings"`, `"history"`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("run.json lacks %s:\n%s", want, b)
		}
	}
	entries, _ := os.ReadDir(runDir)
	if len(entries) != 2 {
		t.Errorf("run directory holds %d files, want only run.json and its copy (no temp files)", len(entries))
	}

	r, err = rundir.ReadRun(runDir)
	if err != nil {
		t.Fatal(err)
	}
	if d := rundir.Compare(r.Settings, rundir.Settings(p)); len(d) > 0 {
		t.Errorf("settings differ after a JSON round trip: %v", d)
	}
	if r.Pipeline != w.Pipeline || !r.Created.Equal(at) || !reflect.DeepEqual(r.History[1].ForcedNewConfig, w.History[1].ForcedNewConfig) ||
		len(r.History) != 2 || r.History[0].PID != 12 || !reflect.DeepEqual(r.History[0].Command, w.History[0].Command) {
		t.Errorf("read back %+v, wrote %+v", r, w)
	}

	// A second write replaces the first.
	r.History = r.History[:1]
	if err := r.Write(runDir); err != nil {
		t.Fatal(err)
	}
	if r2, _ := rundir.ReadRun(runDir); len(r2.History) != 1 {
		t.Errorf("rewrite: history has %d starts, want 1", len(r2.History))
	}

	// A damaged run.json is read from its copy, and says so.
	good, _ := os.ReadFile(filepath.Join(runDir, rundir.RunFile))
	for _, bad := range [][]byte{[]byte(`{"pipeline": `), append(bytes.Clone(good), good[:40]...), bytes.Repeat([]byte{0}, len(good))} {
		os.WriteFile(filepath.Join(runDir, rundir.RunFile), bad, 0o644)
		r, err := rundir.ReadRun(runDir)
		if err != nil || len(r.History) != 1 || !strings.Contains(r.Recovered, "run.json was damaged") {
			t.Errorf("ReadRun of a damaged run.json with its copy = %+v, %v; want the copy, with a warning", r, err)
		}
	}
	// Both damaged: an error naming it and saying what to do, not a new run.
	os.WriteFile(filepath.Join(runDir, ".run.json.copy"), []byte(`{"pipe`), 0o644)
	if r, err := rundir.ReadRun(runDir); err == nil || !strings.Contains(err.Error(), rundir.RunFile) || !strings.Contains(err.Error(), "--fresh") {
		t.Errorf("ReadRun of a damaged file = %v, %v; want an error naming it and what to do", r, err)
	}
}

func TestCheck(t *testing.T) {
	type step struct {
		edits    []string // applied to basePipeline
		force    bool
		wantErr  bool // a *ConfigChangedError
		diffs    []string
		history  int      // starts recorded after the step
		forced   []string // the last start's ForcedNewConfig
		settings []string // edits of the pipeline whose settings run.json holds after
	}
	temp := []string{"temperature = 0.6", "temperature = 0.7"}
	tests := []struct {
		name  string
		steps []step
	}{
		{"new run", []step{{history: 1}}},
		{"resume, same settings", []step{{history: 1}, {history: 2}, {history: 3}}},
		{"resume with other servers", []step{{history: 1}, {edits: []string{`servers = ["http://a:30000"]`, `servers = ["http://b:1"]`}, history: 2}}},
		{"refused", []step{
			{history: 1},
			{edits: temp, wantErr: true, diffs: []string{"gen.temperature: 0.6 → 0.7"}, history: 1},
			{edits: temp, wantErr: true, diffs: []string{"gen.temperature: 0.6 → 0.7"}, history: 1},
		}},
		{"forced, then the new settings resume", []step{
			{history: 1},
			{edits: temp, force: true, diffs: []string{"gen.temperature: 0.6 → 0.7"}, history: 2, forced: []string{"gen.temperature: 0.6 → 0.7"}, settings: temp},
			{edits: temp, history: 3, settings: temp},
			{wantErr: true, diffs: []string{"gen.temperature: 0.7 → 0.6"}, history: 3, settings: temp},
		}},
		{"force with nothing changed records nothing", []step{{history: 1}, {force: true, history: 2}}},
		// A first start that did no work (it failed at a typo) protects
		// nothing: the corrected settings are taken without a flag.
		{"before any work, a change is taken", []step{
			{history: 1},
			{edits: temp, diffs: []string{"gen.temperature: 0.6 → 0.7"}, history: 2, forced: []string{"gen.temperature: 0.6 → 0.7"}, settings: temp},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			runDir := filepath.Join(dir, "run")
			for i, s := range tt.steps {
				p := plan(t, dir, basePipeline, s.edits...)
				cmd := []string{"pipe", "run", "test.toml", "#" + string(rune('0'+i))}
				r, diffs, err := rundir.Check(runDir, p, s.force, cmd)
				if i == 0 && !strings.HasPrefix(tt.name, "before any work") {
					// Work was done: one finished id.
					os.WriteFile(filepath.Join(runDir, "done.ids"), []byte("PIPEIDS1\x01\x02\x03\x04\x05\x06\x07\x08"), 0o644)
				}
				var cc *rundir.ConfigChangedError
				if s.wantErr != errors.As(err, &cc) || (!s.wantErr && err != nil) {
					t.Fatalf("step %d: err = %v, want a ConfigChangedError: %v", i, err, s.wantErr)
				}
				if !reflect.DeepEqual(diffs, s.diffs) {
					t.Errorf("step %d: diffs = %q, want %q", i, diffs, s.diffs)
				}
				if cc != nil {
					msg := cc.Error()
					for _, want := range append([]string{"--force-new-config", "--fresh", runDir, "refusing to resume"}, s.diffs...) {
						if !strings.Contains(msg, want) {
							t.Errorf("step %d: message lacks %q:\n%s", i, want, msg)
						}
					}
				}
				onDisk, err := rundir.ReadRun(runDir)
				if err != nil || onDisk == nil {
					t.Fatalf("step %d: ReadRun = %v, %v", i, onDisk, err)
				}
				if len(onDisk.History) != s.history {
					t.Fatalf("step %d: %d starts recorded, want %d", i, len(onDisk.History), s.history)
				}
				if r == nil || len(r.History) != s.history {
					t.Errorf("step %d: Check returned %+v", i, r)
				}
				last := onDisk.History[len(onDisk.History)-1]
				if !s.wantErr && (last.PID != os.Getpid() || !reflect.DeepEqual(last.Command, cmd) || time.Since(last.At) > time.Minute) {
					t.Errorf("step %d: last start %+v", i, last)
				}
				if !s.wantErr && !reflect.DeepEqual(last.ForcedNewConfig, s.forced) {
					t.Errorf("step %d: forced_new_config = %q, want %q", i, last.ForcedNewConfig, s.forced)
				}
				if d := rundir.Compare(onDisk.Settings, rundir.Settings(plan(t, dir, basePipeline, s.settings...))); len(d) > 0 {
					t.Errorf("step %d: run.json settings are not the expected ones: %v", i, d)
				}
				if want := filepath.Join(dir, "test.toml"); onDisk.Pipeline != want {
					t.Errorf("step %d: pipeline = %q, want %q", i, onDisk.Pipeline, want)
				}
			}
		})
	}
}

// A dry run says what the run will do with changed settings: taken when no
// work was done under the old ones, refused once some was.
func TestDescribeChangedSettings(t *testing.T) {
	dir := t.TempDir()
	runDir := filepath.Join(dir, "run")
	if _, _, err := rundir.Check(runDir, plan(t, dir, basePipeline), false, []string{"pipe", "run"}); err != nil {
		t.Fatal(err)
	}
	changed := plan(t, dir, basePipeline, "temperature = 0.6", "temperature = 0.7")
	if got := rundir.Describe(runDir, changed); strings.Contains(got, "REFUSED") || !strings.Contains(got, "nothing was done under the old ones: the new ones are taken") {
		t.Errorf("before any work: %q", got)
	}
	os.WriteFile(filepath.Join(runDir, "done.ids"), []byte("PIPEIDS1\x01\x02\x03\x04\x05\x06\x07\x08"), 0o644)
	if got := rundir.Describe(runDir, changed); !strings.Contains(got, "REFUSED without --force-new-config") {
		t.Errorf("after work: %q", got)
	}
}
