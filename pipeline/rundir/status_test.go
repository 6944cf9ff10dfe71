package rundir_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pipe-dev/pipe/pipeline/rundir"
)

// testdata/status.json and status-starting.json were written by pipe run's
// status writer as it was before this type (cmd/pipe statusDoc at
// 21f06c7), every field set in the first, a start's first "running" in
// the second; status-sim-run.json by a whole pipe run of that commit
// against the simulator (read-prompts, dedupe-against-progress, generate,
// validate-thinking, write-jsonl): run directories written then must read
// the same, and a status written again must be the same bytes.
func TestStatusReadsWhatEarlierPipeWrote(t *testing.T) {
	for _, name := range []string{"status.json", "status-starting.json", "status-sim-run.json"} {
		t.Run(name, func(t *testing.T) {
			want, err := os.ReadFile(filepath.Join("testdata", name))
			if err != nil {
				t.Fatal(err)
			}
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, rundir.StatusFile), want, 0o644); err != nil {
				t.Fatal(err)
			}
			st, err := rundir.ReadStatus[json.RawMessage](dir)
			if err != nil || st == nil {
				t.Fatalf("ReadStatus: %v, %v", st, err)
			}
			if !bytes.Equal(st.Raw, want) {
				t.Errorf("Raw is not the file as read")
			}
			out := t.TempDir()
			st.Raw = nil
			if err := st.Write(out); err != nil {
				t.Fatal(err)
			}
			got, err := os.ReadFile(filepath.Join(out, rundir.StatusFile))
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("written again:\n%s\nwant the bytes read:\n%s", got, want)
			}
		})
	}
}

func TestStatusFields(t *testing.T) {
	st, err := rundir.ReadStatus[json.RawMessage]("testdata")
	if err != nil || st == nil {
		t.Fatalf("ReadStatus: %v, %v", st, err)
	}
	if st.State != rundir.StateDraining || st.PID != 4242 || st.Host != "gpu-node-7" || st.Name != "qwen3 <distill> & co" ||
		st.RunDir != "/home/u/runs/qwen3" || st.Fingerprint != "sha256:0f3a" || !strings.HasPrefix(st.Error, `stage "gen": boom`) {
		t.Errorf("header: %+v", st)
	}
	if st.UpdatedAt().IsZero() || st.ElapsedS != 3723.25 || st.Finished != 900 || st.Before != 100 || st.Unfin != 38 || st.Commit == "" {
		t.Errorf("figures: updated %v, %+v", st.UpdatedAt(), st.Live)
	}
	if len(st.Stages) != 2 {
		t.Fatalf("stages: %+v", st.Stages)
	}
	gen := st.Stages[1]
	if gen.ID != "gen" || gen.Kind != "generate" || gen.In != 990 || gen.Out != 900 || gen.Rejected != 50 || gen.Failed != 2 ||
		gen.Abandoned != 38 || gen.Replayed != 7 || gen.Reasons["truncated"] != 40 || !gen.Expensive || gen.Done1m != 0.75 || len(gen.Figures) != 2 {
		t.Errorf("stage gen: %+v", gen)
	}
	if st.Stages[0].Skipped != 10 || st.Stages[0].QueuedByPort["out"] != 3 {
		t.Errorf("stage prompts: %+v", st.Stages[0])
	}
	if in := st.Input; in == nil || in.Estimated != 2000 || !in.Counted || in.Complete || in.Share != 0.5 {
		t.Errorf("input: %+v", in)
	}
	if e := st.ETA; e == nil || e.Remaining != 1100 || e.PerSecond != 0.75 {
		t.Errorf("eta: %+v", e)
	}
	if st.Fleet == nil || !bytes.Contains(*st.Fleet, []byte(`"h2:30000"`)) {
		t.Errorf("generation: %v", st.Fleet)
	}
	if len(st.Edges) != 1 || st.Edges[0].Depth != 3 || len(st.Dead) != 1 || len(st.Warnings) != 1 || st.Warnings[0].Kind != "server_ejected" {
		t.Errorf("edges %+v, dead letters %v, warnings %+v", st.Edges, st.Dead, st.Warnings)
	}
}

func TestReadStatusNoneOrBad(t *testing.T) {
	dir := t.TempDir()
	if st, err := rundir.ReadStatus[json.RawMessage](dir); st != nil || err != nil {
		t.Errorf("no status.json: %v, %v; want nil, nil", st, err)
	}
	path := filepath.Join(dir, rundir.StatusFile)
	if err := os.WriteFile(path, []byte(`{"state": 7}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := rundir.ReadStatus[json.RawMessage](dir); err == nil || !strings.HasPrefix(err.Error(), path+": ") {
		t.Errorf("a bad status.json: %v; want an error naming it", err)
	}
}

func TestShownState(t *testing.T) {
	for _, c := range []struct {
		written string
		alive   bool
		want    string
	}{
		{rundir.StateRunning, true, rundir.StateRunning},
		{rundir.StateRunning, false, rundir.StateGone},
		{rundir.StateDraining, false, rundir.StateGone},
		{rundir.StateFinished, false, rundir.StateFinished},
		{rundir.StateStopped, false, rundir.StateStopped},
	} {
		if got := rundir.ShownState(c.written, c.alive); got != c.want {
			t.Errorf("ShownState(%q, %v) = %q, want %q", c.written, c.alive, got, c.want)
		}
	}
}
