//go:build e2e

package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"

	"github.com/pipe-dev/pipe/internal/testrig/testenv"
)

// Escape sequences a hostile server or prompt file plants: an OSC retitles
// the terminal, a CSI clears the screen, U+009B is the 8-bit CSI.
const (
	oscTitle = "\x1b]0;pwned\x07"
	csiClear = "\x1b[2J"
)

// hostileServer is a proxy in front of a simulated server that answers the
// first generation of a prompt containing "p-404" with a 404 whose body is
// escape sequences, and puts them into the finish_reason of a prompt
// containing "p-finish".
//
// Its server-info paths redirect to a capture server on another port,
// which records every request that reaches it.
func hostileServer(t *testing.T, backend string) (front string, captured func() []string) {
	var cmu sync.Mutex
	var got []string
	capture := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		cmu.Lock()
		got = append(got, fmt.Sprintf("%s %s Authorization=%q X-Team=%q", r.Method, r.URL.Path, r.Header.Get("Authorization"), r.Header.Get("X-Team")))
		cmu.Unlock()
	}))
	t.Cleanup(capture.Close)
	captured = func() []string {
		cmu.Lock()
		defer cmu.Unlock()
		return append([]string(nil), got...)
	}
	u, err := url.Parse(backend)
	if err != nil {
		t.Fatal(err)
	}
	rp := httputil.NewSingleHostReverseProxy(u)
	rp.ModifyResponse = func(resp *http.Response) error {
		finish, nan := resp.Request.Header.Get("X-Finish") != "", resp.Request.Header.Get("X-NaN") != ""
		if !(finish || nan) || resp.StatusCode != http.StatusOK {
			return nil
		}
		var v map[string]any
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if json.Unmarshal(body, &v) == nil {
			if cs, ok := v["choices"].([]any); ok && len(cs) > 0 && finish {
				cs[0].(map[string]any)["finish_reason"] = "stop" + oscTitle + csiClear + "\u009b2J"
			}
			if u, ok := v["usage"].(map[string]any); ok && nan {
				u["prompt_tokens"] = json.Number("18446744073709551616")
				u["completion_tokens"] = json.Number("4294967297")
				v["meta_info"] = map[string]any{"spec_accept_length": "NaN", "spec_verify_ct": json.Number("1e999")}
			}
			body, _ = json.Marshal(v)
		}
		resp.Body = io.NopCloser(bytes.NewReader(body))
		resp.ContentLength = int64(len(body))
		resp.Header.Del("Content-Length")
		return nil
	}
	var mu sync.Mutex
	sent404 := false
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/get_server_info" || r.URL.Path == "/server_info" {
			http.Redirect(w, r, capture.URL+r.URL.Path, http.StatusFound)
			return
		}
		if r.Method == http.MethodPost {
			body, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(body))
			mu.Lock()
			first := !sent404 && bytes.Contains(body, []byte("p-404"))
			if first {
				sent404 = true
			}
			mu.Unlock()
			if first {
				w.WriteHeader(http.StatusNotFound)
				io.WriteString(w, oscTitle+csiClear+"no such model\u009b2J")
				return
			}
			if bytes.Contains(body, []byte("p-finish")) {
				r.Header.Set("X-Finish", "1")
			}
			if bytes.Contains(body, []byte("p-nan")) {
				r.Header.Set("X-NaN", "1")
			}
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL, captured
}

