// Package testenv finds what the tests need that the project's scripts
// install (the Qwen3 tokenizer files, references, servers). A missing
// component skips the test with the script to run — or fails it when
// PIPE_CI=1 (set by scripts/test.sh), so CI never skips silently.
package testenv

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// Missing skips t, or fails it under PIPE_CI=1, with msg and the setup hint.
func Missing(t testing.TB, msg, hint string) {
	t.Helper()
	msg = fmt.Sprintf("%s (run %s)", msg, hint)
	if os.Getenv("PIPE_CI") == "1" {
		t.Fatal(msg)
	}
	t.Skip(msg)
}

// RepoRoot is the nearest directory above the working directory (a test's
// package directory) that holds go.mod.
func RepoRoot(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the test directory")
		}
		dir = parent
	}
}

// Qwen3Dir is the directory with the real Qwen3 tokenizer files:
// $PIPE_QWEN3_DIR, or .cache/qwen3 where scripts/fetch-qwen3.sh puts them.
func Qwen3Dir(t testing.TB) string {
	t.Helper()
	dir := os.Getenv("PIPE_QWEN3_DIR")
	if dir == "" {
		dir = filepath.Join(RepoRoot(t), ".cache", "qwen3")
	}
	if _, err := os.Stat(filepath.Join(dir, "tokenizer.json")); err != nil {
		Missing(t, "no Qwen3 tokenizer.json in "+dir, "scripts/fetch-qwen3.sh")
	}
	return dir
}

// TinyQwen3Dir is the checked-in Qwen3-like tokenizer for unit tests
// (testdata/tokenizers/qwen3-tiny, written by scripts/make-tiny-tokenizer.py):
// Qwen3's pre-tokenizer, added tokens, ids and chat template with the
// first 3,000 merges of its vocabulary. A test that needs "a tokenizer
// with Qwen3's template and <think>" uses it and runs on a fresh clone;
// a test that compares with Qwen3's real ids (a reference, a server's
// output) uses Qwen3Dir and belongs to the e2e layer.
func TinyQwen3Dir(t testing.TB) string {
	t.Helper()
	dir := filepath.Join(RepoRoot(t), "testdata", "tokenizers", "qwen3-tiny")
	if _, err := os.Stat(filepath.Join(dir, "tokenizer.json")); err != nil {
		t.Fatalf("the checked-in tokenizer fixture is missing: %v", err)
	}
	return dir
}
