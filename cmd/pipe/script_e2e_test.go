//go:build e2e

package main

import (
	"testing"

	"github.com/pipe-dev/pipe/internal/testrig/testenv"
)

// TestScriptsE2E runs the CLI scripts whose output holds the real Qwen3
// tokenizer's ids (scripts/fetch-qwen3.sh installs it).
func TestScriptsE2E(t *testing.T) {
	runScripts(t, "testdata/script-e2e", testenv.Qwen3Dir(t))
}
