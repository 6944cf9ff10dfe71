#!/usr/bin/env bash
# Engine throughput: read-prompts → pass-through → write-jsonl over 200K
# prompts, next to the same decode/encode/write work in one plain loop
# (the reference, measured in the same run), and the 100-stage check time.
# Prints the ratio; these machines are shared, so compare ratios, not rates.
set -euo pipefail
cd "$(dirname "$0")/.."
out=$(go test ./pipeline -run '^$' -bench 'PassThrough|Check100' -benchtime 5x -count 3 -cpu 2)
echo "$out" | grep -E '^Benchmark'
echo "$out" | awk '
  /BenchmarkPassThroughGraph/    { for (i=1;i<=NF;i++) if ($(i+1)=="records/s") { g+=$i; ng++ } }
  /BenchmarkPassThroughBaseline/ { for (i=1;i<=NF;i++) if ($(i+1)=="records/s") { r+=$i; nr++ } }
  END { if (ng && nr) printf "engine: %.0f records/s, plain loop: %.0f records/s, ratio %.2f\n", g/ng, r/nr, (g/ng)/(r/nr) }'
