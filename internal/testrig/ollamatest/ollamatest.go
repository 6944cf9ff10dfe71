// Package ollamatest starts a real, third-party OpenAI-compatible inference
// server for tests: ollama v0.6.5, serving a tiny random-weight model with the
// real Qwen3 tokenizer (internal/gguf/tinymodel). Its text is gibberish; its
// tokenization, usage counts, stops and streaming are real.
//
// scripts/setup-ollama.sh builds the server and writes the model under
// .cache/. Without them, Start skips the test, or fails it when PIPE_CI=1.
package ollamatest

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/pipe-dev/pipe/internal/testrig/testenv"
)

// Model is the name the model is served under.
const Model = "pipe-tiny-qwen"

// Paths of the server binary and the model, relative to the repository root;
// the environment variables PIPE_OLLAMA_BIN and PIPE_OLLAMA_GGUF override them.
const (
	BinPath  = ".cache/bin/ollama"
	GGUFPath = ".cache/ollama/pipe-tiny-qwen.gguf"
)

// chatTemplate is Qwen's ChatML in ollama's Go-template form: ollama renders
// the prompt itself and does not run the Jinja template stored in the GGUF.
const chatTemplate = `{{- range .Messages }}<|im_start|>{{ .Role }}
{{ .Content }}<|im_end|>
{{ end }}<|im_start|>assistant
`

// Options tunes the server; zero fields take the defaults given.
type Options struct {
	// Parallel is how many requests the model decodes at once
	// (OLLAMA_NUM_PARALLEL); more wait in ollama's queue. Default 4.
	Parallel int
	// ContextLength is each request's context in tokens (num_ctx); a
	// longer prompt is truncated by ollama. Default 2048.
	ContextLength int
	// StartTimeout bounds starting the server and loading the model;
	// default 60s.
	StartTimeout time.Duration
}

// Start starts a private ollama server on a free loopback port, with its
// models and home in a temporary directory, creates the model and loads it.
// It returns the base URL (http://127.0.0.1:PORT; the OpenAI API is under
// /v1) and the model name to send. The server and its runner processes stop
// when the test ends.
func Start(t testing.TB) (baseURL, model string) {
	t.Helper()
	return StartWith(t, Options{})
}

// StartWith is Start with options.
func StartWith(t testing.TB, opt Options) (baseURL, model string) {
	t.Helper()
	s := start(t, opt)
	return s.baseURL, Model
}

// server is a started server, for this package's own tests.
type server struct {
	baseURL string
	pid     int // also its process group
}

func start(t testing.TB, opt Options) server {
	t.Helper()
	if opt.Parallel == 0 {
		opt.Parallel = 4
	}
	if opt.ContextLength == 0 {
		opt.ContextLength = 2048
	}
	if opt.StartTimeout == 0 {
		opt.StartTimeout = 60 * time.Second
	}
	bin, gguf := paths(t)

	dir := t.TempDir()
	home, models := filepath.Join(dir, "home"), filepath.Join(dir, "models")
	for _, d := range []string{home, models} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	logPath := filepath.Join(dir, "ollama.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer logFile.Close() // the child keeps its own descriptor

	addr := freeLoopbackAddr(t)
	cmd := exec.Command(bin, "serve")
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.Env = append(environWithout("HOME", "OLLAMA_"),
		"HOME="+home,
		"OLLAMA_HOST="+addr,
		"OLLAMA_MODELS="+models,
		fmt.Sprintf("OLLAMA_NUM_PARALLEL=%d", opt.Parallel),
		"OLLAMA_MAX_LOADED_MODELS=1",
		"OLLAMA_KEEP_ALIVE=-1", // never unload the model during a test
		"OLLAMA_NOPRUNE=1",
	)
	cmd.SysProcAttr = sysProcAttr()
	begin := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatalf("ollamatest: starting %s: %v", bin, err)
	}
	exited := make(chan struct{})
	go func() {
		cmd.Wait()
		close(exited)
	}()
	t.Cleanup(func() {
		stop(t, cmd, exited)
		if t.Failed() {
			t.Logf("ollamatest: server log (%s):\n%s", logPath, tail(logPath, 40))
		}
	})

	baseURL := "http://" + addr
	ctx, cancel := context.WithTimeout(context.Background(), opt.StartTimeout)
	defer cancel()
	// Our own connections, closed when done, so that no idle keep-alive
	// connection (and its goroutines) outlives Start.
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}
	// A failure below fails the test; the cleanup above then logs the
	// server's log.
	if err := waitReady(ctx, client, baseURL, exited); err != nil {
		t.Fatalf("ollamatest: server did not start: %v", err)
	}
	if err := createModel(ctx, client, baseURL, gguf, opt); err != nil {
		t.Fatalf("ollamatest: creating the model: %v", err)
	}
	// An empty generate request loads the model into a runner, so the
	// first test request does not pay for it.
	if err := post(ctx, client, baseURL+"/api/generate", map[string]any{"model": Model, "keep_alive": -1}, nil); err != nil {
		t.Fatalf("ollamatest: loading the model: %v", err)
	}
	t.Logf("ollamatest: %s serving %s at %s (ready in %v)", bin, Model, baseURL, time.Since(begin).Round(time.Millisecond))
	return server{baseURL: baseURL, pid: cmd.Process.Pid}
}

