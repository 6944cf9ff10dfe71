#!/usr/bin/env bash
# Benchmarks one `pipe sim` server: sustained POST /generate requests/s and
# output tokens/s, driven by wrk (C, bench/sim_generate.lua) and by a Go
# net/http client (BenchmarkGenerateURL) against the same server process in
# the same run. The load model is compressed away (--speed 1e9) and
# --max-running is above the client's 64 connections, so what is measured is
# the simulator's own cost: HTTP, request parsing, response rendering.
#
# Usage: bench/sim.sh [SECONDS]   (default 10 s per measurement)
# Env:   SIM_BENCH_PORT (default 39400), SIM_BENCH_PIN=0 to not pin the
#        server to CPU 0 and the clients to the other CPUs.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
secs=${1:-10}
port=${SIM_BENCH_PORT:-39400}
url=http://127.0.0.1:$port
command -v wrk >/dev/null || { echo "sim.sh: wrk not found (apt-get install -y wrk)" >&2; exit 1; }
bin=$(mktemp -d)
trap 'kill "$simpid" 2>/dev/null; wait "$simpid" 2>/dev/null; rm -rf "$bin"' EXIT
(cd "$root" && go build -o "$bin/pipe" ./cmd/pipe && go test -c -o "$bin/sim.test" ./stages/sglang/sim)

srvpin=() clipin=()
if [ "${SIM_BENCH_PIN:-1}" = 1 ] && command -v taskset >/dev/null && [ "$(nproc)" -ge 2 ]; then
  srvpin=(taskset -c 0) clipin=(taskset -c 1-$(($(nproc) - 1)))
fi

gen_tokens() { curl -s "$url/metrics" | awk '/^sglang:generation_tokens_total/ {printf "%d", $2}'; }
# cpu_ticks prints the sim process's user+system CPU time in clock ticks.
cpu_ticks() { awk '{print $14 + $15}' "/proc/$simpid/stat"; }
hz=$(getconf CLK_TCK)

run_case() { # name, extra sim flags...
  local name=$1; shift
  "${srvpin[@]}" "$bin/pipe" sim --listen "127.0.0.1:$port" --speed 1e9 --max-running 1024 "$@" >"$bin/sim.out" 2>&1 &
  simpid=$!
  for _ in $(seq 100); do grep -q ready "$bin/sim.out" 2>/dev/null && break; sleep 0.05; done

  local t0 t1 c0 c1 w_rps w_tps w_cpu g_cpu
  t0=$(gen_tokens) c0=$(cpu_ticks)
  w_out=$("${clipin[@]}" wrk -t2 -c64 -d"${secs}s" -s "$root/bench/sim_generate.lua" "$url")
  t1=$(gen_tokens) c1=$(cpu_ticks)
  w_cpu=$(awk -v a="$c0" -v b="$c1" -v s="$secs" -v hz="$hz" 'BEGIN {printf "%.0f", 100*(b-a)/hz/s}')
  w_rps=$(awk '/^Requests\/sec/ {print $2}' <<<"$w_out")
  w_tps=$(awk -v a="$t0" -v b="$t1" -v s="$secs" 'BEGIN {printf "%.0f", (b-a)/s}')
  if grep -q "Non-2xx" <<<"$w_out"; then echo "sim.sh: wrk saw errors:"; echo "$w_out"; fi

  c0=$(cpu_ticks) s0=$(date +%s.%N)
  g_out=$(SIM_URL=$url "${clipin[@]}" "$bin/sim.test" -test.run - -test.bench 'GenerateURL$' -test.benchtime "${secs}s")
  c1=$(cpu_ticks) s1=$(date +%s.%N)
  g_cpu=$(awk -v a="$c0" -v b="$c1" -v s0="$s0" -v s1="$s1" -v hz="$hz" 'BEGIN {printf "%.0f", 100*(b-a)/hz/(s1-s0)}')
  g_rps=$(awk '/BenchmarkGenerateURL/ {for (i=1;i<=NF;i++) if ($(i+1)=="req/s") print $i}' <<<"$g_out")
  g_tps=$(awk '/BenchmarkGenerateURL/ {for (i=1;i<=NF;i++) if ($(i+1)=="out-tokens/s") print $i}' <<<"$g_out")

  kill "$simpid"; wait "$simpid" 2>/dev/null || true

  # sim CPU per request is the figure least disturbed by other load: the
  # sim's capacity on one free core is about 1e6 / (µs per request) req/s.
  printf '%-16s wrk: %6.0f req/s %9.0f out-tok/s, sim %3s%% CPU = %3.0f µs/req | go: %6.0f req/s %9.0f out-tok/s, sim %3s%% CPU = %3.0f µs/req | go/wrk %.2f\n' \
    "$name" "$w_rps" "$w_tps" "$w_cpu" "$(awk -v c="$w_cpu" -v r="$w_rps" 'BEGIN {print c*1e4/r}')" \
    "$g_rps" "$g_tps" "$g_cpu" "$(awk -v c="$g_cpu" -v r="$g_rps" 'BEGIN {print c*1e4/r}')" \
    "$(awk -v g="$g_rps" -v w="$w_rps" 'BEGIN {print g/w}')"
}

echo "pipe sim, one server, ${secs}s per client, $(nproc) CPUs${srvpin:+, server pinned to CPU 0}, load $(cut -d' ' -f1-3 /proc/loadavg)"
run_case default-lengths
run_case short-outputs --think-mean 60 --answer-mean 20
