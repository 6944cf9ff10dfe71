#!/usr/bin/env bash
# bench/generate.sh — how fast is the generate client, next to wrk?
#
# Starts one `pipe sim` server so fast (speed 10^6: no simulated waiting) that
# whoever sends requests is the bottleneck, then, in the same run and against
# the same endpoint (/v1/chat/completions) with the same concurrency:
#   1. wrk, posting the same kind of chat request body as pipe does;
#   2. read-prompts → generate → a discarding sink (BenchmarkGeneratePipeline).
# It prints requests/s and CPU per 1,000 requests of each, of the sim server
# during each, and pipe's share of wrk's rate (the goal is at least 70%).
#
#   bench/generate.sh                  # defaults: CONC=64 N=40000 DURATION=10
#   CONC=48 N=20000 bench/generate.sh
#
# Needs wrk (apt-get install -y wrk). Everything runs on loopback.
set -euo pipefail
cd "$(dirname "$0")/.."

CONC=${CONC:-64}
N=${N:-40000}
DURATION=${DURATION:-10}
THINK=${THINK:-150}
ANSWER=${ANSWER:-50}

command -v wrk >/dev/null || { echo "bench/generate.sh: wrk not found (apt-get install -y wrk)" >&2; exit 1; }

T=$(mktemp -d)
SIM=""
cleanup() {
	if [ -n "$SIM" ]; then kill "$SIM" 2>/dev/null || true; wait "$SIM" 2>/dev/null || true; fi
	rm -rf "$T"
}
trap cleanup EXIT

go build -o "$T/pipe" ./cmd/pipe
go test -c -o "$T/stages.test" ./stages

"$T/pipe" sim --listen 127.0.0.1:0 --speed 1000000 --max-running 1024 \
	--think-mean "$THINK" --answer-mean "$ANSWER" >"$T/sim.out" 2>"$T/sim.err" &
SIM=$!
for _ in $(seq 100); do
	grep -q "ready at" "$T/sim.out" 2>/dev/null && break
	sleep 0.1
done
URL=$(sed -n 's/.* ready at //p' "$T/sim.out" | head -1)
[ -n "$URL" ] || { echo "pipe sim did not start:" >&2; cat "$T/sim.err" >&2; exit 1; }

# sim_cpu prints the sim server's CPU time so far, in clock ticks.
sim_cpu() { awk '{print $14 + $15}' "/proc/$SIM/stat"; }
TICK=$(getconf CLK_TCK)

# wrk sends what pipe sends: the same body shape, a different prompt each time.
cat >"$T/chat.lua" <<'LUA'
local n = 0
local id = tostring(math.random(1, 1e9))
request = function()
  n = n + 1
  local body = '{"model":"Qwen/Qwen3-32B","messages":[{"role":"user","content":"Question ' .. id .. '-' .. n ..
    ': what is 1 + 1?"}],"max_tokens":2048,"chat_template_kwargs":{"enable_thinking":true},"separate_reasoning":true,"stream":false}'
  return wrk.format("POST", "/v1/chat/completions", {["Content-Type"] = "application/json"}, body)
end
LUA

echo "sim: $URL; concurrency $CONC; think ~$THINK + answer ~$ANSWER tokens per completion"
echo

s0=$(sim_cpu)
TIMEFORMAT='%U %S'
{ time wrk -t2 -c"$CONC" -d"${DURATION}s" -s "$T/chat.lua" "$URL" >"$T/wrk.out"; } 2>"$T/wrk.time"
s1=$(sim_cpu)
WRK_RPS=$(awk '/Requests\/sec/ {print $2}' "$T/wrk.out")
WRK_REQS=$(awk '/requests in/ {print $1}' "$T/wrk.out")
WRK_ERRS=$(awk '/Non-2xx|Socket errors/ {print}' "$T/wrk.out")
WRK_CPU_MS=$(awk '{printf "%.1f", ($1 + $2) * 1000}' "$T/wrk.time")

s2=$(sim_cpu)
PIPE_BENCH_SERVER="$URL" PIPE_BENCH_CONCURRENCY="$CONC" "$T/stages.test" \
	-test.run '^$' -test.bench 'BenchmarkGeneratePipeline$' -test.benchtime "${N}x" -test.count 1 >"$T/pipe.out"
s3=$(sim_cpu)
PIPE_RPS=$(awk '/completions\/s/ {for (i = 1; i < NF; i++) if ($(i+1) == "completions/s") print $i}' "$T/pipe.out")
PIPE_CPU=$(awk '/cpu-ms\/1000/ {for (i = 1; i < NF; i++) if ($(i+1) == "cpu-ms/1000") print $i}' "$T/pipe.out")
[ -n "$PIPE_RPS" ] || { cat "$T/pipe.out" >&2; exit 1; }

awk -v wrps="$WRK_RPS" -v wreqs="$WRK_REQS" -v wcpu="$WRK_CPU_MS" -v prps="$PIPE_RPS" -v pcpu="$PIPE_CPU" -v n="$N" \
	-v sw="$((s1 - s0))" -v sp="$((s3 - s2))" -v tick="$TICK" 'BEGIN {
	printf "%-34s %12s %20s %22s\n", "", "requests/s", "client CPU ms/1000", "sim server CPU ms/1000"
	printf "%-34s %12.0f %20.1f %22.1f\n", "wrk (C, no parsing)", wrps, wcpu / wreqs * 1000, sw / tick * 1000 / wreqs * 1000
	printf "%-34s %12.0f %20.1f %22.1f\n", "pipe read-prompts→generate→discard", prps, pcpu, sp / tick * 1000 / n * 1000
	printf "\npipe reaches %.0f%% of wrk'"'"'s request rate (goal ≥ 70%%)\n", 100 * prps / wrps
}'
[ -z "$WRK_ERRS" ] || echo "wrk: $WRK_ERRS"
