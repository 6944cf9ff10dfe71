#!/usr/bin/env bash
# bench/report.sh — the run report (pipe report, the same runreport.Build
# that ends every pipe run) over a GB-sized write-jsonl output, this tree
# next to REF, in the same run of this script.
#
# Seed: the demo graph over SEED prompts (default 2,000) on sim:7 (simulated
# GPU time compressed away), its training rows written as JSONL (~23 KB a
# row: texts, prompt and output ids, input_ids and loss_mask). bench/reportgen
# repeats the seed's outputs, each copy of a row with its own id, with
# pipe's commit log, until the training output takes SIZE_GB (default 4;
# the rejects' output grows alongside). Then `pipe report` runs on it (the
# run's tokenizer splits output ids at </think>, the costliest path) with
# each binary, ROUNDS times alternately (default 2), and prints wall, CPU
# and peak RSS of each and the ratio of the means; the two reports' texts
# are diffed (only the time they were made may differ).
#
# 2026-12-01, 2 cores shared by seven jobs (load 11.8 falling to 4.7 over
# the run), REF 13ec3dc, a 4.02 GB training output (184,673 rows) + 2.1 GB
# of rejects (117,327 rows), page cache warm: ref 291.4 / 76.8 s wall
# (67.8 / 59.9 s CPU, 105 MB peak RSS), new 13.2 / 7.1 s wall (7.4 / 7.2 s
# CPU, 101 MB): 0.06x wall, 0.11x CPU; the two reports identical.
#
#   bench/report.sh
#   SIZE_GB=1 ROUNDS=1 bench/report.sh
#   KEEP=/tmp/r bench/report.sh      # keep the run directory in /tmp/r/run
#   RUN=/tmp/r/run bench/report.sh   # report on it again (no seed run)
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
SEED=${SEED:-2000}
SIZE_GB=${SIZE_GB:-4}
ROUNDS=${ROUNDS:-2}
REF=${REF:-13ec3dc}
scripts/fetch-qwen3.sh >/dev/null

RUN=${RUN:-}
KEEP=${KEEP:-}
T=$(mktemp -d)
cleanup() {
	git worktree remove --force "$T/ref" 2>/dev/null || true
	[ -L "$T/run" ] && rm "$T/run"
	if [ -n "$KEEP" ] && [ -d "$T/run" ]; then
		mkdir -p "$KEEP" && rm -rf "$KEEP/run" && mv "$T/run" "$KEEP/run"
	fi
	rm -rf "$T"
}
trap cleanup EXIT

go build -o "$T/pipe-new" ./cmd/pipe
git worktree add -q --detach "$T/ref" "$REF"
(cd "$T/ref" && go build -o "$T/pipe-ref" ./cmd/pipe)
go build -o "$T/reportgen" ./bench/reportgen

if [ -n "$RUN" ]; then
	ln -s "$RUN" "$T/run"
else
awk -v n="$SEED" 'BEGIN {
	for (i = 0; i < n; i++) printf "{\"id\":\"r-%07d\",\"messages\":[{\"role\":\"user\",\"content\":\"Question %d: explain the idea behind exercise %d in a few steps.\"}]}\n", i, i, i % 977
}' >"$T/prompts.jsonl"
sed -e "s|^servers .*|servers           = [\"sim:7?speed=1000000\&faults=empty-answer:0.05,no-think-end:0.03\"]|" \
	-e "s|^concurrency .*|concurrency       = 48|" \
	-e "s|^max_output_tokens .*|max_output_tokens = 2048|" \
	-e "s|^tokenizer = .*|tokenizer = \"$root/.cache/qwen3\"|" \
	-e "s|^path = \"../testdata/prompts/demo.jsonl\"|path = \"$T/prompts.jsonl\"|" \
	-e "s|^run_dir .*|run_dir = \"seed\"|" \
	-e "s|\"runs/demo/|\"seed/|" \
	pipelines/demo.toml >"$T/seed.toml"
"$T/pipe-new" run "$T/seed.toml" --set train.kind=write-jsonl --set "train.path=$T/seed/train.jsonl" >"$T/seed.out" 2>&1 ||
	{ echo "report.sh: the seed run failed:" >&2; tail -20 "$T/seed.out" >&2; exit 1; }

# Repeat the seed's outputs until its training rows take SIZE_GB.
"$T/reportgen" -from "$T/seed" -to "$T/run" -gb "$SIZE_GB"
fi
out=$T/run/train.jsonl
echo "output: $(stat -L -c %s "$out" | awk '{ printf "%.2f GB", $1 / 2^30 }'), $(wc -l <"$out") rows; load $(cut -d' ' -f1-3 /proc/loadavg)"

: >"$T/times"
for round in $(seq "$ROUNDS"); do
	for side in ref new; do
		/usr/bin/time -f "$side %e %U %S %M" -a -o "$T/times" \
			"$T/pipe-$side" report "$T/run" >"$T/report-$side.txt" 2>/dev/null
	done
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
diff "$T/report-ref.txt" "$T/report-new.txt" | sed 's/^/  diff: /' || true
grep -A12 '^  output' "$T/report-new.txt" | head -40
awk '{ w[$1] = w[$1] " " $2; c[$1] = c[$1] " " ($3 + $4); m[$1] = m[$1] " " $5 } END {
	for (k in w) printf "%-4s wall%s s  CPU%s s  peak RSS%s KB\n", k, w[k], c[k], m[k]
}' "$T/times"
awk '{ n[$1]++; w[$1] += $2; c[$1] += $3 + $4 } END {
	printf "new / ref (means): %.2fx wall, %.2fx CPU\n", (w["new"] / n["new"]) / (w["ref"] / n["ref"]), (c["new"] / n["new"]) / (c["ref"] / n["ref"])
}' "$T/times"
