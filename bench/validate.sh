#!/usr/bin/env bash
# Speed of the validation pass read-prompts runs ahead of its reader (and
# pipe check --data / --dry-run), over a generated 1,000,000-line prompts file
# of ~350 MB, on one core, next to references measured in the same run over
# the same file:
#
#   bench/validate.sh [COUNT]      # default 3 passes each
#
#   wc-l                 `wc -l FILE` (the floor of reading the file)
#   bufio-lines          the pass's own line reading, nothing judged
#   encoding-json-valid  encoding/json's Valid on every line (what the
#                        standard library alone would cost)
#   ahead                the run's pass: every line judged (jsontext, in
#                        place; see promptLine), no records made
#   check-data           the same, also keeping the ids to count repeats
#   reader-build         judging and making every record, as the reader does
#   first-record         time from Open (which starts the pass) to the
#                        reader's first record
#
# MB/s is per wall second; MB/cpu-s per second of CPU the process used, which
# holds on a machine busy with other work. The file is written into a
# temporary directory by the benchmark and removed after it. Results go to
# bench/out/validate.txt.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
count=${1:-3}
mkdir -p "$root/bench/out"
out="$root/bench/out/validate.txt"
cd "$root"
pin=()
if command -v taskset >/dev/null; then pin=(taskset -c 0); fi
go test -c -o "$root/bench/out/stages.test" ./stages
(cd stages && "${pin[@]}" "$root/bench/out/stages.test" -test.run '^$' -test.bench '^BenchmarkValidateInput$' \
  -test.cpu 1 -test.benchtime "${count}x" -test.timeout 60m) | tee "$out"
rm -f "$root/bench/out/stages.test"
echo
awk '
/^BenchmarkValidateInput\// {
  name = $1; sub(/^BenchmarkValidateInput\//, "", name); sub(/-[0-9]+$/, "", name)
  order[++n] = name; ns[name] = $3
  for (i = 4; i < NF; i++) { if ($(i+1) == "MB/s") wall[name] = $i; if ($(i+1) == "MB/cpu-s") cpu[name] = $i; if ($(i+1) == "worst-ms") ms[name] = $i }
}
END {
  printf "%-20s %9s %9s %11s %12s %12s\n", "", "s/pass", "MB/s", "MB/cpu-s", "vs wc -l", "vs json.Valid"
  for (k = 1; k <= n; k++) {
    x = order[k]
    if (x == "first-record") { printf "%-20s first record after %s ms (worst of the runs)\n", x, ms[x]; continue }
    r1 = (cpu["wc-l"] > 0 && cpu[x] > 0) ? sprintf("%.3f", cpu[x] / cpu["wc-l"]) : "-"
    r2 = (cpu["encoding-json-valid"] > 0 && cpu[x] > 0) ? sprintf("%.2f", cpu[x] / cpu["encoding-json-valid"]) : "-"
    printf "%-20s %9.2f %9s %11s %12s %12s\n", x, ns[x] / 1e9, wall[x], cpu[x], r1, r2
  }
}' "$out"
