#!/usr/bin/env bash
# Rows/s through tokenize-and-mask on one core, next to references measured
# in the same run: the raw tokenizer encoding the same rendered text
# (reference=encode) and the chat template render plus offset encoding that
# a text row needs (reference=render+encode).
#
#   bench/tokenize_and_mask.sh [COUNT]      # default 5 rounds, interleaved
#
# Rows are ~7.6 KB (prompt + ~5 KB thinking + ~2 KB answer, ~2,300 tokens)
# cut from the Go distribution's sources, 256 distinct rows. Results go to
# bench/out/tokenize_and_mask.txt; the table shows the median of each
# figure over the rounds. cpu-µs/row is CPU time per row, steadier than wall
# time on a shared machine.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
count=${1:-5}
"$root/scripts/fetch-qwen3.sh"
mkdir -p "$root/bench/out"
out="$root/bench/out/tokenize_and_mask.txt"
cd "$root"
PIPE_CI=1 go test ./stages -run '^$' -bench 'BenchmarkTokenizeAndMask' -cpu 1 -count "$count" -benchtime 2s | tee "$out"
echo
echo "median of $count rounds (one core):"
awk '/^BenchmarkTokenizeAndMask\// {
  name=$1; sub(/^BenchmarkTokenizeAndMask\//, "", name)
  for (i = 3; i < NF; i++) if ($(i+1) == "rows/s") r[name] = r[name] " " $i; else if ($(i+1) == "cpu-µs/row") c[name] = c[name] " " $i
  if (!(name in seen)) { seen[name] = 1; order[++n] = name }
}
function median(s,   a, k, i, j, t) {
  k = split(s, a, " ")
  for (i = 1; i <= k; i++) for (j = i + 1; j <= k; j++) if (a[j] + 0 < a[i] + 0) { t = a[i]; a[i] = a[j]; a[j] = t }
  return (k % 2) ? a[(k + 1) / 2] : (a[k / 2] + a[k / 2 + 1]) / 2
}
END {
  printf "  %-26s %10s %12s\n", "", "rows/s", "cpu-µs/row"
  for (i = 1; i <= n; i++) printf "  %-26s %10.0f %12.0f\n", order[i], median(r[order[i]]), median(c[order[i]])
}' "$out"
