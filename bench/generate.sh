#!/usr/bin/env bash
# bench/generate.sh — how fast is the generate client, next to wrk?
#
# Starts one `pipe sim` server so fast (speed 10^6: no simulated waiting) that
# whoever sends requests is the bottleneck, then, in the same run and against
# the same endpoint (/v1/chat/completions) with the same concurrency:
#   1. wrk, posting the same kind of chat request body as pipe does;
#   2. read-prompts → generate → a discarding sink (BenchmarkGeneratePipeline).
# Both run ROUNDS times, alternating; it prints the medians of requests/s,
# of the sender's CPU per 1,000 requests and of the sim server's during each,
# and pipe's share of wrk's rate (the goal is at least 70%).
#
#   bench/generate.sh          # defaults: CONC=64 N=40000 DURATION=5 ROUNDS=3
#   CONC=48 N=20000 ROUNDS=5 bench/generate.sh
#
# Needs wrk (apt-get install -y wrk). Everything runs on loopback.
set -euo pipefail
cd "$(dirname "$0")/.."

CONC=${CONC:-64}
N=${N:-40000}
DURATION=${DURATION:-5}
ROUNDS=${ROUNDS:-3}
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
go test -c -o "$T/sglang.test" ./stages/sglang

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

# The machine may be shared: alternate wrk and pipe ROUNDS times and compare
# medians, so a burst of someone else's load does not decide the result.
: >"$T/rounds"
for round in $(seq "$ROUNDS"); do
	s0=$(sim_cpu)
	TIMEFORMAT='%U %S'
	{ time wrk -t2 -c"$CONC" -d"${DURATION}s" -s "$T/chat.lua" "$URL" >"$T/wrk.out"; } 2>"$T/wrk.time"
	s1=$(sim_cpu)
	wrk_rps=$(awk '/Requests\/sec/ {print $2}' "$T/wrk.out")
	wrk_reqs=$(awk '/requests in/ {print $1}' "$T/wrk.out")
	wrk_cpu=$(awk -v n="$wrk_reqs" '{printf "%.1f", ($1 + $2) * 1000 / n * 1000}' "$T/wrk.time")
	wrk_sim=$(awk -v d="$((s1 - s0))" -v t="$TICK" -v n="$wrk_reqs" 'BEGIN {printf "%.1f", d / t * 1000 / n * 1000}')
	WRK_ERRS=$(awk '/Non-2xx|Socket errors/ {print}' "$T/wrk.out")
	[ -z "$WRK_ERRS" ] || echo "wrk: $WRK_ERRS" >&2

	s2=$(sim_cpu)
	PIPE_BENCH_SERVER="$URL" PIPE_BENCH_CONCURRENCY="$CONC" "$T/stages.test" \
		-test.run '^$' -test.bench 'BenchmarkGeneratePipeline$' -test.benchtime "${N}x" -test.count 1 >"$T/pipe.out"
	s3=$(sim_cpu)
	pipe_rps=$(awk '{for (i = 1; i < NF; i++) if ($(i+1) == "completions/s") print $i}' "$T/pipe.out")
	pipe_cpu=$(awk '{for (i = 1; i < NF; i++) if ($(i+1) == "cpu-ms/1000") print $i}' "$T/pipe.out")
	[ -n "$pipe_rps" ] || { cat "$T/pipe.out" >&2; exit 1; }
	pipe_sim=$(awk -v d="$((s3 - s2))" -v t="$TICK" -v n="$N" 'BEGIN {printf "%.1f", d / t * 1000 / n * 1000}')

	# The client alone (no read-prompts, no engine): how much of the gap is
	# the client's.
	PIPE_BENCH_SERVER="$URL" PIPE_BENCH_CONCURRENCY="$CONC" "$T/sglang.test" \
		-test.run '^$' -test.bench 'BenchmarkClient$' -test.benchtime "${N}x" -test.count 1 >"$T/client.out"
	client_rps=$(awk '{for (i = 1; i < NF; i++) if ($(i+1) == "completions/s") print $i}' "$T/client.out")
	client_cpu=$(awk '{for (i = 1; i < NF; i++) if ($(i+1) == "cpu-ms/1000") print $i}' "$T/client.out")
	[ -n "$client_rps" ] || { cat "$T/client.out" >&2; exit 1; }
	echo "$wrk_rps $wrk_cpu $wrk_sim $pipe_rps $pipe_cpu $pipe_sim $client_rps $client_cpu" >>"$T/rounds"
	awk '{printf "round '"$round"': wrk %.0f/s, pipe %.0f/s (%.0f%%), client alone %.0f/s (%.0f%%)\n", $1, $4, 100 * $4 / $1, $7, 100 * $7 / $1}' <(tail -1 "$T/rounds")
done

# median of column k of the rounds file
median() { sort -g -k"$1,$1" "$T/rounds" | awk -v k="$1" '{v[NR] = $k} END {print v[int((NR + 1) / 2)]}'; }
echo
awk -v wrps="$(median 1)" -v wcpu="$(median 2)" -v wsim="$(median 3)" \
	-v prps="$(median 4)" -v pcpu="$(median 5)" -v psim="$(median 6)" -v crps="$(median 7)" -v ccpu="$(median 8)" -v r="$ROUNDS" 'BEGIN {
	printf "medians of %d rounds        %12s %20s %22s\n", r, "requests/s", "client CPU ms/1000", "sim server CPU ms/1000"
	printf "%-34s %12.0f %20.1f %22.1f\n", "wrk (C, no parsing)", wrps, wcpu, wsim
	printf "%-34s %12.0f %20.1f %22.1f\n", "pipe read-prompts→generate→discard", prps, pcpu, psim
	printf "%-34s %12.0f %20.1f\n", "sglang client alone (no pipeline)", crps, ccpu
	printf "\npipe reaches %.0f%% of wrk'"'"'s request rate (goal ≥ 70%%)\n", 100 * prps / wrps
}'
