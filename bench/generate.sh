#!/usr/bin/env bash
# bench/generate.sh — how fast is the generate client, next to wrk?
#
# Starts one `pipe sim` server so fast (speed 10^6: no simulated waiting) that
# whoever sends requests is the bottleneck, then, in the same run and against
# the same endpoint (/v1/chat/completions) with the same concurrency:
#   1. wrk, posting the same kind of chat request body as pipe does;
#   2. read-prompts → generate → a discarding sink (BenchmarkGeneratePipeline).
#   3. the same pipeline built from REF, the reference commit (default
#      05cb071, the last one with the hand-written HTTP/1.1 client that
#      net/http replaced), to compare CPU per completion;
#   4. the sglang client alone (no pipeline), this tree's and REF's.
# All run ROUNDS times, alternating; it prints the medians of requests/s,
# of the sender's CPU per 1,000 requests and of the sim server's during each,
# pipe's share of wrk's rate (goal: at least 50%) and its CPU per completion
# next to REF's (goal: at most 2x).
#
#   bench/generate.sh          # defaults: CONC=64 N=40000 DURATION=5 ROUNDS=3 REF=05cb071
#   CONC=48 N=20000 ROUNDS=5 bench/generate.sh
#
# Needs wrk (apt-get install -y wrk). Everything runs on loopback.
set -euo pipefail
cd "$(dirname "$0")/.."

CONC=${CONC:-64}
N=${N:-40000}
DURATION=${DURATION:-5}
ROUNDS=${ROUNDS:-3}
REF=${REF:-05cb071}
THINK=${THINK:-150}
ANSWER=${ANSWER:-50}

command -v wrk >/dev/null || { echo "bench/generate.sh: wrk not found (apt-get install -y wrk)" >&2; exit 1; }

T=$(mktemp -d)
SIM=""
cleanup() {
	if [ -n "$SIM" ]; then kill "$SIM" 2>/dev/null || true; wait "$SIM" 2>/dev/null || true; fi
	git worktree remove --force "$T/ref" 2>/dev/null || true
	rm -rf "$T"
}
trap cleanup EXIT

go build -o "$T/pipe" ./cmd/pipe
go test -c -o "$T/stages.test" ./stages
go test -c -o "$T/sglang.test" ./stages/sglang
git worktree add -q --detach "$T/ref" "$REF"
(cd "$T/ref" && go test -c -o "$T/ref-stages.test" ./stages && go test -c -o "$T/ref-sglang.test" ./stages/sglang)

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
# bench TESTBINARY NAME runs one benchmark against the sim, N completions,
# and prints its completions/s and CPU ms per 1,000 completions.
bench() {
	PIPE_BENCH_SERVER="$URL" PIPE_BENCH_CONCURRENCY="$CONC" "$1" \
		-test.run '^$' -test.bench "$2\$" -test.benchtime "${N}x" -test.count 1 >"$T/bench.out"
	awk '{for (i = 1; i < NF; i++) { if ($(i+1) == "completions/s") r = $i; if ($(i+1) == "cpu-ms/1000") c = $i }} END {print r, c}' "$T/bench.out"
}
# check VALUE: a benchmark that printed no figure stops the script.
check() {
	[ -n "$1" ] || { echo "a benchmark failed:" >&2; cat "$T/bench.out" >&2; exit 1; }
}

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
	read -r pipe_rps pipe_cpu < <(bench "$T/stages.test" BenchmarkGeneratePipeline)
	s3=$(sim_cpu)
	pipe_sim=$(awk -v d="$((s3 - s2))" -v t="$TICK" -v n="$N" 'BEGIN {printf "%.1f", d / t * 1000 / n * 1000}')
	read -r ref_rps ref_cpu < <(bench "$T/ref-stages.test" BenchmarkGeneratePipeline)
	# The client alone (no read-prompts, no engine): how much of the gap is
	# the client's.
	read -r client_rps client_cpu < <(bench "$T/sglang.test" BenchmarkClient)
	read -r refc_rps refc_cpu < <(bench "$T/ref-sglang.test" BenchmarkClient)
	for v in "$pipe_cpu" "$ref_cpu" "$client_cpu" "$refc_cpu"; do check "$v"; done
	echo "$wrk_rps $wrk_cpu $wrk_sim $pipe_rps $pipe_cpu $pipe_sim $client_rps $client_cpu $ref_rps $ref_cpu $refc_rps $refc_cpu" >>"$T/rounds"
	awk '{printf "round '"$round"': wrk %.0f/s; pipe %.0f/s (%.0f%% of wrk), %.1f CPU ms/1000 (%.2fx REF'"'"'s %.1f); client alone %.0f/s, %.1f CPU ms/1000 (%.2fx REF'"'"'s %.1f)\n", $1, $4, 100 * $4 / $1, $5, $5 / $10, $10, $7, $8, $8 / $12, $12}' <(tail -1 "$T/rounds")
done

# median of column k of the rounds file
median() { sort -g -k"$1,$1" "$T/rounds" | awk -v k="$1" '{v[NR] = $k} END {print v[int((NR + 1) / 2)]}'; }
echo
awk -v wrps="$(median 1)" -v wcpu="$(median 2)" -v wsim="$(median 3)" \
	-v prps="$(median 4)" -v pcpu="$(median 5)" -v psim="$(median 6)" -v crps="$(median 7)" -v ccpu="$(median 8)" \
	-v rrps="$(median 9)" -v rcpu="$(median 10)" -v rcrps="$(median 11)" -v rccpu="$(median 12)" -v r="$ROUNDS" -v ref="$REF" 'BEGIN {
	printf "medians of %d rounds                     %12s %20s %22s\n", r, "requests/s", "client CPU ms/1000", "sim server CPU ms/1000"
	printf "%-45s %12.0f %20.1f %22.1f\n", "wrk (C, no parsing)", wrps, wcpu, wsim
	printf "%-45s %12.0f %20.1f %22.1f\n", "pipe read-prompts→generate→discard", prps, pcpu, psim
	printf "%-45s %12.0f %20.1f\n", "  the same built from " ref, rrps, rcpu
	printf "%-45s %12.0f %20.1f\n", "sglang client alone (no pipeline)", crps, ccpu
	printf "%-45s %12.0f %20.1f\n", "  the same built from " ref, rcrps, rccpu
	printf "\npipe reaches %.0f%% of wrk'"'"'s request rate (goal ≥ 50%%)\n", 100 * prps / wrps
	printf "pipe uses %.2fx the CPU per completion of %s (goal ≤ 2x); the client alone %.2fx\n", pcpu / rcpu, ref, ccpu / rccpu
}'
