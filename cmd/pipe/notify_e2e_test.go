//go:build e2e

package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pipe-dev/pipe/cmd/pipe/internal/cmdline"
)

// A detached run tells a notifier command and a local HTTP receiver of its
// warning, its stop (pipe stop) and, resumed, its warning and its finish:
// each message names the run, its state and counts and the command that
// continues it, and holds no secret (the password in a server URL, the
// webhook's path). A third, failing notifier is logged and stops nothing.
func TestNotifyDetachedRun(t *testing.T) {
	r := newBGRig(t, 40, 2, "--speed", "10", "--think-mean", "60", "--answer-mean", "30")
	hook := newHookReceiver(t)
	secretHook := hook.URL + "/services/T0KEN"
	// The receiver in the file, the command and the failing one on the
	// command line; the server URLs given there carry a password.
	data, _ := os.ReadFile(filepath.Join(r.dir, "p.toml"))
	r.write("p.toml", strings.Replace(string(data), `run_dir = "run"`, fmt.Sprintf("run_dir = %q\nnotify  = [%q]", "run", secretHook), 1))
	var servers []string
	json.Unmarshal([]byte(tomlValue(t, string(data), "servers")), &servers)
	for i, s := range servers {
		servers[i] = strings.Replace(s, "http://", "http://alice:s3cretpw@", 1)
	}
	sj, _ := json.Marshal(servers)
	args := []string{"--commit-every", "1h", "--warn-disk-free", "1e9", "--set", "gen.servers=" + string(sj),
		"--notify", "cat >> " + cmdline.Join([]string{filepath.Join(r.dir, "notes.jsonl")}), "--notify", "exit 3"}
	r.detach(args...)
	deadline := time.Now().Add(time.Minute)
	for {
		if r.journaled() >= 4 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no completions journaled within a minute:\n%s", r.detachedLog())
		}
		time.Sleep(20 * time.Millisecond) // polling for a condition, not timing
	}
	if stdout, stderr, code := r.pipe("stop", "run"); code != 0 {
		t.Fatalf("pipe stop: exit %d\n%s%s", code, stdout, stderr)
	}
	r.detach(args...)
	r.waitState(2*time.Minute, stateFinished)

	fromCmd, _ := os.ReadFile(filepath.Join(r.dir, "notes.jsonl"))
	for name, bodies := range map[string][]string{
		"command":  strings.Split(strings.TrimSpace(string(fromCmd)), "\n"),
		"receiver": hook.got(),
	} {
		all := strings.Join(bodies, "\n")
		if strings.Contains(all, "s3cretpw") || strings.Contains(all, "T0KEN") {
			t.Errorf("%s: a secret in the messages:\n%s", name, all)
		}
		ms := decodeMessages(t, bodies)
		if got := events(ms); got != "warning stopped warning finished" {
			t.Fatalf("%s got events %q, want warning stopped warning finished:\n%s", name, got, all)
		}
		for _, m := range ms {
			if m.Pipeline != "p" || m.RunDir != r.runDir() || m.PID <= 0 || m.Host == "" || m.Text == "" ||
				len(m.Stages) != 4 || m.Stages[2].ID != "gen" ||
				!strings.HasPrefix(m.ContinueWith, "pipe run ") || !strings.Contains(m.ContinueWith, "p.toml") {
				t.Errorf("%s: message lacks a field: %+v", name, m)
			}
		}
		if w := ms[0]; w.State != stateRunning || w.Warning == nil || w.Warning.Kind != "disk" || !strings.Contains(w.Text, "disk of") {
			t.Errorf("%s: warning %+v", name, w)
		}
		// Slack's text escapes its control characters; the fields do not.
		if s := ms[1]; s.State != stateStopped || s.Finished < 4 || !strings.Contains(s.Text, "continue with: pipe run ") || !strings.Contains(s.Text, "p.toml") ||
			!strings.Contains(s.Text, "'cat &gt;&gt; ") || !strings.Contains(s.ContinueWith, "'cat >> ") {
			t.Errorf("%s: stop %+v", name, s)
		}
		if f := ms[3]; f.State != stateFinished || f.Finished != r.prompts || f.Stages[2].Out != f.Stages[2].In || !strings.Contains(f.Text, "finished") {
			t.Errorf("%s: finish %+v", name, f)
		}
	}
	log, _ := os.ReadFile(filepath.Join(r.runDir(), "run.log"))
	if !strings.Contains(string(log), `msg="notify failed; the run goes on" target="exit 3"`) {
		t.Errorf("run.log does not log the failing notifier:\n%s", log)
	}
}

// tomlValue is the raw value of key in a TOML text's first "key = value"
// line.
func tomlValue(t *testing.T, text, key string) string {
	t.Helper()
	for _, line := range strings.Split(text, "\n") {
		k, v, ok := strings.Cut(line, "=")
		if ok && strings.TrimSpace(k) == key {
			return strings.TrimSpace(v)
		}
	}
	t.Fatalf("no %s in:\n%s", key, text)
	return ""
}
