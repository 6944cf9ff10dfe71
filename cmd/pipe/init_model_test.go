package main

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Without --model-dir, pipe init uses the tokenizer_path the servers
// report in /get_model_info when it is on this machine, says so, and
// writes it into the file; a path that is not here is named in the error.
func TestInitModelDirFromServers(t *testing.T) {
	dir := t.TempDir()
	model := filepath.Join(dir, "Qwen3-8B")
	os.Mkdir(model, 0o755)
	os.WriteFile(filepath.Join(model, "tokenizer.json"), []byte(`{"version": "1.0", "model": {"type": "BPE", "unk_token": "a", "vocab": {"a": 0}, "merges": []}}`), 0o644)
	prompts := filepath.Join(dir, "prompts.jsonl")
	os.WriteFile(prompts, []byte(`{"id": "a", "prompt": "hello"}`+"\n"), 0o644)
	reported := model
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/get_model_info" {
			http.NotFound(w, r)
			return
		}
		fmt.Fprintf(w, `{"model_path": %q, "tokenizer_path": %q, "is_generation": true}`, reported, reported)
	}))
	defer srv.Close()

	initCmd := func(out string) (string, string, int) {
		var o, e strings.Builder
		code := run([]string{"init", "regenerate", "-o", out, "--prompts", prompts, "--servers", srv.URL, "--output-dir", filepath.Join(dir, "runs")},
			&stdio{Out: &o, Err: &e})
		return o.String(), e.String(), code
	}
	_, stderr, code := initCmd(filepath.Join(dir, "a.toml"))
	want := fmt.Sprintf("pipe init: no --model-dir: using %s, the tokenizer path %s/get_model_info reports (it has tokenizer.json here)\n", model, srv.URL)
	if code != 0 || stderr != want {
		t.Fatalf("exit %d, stderr:\n%s\nwant:\n%s", code, stderr, want)
	}
	data, _ := os.ReadFile(filepath.Join(dir, "a.toml"))
	if !strings.Contains(string(data), fmt.Sprintf("model_dir = %q", model)) {
		t.Fatalf("the file does not use the reported directory:\n%s", data)
	}

	reported = "Qwen/Qwen3-8B" // a Hugging Face id, not a directory here
	_, stderr, code = initCmd(filepath.Join(dir, "b.toml"))
	if code != exitUsage || !strings.Contains(stderr, "/get_model_info reports tokenizer_path Qwen/Qwen3-8B, which is not on this machine") || !strings.Contains(stderr, "give --model-dir DIR") {
		t.Fatalf("exit %d, stderr:\n%s", code, stderr)
	}
	if _, err := os.Stat(filepath.Join(dir, "b.toml")); err == nil {
		t.Fatal("b.toml written")
	}
}
