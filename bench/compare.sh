#!/usr/bin/env bash
# bench/compare.sh — pipe report A B (what changed between two runs) over
# N ids (default 900,000), this tree next to REF, in the same run of this
# script.
#
# Seed: the demo graph over 2,000 prompts on sim:7 (simulated GPU time
# compressed away) with short completions (sim think_mean THINK, default
# 60 tokens, answer_mean ANSWER, default 20, so that two runs of 900K rows
# fit on a shared disk), its training rows written as JSONL. bench/reportgen repeats its outputs to N ids as run A,
# and again as run B with every 10th training row rejected
# (bench_varied). Then `pipe report A B` runs with each binary, ROUNDS
# times alternately (default 2): wall, CPU and peak RSS of each; the two
# comparisons' texts are diffed.
#
# 2026-12-01, 2 cores shared by seven jobs (load 11.3 → 10.8), REF 13ec3dc,
# two runs of 900,000 ids (2.2 GB each: ~2.4 KB a row with its tokens),
# 82,800 moves: ref 166.4 s wall, 43.1 s CPU, 316 MB peak RSS; new 11.8 s
# wall, 6.1 s CPU, 233 MB (the two runs' verdicts, ~45 bytes an id each,
# plus the collector's headroom): 0.07x wall, 0.14x CPU; same comparison.
#
#   bench/compare.sh
#   N=100000 ROUNDS=1 bench/compare.sh
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
N=${N:-900000}
THINK=${THINK:-60}
ANSWER=${ANSWER:-20}
ROUNDS=${ROUNDS:-2}
REF=${REF:-13ec3dc}
scripts/fetch-qwen3.sh >/dev/null

T=$(mktemp -d)
cleanup() {
	git worktree remove --force "$T/ref" 2>/dev/null || true
	rm -rf "$T"
}
trap cleanup EXIT

go build -o "$T/pipe-new" ./cmd/pipe
go build -o "$T/reportgen" ./bench/reportgen
git worktree add -q --detach "$T/ref" "$REF"
(cd "$T/ref" && go build -o "$T/pipe-ref" ./cmd/pipe)

awk 'BEGIN {
	for (i = 0; i < 2000; i++) printf "{\"id\":\"r-%07d\",\"messages\":[{\"role\":\"user\",\"content\":\"Question %d: explain the idea behind exercise %d in a few steps.\"}]}\n", i, i, i % 977
}' >"$T/prompts.jsonl"
sed -e "s|^servers .*|servers           = [\"sim:7?speed=1000000\&think_mean=$THINK\&answer_mean=$ANSWER\&faults=empty-answer:0.05,no-think-end:0.03\"]|" \
	-e "s|^concurrency .*|concurrency       = 48|" \
	-e "s|^max_output_tokens .*|max_output_tokens = 2048|" \
	-e "s|^tokenizer = .*|tokenizer = \"$root/.cache/qwen3\"|" \
	-e "s|^path = \"../testdata/prompts/demo.jsonl\"|path = \"$T/prompts.jsonl\"|" \
	-e "s|^run_dir .*|run_dir = \"seed\"|" \
	-e "s|\"runs/demo/|\"seed/|" \
	pipelines/demo.toml >"$T/seed.toml"
"$T/pipe-new" run "$T/seed.toml" --set train.kind=write-jsonl --set "train.path=$T/seed/train.jsonl" >"$T/seed.out" 2>&1 ||
	{ echo "compare.sh: the seed run failed:" >&2; tail -20 "$T/seed.out" >&2; exit 1; }
"$T/reportgen" -from "$T/seed" -to "$T/a" -ids "$N"
"$T/reportgen" -from "$T/seed" -to "$T/b" -ids "$N" -vary 10
echo "runs: $(du -sh "$T/a" | cut -f1) and $(du -sh "$T/b" | cut -f1); load $(cut -d' ' -f1-3 /proc/loadavg)"

: >"$T/times"
for round in $(seq "$ROUNDS"); do
	for side in ref new; do
		/usr/bin/time -f "$side %e %U %S %M" -a -o "$T/times" \
			"$T/pipe-$side" report "$T/a" "$T/b" >"$T/compare-$side.txt" 2>/dev/null
	done
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
diff "$T/compare-ref.txt" "$T/compare-new.txt" | sed 's/^/  diff: /' || true
cat "$T/compare-new.txt"
awk '{ w[$1] = w[$1] " " $2; c[$1] = c[$1] " " ($3 + $4); m[$1] = m[$1] " " $5 } END {
	for (k in w) printf "%-4s wall%s s  CPU%s s  peak RSS%s KB\n", k, w[k], c[k], m[k]
}' "$T/times"
awk '{ n[$1]++; w[$1] += $2; c[$1] += $3 + $4 } END {
	printf "new / ref (means): %.2fx wall, %.2fx CPU\n", (w["new"] / n["new"]) / (w["ref"] / n["ref"]), (c["new"] / n["new"]) / (c["ref"] / n["ref"])
}' "$T/times"
