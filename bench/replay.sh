#!/usr/bin/env bash
# bench/replay.sh — re-validating and re-tokenizing journaled completions
# (pipe run --from gen=RUN_DIR) against generating them on pipe sim, in the
# same run of this script.
#
# The demo graph over N prompts (default 900,000) runs on sim:7 × 48 (in
# process, simulated GPU time compressed by SPEED, default 10^6, so what is
# measured is pipe, not a GPU); then the same file is replayed from its
# journal with a stricter rule (--set check.min_answer_length=MIN), with no
# server. It prints wall and CPU time of both, per 1,000 completions, and
# their ratio. On a real fleet generation takes minutes a completion; the
# replay's figures do not depend on it. Both runs' times include their
# end-of-run report; the replay's also its comparison with the original
# (pipe report A B reads both runs' outputs).
#
# 2026-12-01, 2 cores shared by seven jobs (load 7-12 during generation,
# 5-8 during the replay), N=900000 (journal 14 GB: 16 KB a completion, most
# of it prompt and output ids): generate 2278.6 s wall / 1208.9 s CPU
# (2.532 s / 1.343 s per 1,000, compressed sim time), replay 688.8 s /
# 638.8 s (0.765 s / 0.710 s per 1,000): 0.30x wall, 0.53x CPU. The rule
# moved no id (every accepted answer already had 20 tokens); pipe report
# A B over the two runs: 6.5 s wall, 10.0 s CPU, 230 MB peak RSS. At
# N=20000 (an earlier tree, whose comparison read both runs' outputs
# whole): 0.68x wall, 0.86x CPU.
#
#   bench/replay.sh
#   N=20000 bench/replay.sh
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
N=${N:-900000}
SPEED=${SPEED:-1000000}
MIN=${MIN:-20}
scripts/fetch-qwen3.sh >/dev/null

T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
go build -o "$T/pipe" ./cmd/pipe

awk -v n="$N" 'BEGIN {
	for (i = 0; i < n; i++) printf "{\"id\":\"r-%07d\",\"messages\":[{\"role\":\"user\",\"content\":\"Question %d: explain the idea behind exercise %d in a few steps.\"}]}\n", i, i, i % 977
}' >"$T/prompts.jsonl"

sed -e "s|^servers .*|servers           = [\"sim:7?speed=$SPEED\&faults=empty-answer:0.05,no-think-end:0.03\"]|" \
	-e "s|^concurrency .*|concurrency       = 48|" \
	-e "s|^max_output_tokens .*|max_output_tokens = 2048|" \
	-e "s|^tokenizer = .*|tokenizer = \"$root/.cache/qwen3\"|" \
	-e "s|^path = \"../testdata/prompts/demo.jsonl\"|path = \"$T/prompts.jsonl\"|" \
	-e "s|^run_dir .*|run_dir = \"run\"\nkeep_journal = true|" \
	-e "s|\"runs/demo/|\"run/|" \
	pipelines/demo.toml >"$T/bench.toml"
grep -q "sim:7" "$T/bench.toml" || { echo "replay.sh: could not adapt pipelines/demo.toml" >&2; exit 1; }

TIMEFORMAT='%R %U %S'
run() { # NAME ARGS...: runs pipe, appends "NAME wall user sys" to $T/times
	local name=$1
	shift
	{ time "$T/pipe" run "$@" >"$T/$name.out" 2>&1; } 2>"$T/$name.time" ||
		{ echo "pipe run ($name) failed:" >&2; tail -20 "$T/$name.out" >&2; exit 1; }
	echo "$name $(cat "$T/$name.time")" >>"$T/times"
}
: >"$T/times"
echo "$N prompts, demo graph; generate on sim:7 × 48 (speed $SPEED), then --from gen=run --set check.min_answer_length=$MIN"
run generate "$T/bench.toml"
run replay "$T/bench.toml" --from "gen=$T/run" --set "check.min_answer_length=$MIN"
grep -q "what changed" "$T/replay.out" || { echo "replay.sh: the replay did not compare its run" >&2; exit 1; }
sed -n '/^what changed/,/^(pipe report/p' "$T/replay.out"
# The comparison alone, as pipe report A B makes it (ids and verdicts of
# both runs, nothing else).
/usr/bin/time -f "pipe report run run-from-gen: %e s wall, %U+%S s CPU, peak RSS %M KB" \
	"$T/pipe" report "$T/run" "$T/run-from-gen" >"$T/compare.out" 2>"$T/compare.time" ||
	{ echo "pipe report A B failed:" >&2; cat "$T/compare.out" "$T/compare.time" >&2; exit 1; }
cmp -s <(sed -n '/^  verdict/,$p' "$T/compare.out") <(sed -n '/^  verdict/,/^(pipe report/p' "$T/replay.out" | sed '$d') ||
	echo "replay.sh: pipe report A B differs from the replay's own comparison" >&2
tail -1 "$T/compare.time"
echo "journal: $(du -sh "$T/run/journal" | cut -f1); load $(cut -d' ' -f1-3 /proc/loadavg)"
awk -v n="$N" '{ w[$1] = $2; c[$1] = $3 + $4 } END {
	for (k in w) printf "%-8s %8.1fs wall %8.1fs CPU   per 1,000: %6.3fs wall %6.3fs CPU\n", k, w[k], c[k], 1000 * w[k] / n, 1000 * c[k] / n
	printf "replay / generate: %.2fx wall, %.2fx CPU\n", w["replay"] / w["generate"], c["replay"] / c["generate"]
}' "$T/times"