// paths finds the server and the model, or skips (fails under PIPE_CI=1).
func paths(t testing.TB) (bin, gguf string) {
	t.Helper()
	root := repoRoot()
	bin = os.Getenv("PIPE_OLLAMA_BIN")
	if bin == "" {
		bin = filepath.Join(root, BinPath)
	}
	gguf = os.Getenv("PIPE_OLLAMA_GGUF")
	if gguf == "" {
		gguf = filepath.Join(root, GGUFPath)
	}
	for _, p := range []string{bin, gguf} {
		if _, err := os.Stat(p); err != nil {
			testenv.Missing(t, fmt.Sprintf("ollamatest: %v", err), "scripts/setup-ollama.sh, which builds ollama v0.6.5 and writes the test model")
		}
	}
	return bin, gguf
}

// repoRoot is the nearest directory above the working directory (a test's
// package directory) that holds go.mod, or "." if there is none.
func repoRoot() string {
	dir, err := os.Getwd()
	if err != nil {
		return "."
	}
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return d
		}
		if filepath.Dir(d) == d {
			return "."
		}
	}
}

// freeLoopbackAddr asks the kernel for a free port. Another process could take
// it before ollama binds it; then the server fails to start, with its log.
func freeLoopbackAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("ollamatest: no free loopback port: %v", err)
	}
	defer l.Close()
	return l.Addr().String()
}

// environWithout is the environment less HOME and any OLLAMA_* setting of
// the user's, which must not leak into the private server.
func environWithout(prefixes ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		keep := true
		for _, p := range prefixes {
			if name == p || strings.HasSuffix(p, "_") && strings.HasPrefix(name, p) {
				keep = false
			}
		}
		if keep {
			env = append(env, kv)
		}
	}
	return env
}

func waitReady(ctx context.Context, client *http.Client, baseURL string, exited <-chan struct{}) error {
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, baseURL+"/api/version", nil)
		if resp, err := client.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-exited:
			return errors.New("the server exited")
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
}

// createModel uploads the GGUF as a blob and creates the model from it, with
// the chat template and options ollama needs to serve it.
func createModel(ctx context.Context, client *http.Client, baseURL, gguf string, opt Options) error {
	digest, err := fileDigest(gguf)
	if err != nil {
		return err
	}
	f, err := os.Open(gguf)
	if err != nil {
		return err
	}
	defer f.Close()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, baseURL+"/api/blobs/"+digest, f)
	if err != nil {
		return err
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated && resp.StatusCode != http.StatusOK {
		return fmt.Errorf("uploading %s: %s: %s", gguf, resp.Status, body)
	}

	var status struct {
		Status string `json:"status"`
		Error  string `json:"error"`
	}
	err = post(ctx, client, baseURL+"/api/create", map[string]any{
		"model":    Model,
		"files":    map[string]string{filepath.Base(gguf): digest},
		"template": chatTemplate,
		"parameters": map[string]any{
			"num_ctx": opt.ContextLength,
			// One thread: ggml's threads spin at barriers, and on a small,
			// busy machine two threads make each token many times slower.
			"num_thread": 1,
		},
		"stream": false,
	}, &status)
	if err != nil {
		return err
	}
	if status.Status != "success" {
		return fmt.Errorf("create: status %q, error %q", status.Status, status.Error)
	}
	return nil
}

var digests sync.Map // path → "sha256:…", computed once per test binary

func fileDigest(path string) (string, error) {
	if d, ok := digests.Load(path); ok {
		return d.(string), nil
	}
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	d := "sha256:" + hex.EncodeToString(h.Sum(nil))
	digests.Store(path, d)
	return d, nil
}

// post sends JSON and decodes a JSON answer into out (if not nil); a status
// other than 200 is an error carrying the body.
func post(ctx context.Context, client *http.Client, url string, in, out any) error {
	b, err := json.Marshal(in)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(b))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s: %s", url, resp.Status, bytes.TrimSpace(body))
	}
	if out != nil {
		return json.Unmarshal(body, out)
	}
	return nil
}

// stop ends the server and its runners: SIGTERM lets ollama unload its
// runners and exit; whatever is left of the process group after that (or
// after 10s) is killed.
func stop(t testing.TB, cmd *exec.Cmd, exited <-chan struct{}) {
	pgid := cmd.Process.Pid // the server leads its own process group
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-exited:
	case <-time.After(10 * time.Second):
		t.Logf("ollamatest: server ignored SIGTERM for 10s; killing it")
	}
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
	<-exited
	// Runners are the server's children in its group; wait until the group
	// is empty so no process outlives the test.
	deadline := time.Now().Add(5 * time.Second)
	for live := groupMembers(pgid); len(live) > 0; live = groupMembers(pgid) {
		if time.Now().After(deadline) {
			t.Errorf("ollamatest: processes %v of the server's group still alive after SIGKILL", live)
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// tail returns the last n lines of a file.
func tail(path string, n int) string {
	f, err := os.Open(path)
	if err != nil {
		return err.Error()
	}
	defer f.Close()
	var lines []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		lines = append(lines, sc.Text())
		if len(lines) > n {
			lines = lines[1:]
		}
	}
	return strings.Join(lines, "\n")
}
