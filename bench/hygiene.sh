#!/usr/bin/env bash
# bench/hygiene.sh — what dedupe-near-duplicates costs at the seed's scale.
#
# N prompts (default 913,786) in the rehearsal's three shapes
# (bench/rehearsal.sh), read and written as JSONL, once with a
# dedupe-near-duplicates stage between (keep_numbers = true: the
# rehearsal's prompts differ mostly in their numbers) and once without,
# alternately ROUNDS times (default 2), this tree's pipe for both. It
# prints wall time, CPU and peak RSS of each and the ratios of the medians.
#
#   bench/hygiene.sh
#   N=200000 ROUNDS=3 bench/hygiene.sh
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib/prompts.sh
N=${N:-913786}
ROUNDS=${ROUNDS:-2}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
go build -o "$T/pipe" ./cmd/pipe
rehearsal_prompts "$N" >"$T/prompts.jsonl"
for v in with without; do
	printf '[pipeline]\nname = "hygiene-%s"\nrun_dir = "run"\n\n[[stage]]\nid = "prompts"\nkind = "read-prompts"\npath = "prompts.jsonl"\n' "$v" >"$T/$v.toml"
	in=prompts
	if [ "$v" = with ]; then
		printf '\n[[stage]]\nid = "unique"\nkind = "dedupe-near-duplicates"\ninput = "prompts"\nkeep_numbers = true\n\n[[stage]]\nid = "dropped"\nkind = "write-jsonl"\ninput = "unique.rejected"\npath = "run/dropped.jsonl"\n' >>"$T/$v.toml"
		in=unique
	fi
	printf '\n[[stage]]\nid = "out"\nkind = "write-jsonl"\ninput = "%s"\npath = "run/out.jsonl"\n' "$in" >>"$T/$v.toml"
done
echo "$N prompts: read → [dedupe-near-duplicates] → write-jsonl, $ROUNDS rounds"
: >"$T/rounds"
for round in $(seq "$ROUNDS"); do
	order="with without"
	[ $((round % 2)) = 0 ] && order="without with"
	for v in $order; do
		rm -rf "$T/run"
		(cd "$T" && /usr/bin/time -f '%e %U %S %M' -o "$T/$v.time" ./pipe run "$v.toml" >"$T/$v.out" 2>&1) ||
			{ echo "pipe ($v) failed:" >&2; tail -20 "$T/$v.out" >&2; exit 1; }
		read -r wall user sys rss <"$T/$v.time"
		dropped=0
		[ -f "$T/run/dropped.jsonl" ] && dropped=$(wc -l <"$T/run/dropped.jsonl")
		echo "round $round $v: ${wall}s wall, $(awk -v u="$user" -v s="$sys" 'BEGIN {printf "%.1f", u + s}')s CPU, peak RSS $((rss / 1024)) MB, $dropped near duplicates"
		echo "$v $wall $(awk -v u="$user" -v s="$sys" 'BEGIN {print u + s}') $rss" >>"$T/rounds"
	done
done
median() { awk -v v="$1" -v k="$2" '$1 == v {print $k}' "$T/rounds" | sort -g | awk '{a[NR] = $1} END {print a[int((NR + 1) / 2)]}'; }
for k in 2:wall:s 3:CPU:s 4:peak-RSS:KB; do
	IFS=: read -r col name unit <<<"$k"
	awk -v a="$(median with "$col")" -v b="$(median without "$col")" -v n="$name" -v u="$unit" \
		'BEGIN {printf "median %s: with %.1f %s, without %.1f %s: %.2fx\n", n, a, u, b, u, a / b}'
done
