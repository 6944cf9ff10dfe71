package stages

import (
	"strings"
	"testing"
)

// A launch table is read whole or refused with what each key takes.
func TestLaunchTable(t *testing.T) {
	var e serverEntry
	if err := e.fromTable(map[string]any{"launch": "sglang --port {port}", "count": int64(7), "gpus": "0-6", "port": int64(30000),
		"env": map[string]any{"SGLANG_X": "1"}, "ready_timeout": "20m", "restarts": int64(5)}); err != nil {
		t.Fatal(err)
	}
	l := e.Launch
	if l.Count != 7 || len(l.GPUs) != 7 || l.GPUs[6] != "6" || l.Env["SGLANG_X"] != "1" || l.Restarts != 5 || l.ReadyTimeout.Minutes() != 20 {
		t.Fatalf("%+v", l)
	}
	if u := l.urls(); len(u) != 7 || u[0] != "http://127.0.0.1:30000" || u[6] != "http://127.0.0.1:30006" {
		t.Errorf("urls %v", u)
	}
	for _, tc := range []struct {
		table map[string]any
		want  string
	}{
		{map[string]any{"launch": "sglang"}, "the command has no {port}"},
		{map[string]any{"launch": "x {port}", "url": "http://a:1"}, "not both"},
		{map[string]any{"launch": "x {port}", "gpus": "0-2", "count": int64(2), "gpus_per_server": int64(2)}, "need 4, 3 given"},
		{map[string]any{"launch": "x {port}", "gpus": "a"}, `"a" is not a GPU id`},
		{map[string]any{"launch": "x {port}", "ready_timeout": "soon"}, "ready_timeout must be a duration"},
		{map[string]any{"launch": "x {port}", "gpu": "0"}, `unknown key "gpu"`},
	} {
		var e serverEntry
		if err := e.fromTable(tc.table); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v, want %q", tc.table, err, tc.want)
		}
	}
}

// gpus = "visible" takes the GPUs pipe is given: CUDA_VISIBLE_DEVICES, or
// Slurm's allocation.
func TestVisibleGPUs(t *testing.T) {
	env := func(m map[string]string) func(string) (string, bool) {
		return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
	}
	if g, err := visibleGPUs(env(map[string]string{"CUDA_VISIBLE_DEVICES": "2,3", "SLURM_JOB_GPUS": "0-7"})); err != nil || strings.Join(g, ",") != "2,3" {
		t.Errorf("%v %v", g, err)
	}
	if g, err := visibleGPUs(env(map[string]string{"SLURM_JOB_GPUS": "4-6"})); err != nil || strings.Join(g, ",") != "4,5,6" {
		t.Errorf("%v %v", g, err)
	}
	if g, err := visibleGPUs(env(map[string]string{"NVIDIA_VISIBLE_DEVICES": "GPU-aa,GPU-bb"})); err != nil || strings.Join(g, ",") != "0,1" {
		t.Errorf("%v %v", g, err)
	}
	if _, err := visibleGPUs(env(nil)); err == nil || !strings.Contains(err.Error(), "--gres=gpu:N") {
		t.Errorf("%v", err)
	}
}