// Text from outside — a server's error body, a finish_reason, prompt ids —
// never reaches a terminal raw: not through pipe run's live display on a
// pseudo-terminal, its warnings and errors, nor pipe status, inspect or
// report. It is shown escaped instead.
func TestHostileTextIsShownEscaped(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: real processes on a pseudo-terminal")
	}
	bin := testenv.PipeBinary(t)
	sim := testenv.StartSim(t, bin, 1, "--speed", "50")
	front, captured := hostileServer(t, sim.URLs[0])
	dir := t.TempDir()
	var prompts strings.Builder
	for i := range 30 {
		id, text := fmt.Sprintf("ok-%d", i), fmt.Sprintf("prompt %d", i)
		switch i {
		case 3:
			text = "p-404 please"
		case 5, 6:
			text = "p-finish please"
		case 7:
			id = "evil" + oscTitle + csiClear
		case 9, 10:
			text = "p-nan please"
		}
		line, _ := json.Marshal(map[string]string{"id": id, "prompt": text})
		prompts.Write(append(line, '\n'))
	}
	os.WriteFile(filepath.Join(dir, "p.jsonl"), []byte(prompts.String()), 0o644)
	os.WriteFile(filepath.Join(dir, "p.toml"), []byte(fmt.Sprintf(`
[pipeline]
run_dir = "run"

[[stage]]
id   = "prompts"
kind = "read-prompts"
path = "p.jsonl"

[[stage]]
id    = "gen"
kind  = "generate"
input = "prompts"
servers = [%q]
concurrency = 4
max_output_tokens = 512
api_key_env = "HOSTILE_TEST_KEY"
headers_env = {"X-Team" = "HOSTILE_TEST_TEAM"}

[[stage]]
id    = "out"
kind  = "write-jsonl"
input = ["gen", "gen.rejected"]
path  = "out.jsonl"
`, front)), 0o644)

	cmd := exec.Command(bin, "run", "p.toml")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "HOSTILE_TEST_KEY=key-8c1f", "HOSTILE_TEST_TEAM=team-77d0")
	ptmx, err := pty.StartWithSize(cmd, &pty.Winsize{Rows: 40, Cols: 160})
	if err != nil {
		t.Fatal(err)
	}
	defer ptmx.Close()
	var screen bytes.Buffer
	copied := make(chan struct{})
	go func() { io.Copy(&screen, ptmx); close(copied) }()
	runErr := waitCmd(cmd, 2*time.Minute)
	<-copied
	outputs := map[string]string{"pipe run (terminal)": screen.String()}
	for _, args := range [][]string{{"status", "run"}, {"inspect", "run"}, {"inspect", "out.jsonl"}, {"report", "run"}} {
		c := exec.Command(bin, args...)
		c.Dir = dir
		out, _ := c.CombinedOutput()
		outputs["pipe "+strings.Join(args, " ")] = string(out)
	}
	if runErr != nil {
		t.Fatalf("pipe run: %v\n%s", runErr, screen.String())
	}
	seen := false
	for name, out := range outputs {
		for _, raw := range []string{"\x1b]", csiClear, "\u009b", "\x07"} {
			if strings.Contains(out, raw) {
				t.Errorf("%s: a raw %q reached the terminal:\n%s", name, raw, tail(out, 3000))
			}
		}
		if name != "pipe run (terminal)" && strings.ContainsRune(out, 0x1b) {
			t.Errorf("%s: an ESC byte in the output:\n%q", name, tail(out, 3000))
		}
		seen = seen || strings.Contains(out, `\u001b]0;pwned\u0007`)
		t.Logf("%s:\n%s", name, tail(out, 1500))
	}
	if !seen {
		t.Error("the hostile text was not shown escaped anywhere")
	}
	// The info paths' redirects to another port were not followed: neither
	// the key nor the extra header reached the capture server.
	for _, q := range captured() {
		t.Errorf("a redirect was followed: %s", q)
	}
	// NaN, 1e999 and 2^64 in an answer's figures: the records stand, the
	// figures are dropped, and the server's line names them.
	if n := len(readJSONL(t, filepath.Join(dir, "out.jsonl"))); n != 30 {
		t.Errorf("%d records written, want 30", n)
	}
	for _, rec := range readJSONL(t, filepath.Join(dir, "out.jsonl")) {
		for k, v := range rec {
			if f, ok := v.(float64); ok && (f < 0 || f > 1<<31) {
				t.Errorf("record %v: %s = %v", rec["id"], k, v)
			}
		}
	}
	if st := outputs["pipe status run"]; !strings.Contains(st, "dropped_spec_accept_length 2") || !strings.Contains(st, "dropped_prompt_tokens 2") {
		t.Errorf("pipe status does not name the dropped figures:\n%s", st)
	}
}

