#!/usr/bin/env bash
# The throughput cost of durability (issue 9): the demo graph (read-prompts →
# dedupe-against-progress → generate → validate-thinking → tokenize-and-mask →
# write-jsonl ×2) over N prompts (default 200,000) on 7 simulated servers
# started in-process, with the generation journal (the default) and without
# it (--no-journal), alternating, ROUNDS rounds (default 2), each on a fresh
# run directory. Prints each run's wall and CPU time and the ratios of the
# medians;
# these machines are shared, so compare the ratio, not the times.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
n=${1:-200000}
rounds=${ROUNDS:-2}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
"$root/scripts/fetch-qwen3.sh" >/dev/null
go build -o "$T/pipe" "$root/cmd/pipe"
python3 - "$n" "$T/prompts.jsonl" <<'PY'
import json, sys
n, path = int(sys.argv[1]), sys.argv[2]
with open(path, "w") as f:
    for i in range(n):
        f.write(json.dumps({"id": f"p{i}", "messages": [{"role": "user", "content": f"Question {i}: explain topic {i*7 % 1000} briefly."}]}) + "\n")
PY
cat > "$T/p.toml" <<EOF2
[pipeline]
name = "durability"

[[stage]]
id   = "prompts"
kind = "read-prompts"
path = "prompts.jsonl"

[[stage]]
id    = "todo"
kind  = "dedupe-against-progress"
input = "prompts"

[[stage]]
id                = "gen"
kind              = "generate"
input             = "todo"
servers           = ["sim:7?speed=1000000&think_mean=120&answer_mean=60&faults=empty-answer:0.05"]
concurrency       = 48
api               = "generate"
tokenizer         = "$root/.cache/qwen3"
max_output_tokens = 2048

[[stage]]
id        = "check"
kind      = "validate-thinking"
input     = "gen"
tokenizer = "$root/.cache/qwen3"

[[stage]]
id        = "tok"
kind      = "tokenize-and-mask"
input     = "check.accepted"
tokenizer = "$root/.cache/qwen3"

[[stage]]
id    = "train"
kind  = "write-jsonl"
input = "tok"
path  = "out/train.jsonl"

[[stage]]
id    = "rejects"
kind  = "write-jsonl"
input = ["gen.rejected", "check.rejected", "tok.rejected"]
path  = "out/rejected.jsonl"
EOF2
run() { # $1: label, rest: flags; prints "label wall-seconds cpu-seconds"
  local label=$1; shift
  rm -rf "$T/runs" "$T/out"
  /usr/bin/time -f "%e %U %S" -o "$T/time" "$T/pipe" run "$T/p.toml" --progress 1h "$@" >/dev/null 2>"$T/err" || { cat "$T/err"; exit 1; }
  read -r wall user sys < "$T/time"
  echo "$label $wall $(echo "$user + $sys" | bc)"
}
results=()
for r in $(seq "$rounds"); do
  results+=("$(run journal)")
  results+=("$(run no-journal --no-journal)")
done
printf '%s\n' "${results[@]}"
printf '%s\n' "${results[@]}" | python3 -c '
import statistics, sys
n = int(sys.argv[1])
wall, cpu = {}, {}
for line in sys.stdin:
    label, w, c = line.split()
    wall.setdefault(label, []).append(float(w))
    cpu.setdefault(label, []).append(float(c))
j, nj = statistics.median(wall["journal"]), statistics.median(wall["no-journal"])
cj, cnj = statistics.median(cpu["journal"]), statistics.median(cpu["no-journal"])
print(f"{n} prompts: wall with the journal {j:.1f}s ({n/j:.0f}/s), without {nj:.1f}s ({n/nj:.0f}/s): {100*(j/nj-1):+.1f}%")
print(f"CPU (user+sys) with the journal {cj:.1f}s, without {cnj:.1f}s: {100*(cj/cnj-1):+.1f}% (less sensitive to a shared machine than wall time)")
' "$n"
