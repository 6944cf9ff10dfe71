//go:build e2e

package stages

import (
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pipe-dev/pipe/internal/testrig/testenv"
)

// pipeCmd runs `pipe ARGS...` with extra environment and returns its whole
// output (stdout and stderr) and error.
func pipeCmd(t *testing.T, env []string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(testenv.PipeBinary(t), args...)
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// writeGenRun writes prompts.jsonl and p.toml (src) into a new directory.
func writeGenRun(t *testing.T, src string, n int) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "prompts.jsonl"), []byte(genPrompts(n)), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "p.toml"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// A `pipe sim --api-key` server (SGLang's --api-key): a `pipe run` without
// api_key_env fails at start with the server's 401, named and explained,
// the key nowhere; with api_key_env it generates everything.
func TestGenerateAPIKeyAgainstSimProcess(t *testing.T) {
	bin := testenv.PipeBinary(t)
	key := randomSecret(t, "sk-")
	s := testenv.StartSim(t, bin, 2, "--api-key", key, "--speed", "200", "--think-mean", "60", "--answer-mean", "20")
	env := []string{"PIPE_TEST_KEY=" + key}

	dir := writeGenRun(t, genPipeline(serversKey(s.URLs)+fastGenKeys+"ready_timeout = \"10m\"\n"), 10)
	start := time.Now()
	out, err := pipeCmd(t, env, "run", filepath.Join(dir, "p.toml"))
	if err == nil {
		t.Fatalf("pipe run without the key succeeded:\n%s", out)
	}
	if d := time.Since(start); d > 60*time.Second {
		t.Errorf("failing took %v: it waited for ready_timeout", d)
	}
	for _, want := range []string{s.URLs[0], "credentials refused", "401: Unauthorized", "no API key was sent", `set api_key_env = "VAR"`} {
		if !strings.Contains(out, want) {
			t.Errorf("output does not say %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, key) {
		t.Errorf("output shows the key:\n%s", out)
	}

	dir = writeGenRun(t, genPipeline(serversKey(s.URLs)+fastGenKeys+readyKey+"api_key_env = \"PIPE_TEST_KEY\"\nconcurrency = 4\n"), 60)
	out, err = pipeCmd(t, env, "run", filepath.Join(dir, "p.toml"))
	if err != nil {
		t.Fatalf("pipe run with api_key_env: %v\n%s", err, out)
	}
	if recs := readRecords(t, filepath.Join(dir, "out/completions.jsonl")); len(recs) != 60 {
		t.Fatalf("%d completions, want 60\n%s", len(recs), out)
	}
	if strings.Contains(out, key) {
		t.Errorf("output shows the key:\n%s", out)
	}
}

// Secrets appear nowhere: a run with a password in a server URL (sent as
// Basic auth), an API key and an extra header from the environment, faults
// that fail and reject records and a dead server that is logged as not
// ready. Every file of the run (outputs, failed/, run.log, status, the run
// directory) and everything pipe check, pipe run --dry-run and pipe run
// print is searched for each secret: none is found, and the servers are
// named by their URLs without user:password.
func TestGenerateSecretsAppearNowhere(t *testing.T) {
	bin := testenv.PipeBinary(t)
	user, pw := randomSecret(t, "u"), randomSecret(t, "pw")
	key, team := randomSecret(t, "sk-"), randomSecret(t, "team-")
	secrets := map[string]string{"user": user, "password": pw, "api key": key, "header value": team}
	fast := []string{"--speed", "200", "--think-mean", "60", "--answer-mean", "20"}
	plain := testenv.StartSim(t, bin, 1, append(fast, "--fault", "500:0.2", "--fault", "400:0.05")...)
	keyed := testenv.StartSim(t, bin, 1, append(fast, "--api-key", key, "--fault", "503:0.1")...)
	deadURL := testenv.DeadURL(t)

	withUser := func(u string) string { return strings.Replace(u, "http://", "http://"+user+":"+pw+"@", 1) }
	servers := fmt.Sprintf(`servers = [{url = %q, api_key_env = ""}, %q, {url = %q, api_key_env = ""}]`,
		withUser(plain.URLs[0]), keyed.URLs[0], withUser(deadURL)+"/")
	src := "[pipeline]\nmax_failed = \"100%\"\n" + genPipeline(servers+"\n"+fastGenKeys+readyKey+
		"api_key_env = \"PIPE_TEST_KEY\"\nheaders_env = {X-Team-Token = \"PIPE_TEST_TEAM\"}\nmax_attempts = 1\nconcurrency = 4\n")
	dir := writeGenRun(t, src, 300)
	env := []string{"PIPE_TEST_KEY=" + key, "PIPE_TEST_TEAM=" + team}
	p := filepath.Join(dir, "p.toml")

	outputs := map[string]string{}
	var err2 error
	outputs["pipe check"], err2 = pipeCmd(t, env, "check", p)
	if err2 != nil {
		t.Fatalf("pipe check: %v\n%s", err2, outputs["pipe check"])
	}
	outputs["pipe run --dry-run"], err2 = pipeCmd(t, env, "run", "--dry-run", p)
	if err2 != nil {
		t.Fatalf("pipe run --dry-run: %v\n%s", err2, outputs["pipe run --dry-run"])
	}
	outputs["pipe run"], err2 = pipeCmd(t, env, "run", p)
	if err2 != nil {
		t.Logf("pipe run: %v", err2) // failed records may make the exit non-zero; the search is the point
	}
	outputs["pipe inspect"], err2 = pipeCmd(t, env, "inspect", filepath.Join(dir, "runs", "p"))
	if err2 != nil {
		t.Logf("pipe inspect: %v\n%s", err2, outputs["pipe inspect"])
	}

	// The servers are named, without user:password.
	for _, want := range []string{plain.URLs[0], keyed.URLs[0], deadURL} {
		if !strings.Contains(outputs["pipe run --dry-run"], want) {
			t.Errorf("the dry run does not name %s:\n%s", want, outputs["pipe run --dry-run"])
		}
	}
	recs := readRecords(t, filepath.Join(dir, "out/completions.jsonl"))
	byServer := map[string]int{}
	for _, r := range recs {
		byServer[r.Completion.Server]++
	}
	if byServer[plain.URLs[0]] == 0 || byServer[keyed.URLs[0]] == 0 || len(byServer) != 2 {
		t.Errorf("completions by server %v, want both live servers by their bare URLs\n%s", byServer, outputs["pipe run"])
	}

	// Everything the run wrote, except the pipeline file the user wrote.
	seen := map[string]bool{}
	sawFailed, sawDead := false, false
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || path == p {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		seen[filepath.ToSlash(rel)] = true
		text := string(b)
		for what, s := range secrets {
			if strings.Contains(text, s) {
				t.Errorf("%s holds the %s", rel, what)
			}
		}
		sawFailed = sawFailed || strings.HasPrefix(rel, "runs/") && strings.Contains(rel, "failed") && strings.Contains(text, "http://127.0.0.1:")
		sawDead = sawDead || strings.Contains(text, deadURL)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for name, out := range outputs {
		for what, s := range secrets {
			if strings.Contains(out, s) {
				t.Errorf("%s printed the %s:\n%s", name, what, out)
			}
		}
	}
	for _, want := range []string{"runs/p/run.log", "runs/p/status.json", "runs/p/failed/gen.jsonl", "out/completions.jsonl", "out/rejected.jsonl"} {
		if !seen[want] {
			t.Errorf("no %s among the files searched: %v", want, seen)
		}
	}
	if !sawFailed || !sawDead {
		t.Errorf("failed records naming a server: %v; the dead server named in a file: %v", sawFailed, sawDead)
	}
}
