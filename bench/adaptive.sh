#!/usr/bin/env bash
# bench/adaptive.sh — fixed versus adaptive concurrency on `pipe sim` servers
# of a known capacity, side by side in one run.
#
# For each CAPACITY (the servers' max_running_requests; default "128 32"),
# runs the same N prompts through read-prompts → generate → write-jsonl on
# SERVERS simulated servers with concurrency = each of SWEEP (default
# 32 48 64 128 256) and with concurrency = "auto" (max_concurrency 256), and
# prints per setting the output tokens per simulated second, its share of
# the best fixed setting's, the p95 latency and the run's length (simulated
# seconds), then whether auto met the goal: >= 95% of the best fixed
# tokens/s with a p95 no worse than that setting's, over the whole run, its
# ramp included (exit 1 when not).
# The simulated servers batch like a GPU server: each running request
# decodes at 60 / (1 + (running-1)/48) tokens/s, the rest queue.
#
#   bench/adaptive.sh                          # N=3000 SERVERS=2 SPEED=100
#   CAPACITIES=128 SWEEP="48 128" bench/adaptive.sh
set -euo pipefail
cd "$(dirname "$0")/.."

N=${N:-3000}
SERVERS=${SERVERS:-2}
# 100, not more: at 400 a wall millisecond of the client's is 0.4 simulated
# seconds, and on a loaded machine the refills in transit, not the
# settings, decide the figures.
SPEED=${SPEED:-100}
CAPACITIES=${CAPACITIES:-"128 32"}
SWEEP=${SWEEP:-"32 48 64 128 256"}
THINK=${THINK:-300}
ANSWER=${ANSWER:-100}

T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
go build -o "$T/pipe" ./cmd/pipe
for i in $(seq 0 $((N - 1))); do
	printf '{"id":"p%d","prompt":"Question %d: what is %d + %d?"}\n' "$i" "$i" "$i" "$i"
done >"$T/prompts.jsonl"

# run CAP CONC prints "tokens_per_sim_s p95_sim_s run_sim_s".
run() {
	local cap=$1 conc=$2 dir
	dir=$(mktemp -d -p "$T")
	cp "$T/prompts.jsonl" "$dir/"
	local ckey="concurrency = $conc"
	[ "$conc" = auto ] && ckey=$'concurrency = "auto"\nmax_concurrency = 256'
	cat >"$dir/p.toml" <<TOML
[[stage]]
id   = "prompts"
kind = "read-prompts"
path = "prompts.jsonl"

[[stage]]
id                = "gen"
kind              = "generate"
input             = "prompts"
servers           = ["sim:$SERVERS?speed=$SPEED&max_running=$cap&think_mean=$THINK&answer_mean=$ANSWER"]
max_output_tokens = 4096
$ckey

[[stage]]
id    = "out"
kind  = "write-jsonl"
input = "gen"
path  = "out.jsonl"
TOML
	"$T/pipe" run "$dir/p.toml" >"$dir/log" 2>&1 || { cat "$dir/log" >&2; exit 1; }
	python3 - "$dir" "$SPEED" <<'PY'
import json, sys, re
d, speed = sys.argv[1], float(sys.argv[2])
lat, tokens, first, last = [], 0, None, None
# Latencies are wall seconds as the client saw them (× speed: simulated);
# throughput over the run as its summary times it.
for line in open(d + "/out.jsonl"):
    c = json.loads(line)["completion"]
    lat.append(c["latency_s"]); tokens += c["completion_tokens"]
log = open(d + "/log").read()
m = re.search(r"summary of \S+ after ([0-9.]+)(ms|s|m)", log)
el = float(m.group(1)) * {"ms": 1e-3, "s": 1, "m": 60}[m.group(2)]
lat.sort()
print(f"{tokens / (el * speed):.0f} {lat[int(0.95 * len(lat))] * speed:.1f} {el * speed:.0f}")
PY
}

status=0
for cap in $CAPACITIES; do
	echo "capacity $cap (max_running_requests), $SERVERS servers, $N prompts, speed $SPEED:"
	declare -A TPS=() P95=() LEN=()
	best=0 bestc=""
	for c in $SWEEP auto; do
		read -r TPS[$c] P95[$c] LEN[$c] < <(run "$cap" "$c")
		if [ "$c" != auto ] && [ "${TPS[$c]}" -gt "$best" ]; then best=${TPS[$c]} bestc=$c; fi
	done
	for c in $SWEEP auto; do
		printf '  concurrency %-5s %7s tokens/s  %4s%% of best  p95 %6ss  run %5ss\n' \
			"$c" "${TPS[$c]}" "$((100 * TPS[$c] / best))" "${P95[$c]}" "${LEN[$c]}"
	done
	pct=$((100 * TPS[auto] / best))
	verdict=met
	if [ "$pct" -lt 95 ] || python3 -c "import sys; sys.exit(not (${P95[auto]} > ${P95[$bestc]}))"; then verdict="NOT met"; status=1; fi
	echo "  auto: ${pct}% of the best fixed ($bestc: $best tokens/s), p95 ${P95[auto]}s vs ${P95[$bestc]}s, ramp included: goal $verdict"
	unset TPS P95 LEN
done
exit $status