// endlessServer is a proxy in front of a simulated server that answers
// every generation of a prompt containing "p-endless" with a body that
// never ends.
func endlessServer(t *testing.T, backend string) string {
	u, err := url.Parse(backend)
	if err != nil {
		t.Fatal(err)
	}
	rp := httputil.NewSingleHostReverseProxy(u)
	chunk := []byte(`{"choices":[{"message":{"content":"` + strings.Repeat("x", 64<<10))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		if !bytes.Contains(body, []byte("p-endless")) {
			rp.ServeHTTP(w, r)
			return
		}
		for r.Context().Err() == nil {
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// Never-ending answers at concurrency 48 fail those records (counted, in
// RUN_DIR/failed) and the run finishes with the others, its peak RSS far
// below a gigabyte: answers in flight share one budget across the fleet.
func TestEndlessAnswersThroughPipeRun(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: real processes")
	}
	bin := testenv.PipeBinary(t)
	sim := testenv.StartSim(t, bin, 1, "--speed", "50")
	front := endlessServer(t, sim.URLs[0])
	dir := t.TempDir()
	var prompts strings.Builder
	for i := range 96 {
		text := fmt.Sprintf("prompt %d", i)
		if i%2 == 0 {
			text = "p-endless " + text
		}
		line, _ := json.Marshal(map[string]string{"id": fmt.Sprint(i), "prompt": text})
		prompts.Write(append(line, '\n'))
	}
	os.WriteFile(filepath.Join(dir, "p.jsonl"), []byte(prompts.String()), 0o644)
	os.WriteFile(filepath.Join(dir, "p.toml"), []byte(fmt.Sprintf(`
[pipeline]
run_dir    = "run"
max_failed = 100

[[stage]]
id   = "prompts"
kind = "read-prompts"
path = "p.jsonl"

[[stage]]
id    = "gen"
kind  = "generate"
input = "prompts"
servers = [%q]
concurrency = 48
max_attempts = 2
breaker_failures = 1000
max_output_tokens = 256

[[stage]]
id    = "out"
kind  = "write-jsonl"
input = ["gen", "gen.rejected"]
path  = "out.jsonl"
`, front)), 0o644)
	cmd := exec.Command(bin, "run", "p.toml")
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	// The never-ending answers failed (within max_failed): the run goes to
	// its end and exits 1, as they are not finished.
	if code := cmd.ProcessState.ExitCode(); code != exitFailed || !strings.Contains(string(out), "records failed: 48 in stage \"gen\"") {
		t.Fatalf("pipe run: %v, want exit %d naming the 48 failed records\n%s", err, exitFailed, out)
	}
	peak := cmd.ProcessState.SysUsage().(*syscall.Rusage).Maxrss << 10
	t.Logf("48 never-ending answers in flight at once, 2 attempts each: pipe run's peak RSS %d MiB", peak>>20)
	if peak > 1<<30 {
		t.Errorf("peak RSS %d MiB", peak>>20)
	}
	if n := len(readJSONL(t, filepath.Join(dir, "out.jsonl"))); n != 48 {
		t.Errorf("%d records written, want the 48 with an answer", n)
	}
	failed := readJSONL(t, filepath.Join(dir, "run", "failed", "gen.jsonl"))
	if len(failed) != 48 {
		t.Errorf("%d records failed, want the 48 never-ending ones", len(failed))
	}
	if len(failed) > 0 && !strings.Contains(fmt.Sprint(failed[0]), "budget for them") {
		t.Errorf("the failed record does not say why: %v", failed[0])
	}
}

// Servers that serve another model than the tokenizer's are warned about,
// naming both; the same servers with the tokenizer's model are not.
func TestServedModelAgainstTokenizer(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: real processes")
	}
	bin := testenv.PipeBinary(t)
	qwen := testenv.Qwen3Dir(t)
	for _, tc := range []struct {
		model string
		warn  bool
	}{{"meta-llama/Llama-3.1-8B", true}, {"Qwen/Qwen3-32B", false}} {
		sim := testenv.StartSim(t, bin, 1, "--speed", "100", "--tokenizer", qwen, "--model", tc.model)
		dir := t.TempDir()
		os.WriteFile(filepath.Join(dir, "p.jsonl"), []byte(`{"id":"1","prompt":"hi"}`+"\n"), 0o644)
		os.WriteFile(filepath.Join(dir, "p.toml"), []byte(fmt.Sprintf(`
[pipeline]
run_dir = "run"

[[stage]]
id   = "prompts"
kind = "read-prompts"
path = "p.jsonl"

[[stage]]
id    = "gen"
kind  = "generate"
input = "prompts"
servers = [%q]
max_output_tokens = 256

[[stage]]
id        = "tok"
kind      = "tokenize-and-mask"
input     = "gen"
tokenizer = %q

[[stage]]
id    = "out"
kind  = "write-jsonl"
input = ["tok", "tok.rejected"]
path  = "out.jsonl"
`, sim.URLs[0], qwen)), 0o644)
		cmd := exec.Command(bin, "run", "p.toml")
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s: pipe run: %v\n%s", tc.model, err, out)
		}
		want := fmt.Sprintf(`warning: stage "tok": the servers of stage "gen" serve %q, but tokenizer %s is "qwen3"`, tc.model, qwen)
		if got := strings.Contains(string(out), want); got != tc.warn {
			t.Errorf("%s: warned %v, want %v:\n%s", tc.model, got, tc.warn, out)
		}
	}
}
