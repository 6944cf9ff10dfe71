#!/usr/bin/env bash
# Prepares the real third-party inference server the integration tests run
# against (internal/testrig/ollamatest), all under .cache/ (gitignored):
#   .cache/bin/ollama                  ollama v0.6.5, built from the Go module
#                                      proxy with cgo (a few minutes, once)
#   .cache/ollama/pipe-tiny-qwen.gguf  a tiny random-weight model with the real
#                                      Qwen3 tokenizer (internal/testrig/gguf/cmd/mkmodel)
# Idempotent: an ollama binary already built at that version is kept; the
# model is rewritten each time (about a second; the same bytes every time).
# Nothing here downloads anything at test time; the tests serve on loopback.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
version=v0.6.5
bin_dir=$root/.cache/bin
bin=$bin_dir/ollama
model=$root/.cache/ollama/pipe-tiny-qwen.gguf

built_version() {
  go version -m "$1" 2>/dev/null | awk '$1 == "mod" && $2 == "github.com/ollama/ollama" { print $3 }'
}

if [ "$(built_version "$bin")" = "$version" ]; then
  echo "setup-ollama: $bin is already ollama $version"
else
  for tool in gcc g++; do
    if ! command -v "$tool" >/dev/null; then
      echo "setup-ollama: ollama builds with cgo and needs $tool (apt-get install build-essential)" >&2
      exit 1
    fi
  done
  echo "setup-ollama: building ollama $version into $bin_dir (cgo; a few minutes)"
  start=$(date +%s)
  # Outside our module: go install pkg@version never touches our go.mod.
  (cd / && GOBIN=$bin_dir CGO_ENABLED=1 GOFLAGS=-buildvcs=false go install "github.com/ollama/ollama@$version")
  got=$(built_version "$bin")
  if [ "$got" != "$version" ]; then
    echo "setup-ollama: built $bin reports version '$got', want $version" >&2
    exit 1
  fi
  echo "setup-ollama: built ollama $version in $(( $(date +%s) - start ))s"
fi

"$root/scripts/fetch-qwen3.sh"
(cd "$root" && go run ./internal/testrig/gguf/cmd/mkmodel -tokenizer "${PIPE_QWEN3_DIR:-$root/.cache/qwen3}" -o "$model")
