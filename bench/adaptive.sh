#!/usr/bin/env bash
# bench/adaptive.sh — fixed versus adaptive concurrency on `pipe sim` servers
# of a known capacity, side by side in one run.
#
# For each CAPACITY (the servers' max_running_requests; default "128 32"),
# runs the same N prompts through read-prompts → generate → write-jsonl on
# SERVERS simulated servers with concurrency = each of SWEEP (default
# 32 48 64 128 256) and with concurrency = "auto" (max_concurrency 256), and
# prints per setting the output tokens per simulated second over the whole
# run (its ramp included) and over the steady window (from the 3rd simulated
# minute, WINDOW_FROM seconds, to 80% of the run), each with its share of the
# best fixed setting's, the p95 latency and the run's length (simulated
# seconds); then runs the best fixed setting (over the whole run) and auto
# once more, and says whether auto met the goal: >= 95% of the best fixed
# tokens/s both over the whole run and in the window (that is, within 3
# simulated minutes), with a p95 no worse than that setting's (exit 1 when
# not); auto's figures are the means of its two runs, the best fixed
# tokens/s the most of any fixed run, and "no worse" compares auto's mean
# p95 with the mean of that setting's two runs (see the second round below
# for why).
# The window's figure is pipe's own: `pipe run --metrics-addr` serves the
# fleet's pipe_generate_output_tokens_total beside pipe_run_elapsed_seconds,
# both from one snapshot taken every --progress-every (100ms here, 10
# simulated seconds at SPEED=100); a scraper polls it every 50ms wall and the
# window's rate is the counter's rise between the first snapshot at or after
# WINDOW_FROM and the last at or before 80% of the run, over their elapsed
# times.
# The simulated servers batch like a GPU server: each running request
# decodes at 60 / (1 + (running-1)/48) tokens/s, the rest queue.
#
#   bench/adaptive.sh                          # N=6000 SERVERS=2 SPEED=100
#   CAPACITIES=128 SWEEP="48 128" bench/adaptive.sh
set -euo pipefail
cd "$(dirname "$0")/.."

N=${N:-6000}
SERVERS=${SERVERS:-2}
# 100, not more: at 400 a wall millisecond of the client's is 0.4 simulated
# seconds, and on a loaded machine the refills in transit, not the
# settings, decide the figures.
SPEED=${SPEED:-100}
CAPACITIES=${CAPACITIES:-"128 32"}
SWEEP=${SWEEP:-"32 48 64 128 256"}
THINK=${THINK:-300}
ANSWER=${ANSWER:-100}
WINDOW_FROM=${WINDOW_FROM:-180}

T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
go build -o "$T/pipe" ./cmd/pipe
for i in $(seq 0 $((N - 1))); do
	printf '{"id":"p%d","prompt":"Question %d: what is %d + %d?"}\n' "$i" "$i" "$i" "$i"
done >"$T/prompts.jsonl"

# run CAP CONC prints "tokens_per_sim_s window_tokens_per_sim_s p95_sim_s
# run_sim_s".
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
	"$T/pipe" run --metrics-addr 127.0.0.1:0 --progress-every 100ms "$dir/p.toml" >"$dir/log" 2>&1 &
	local pid=$!
	python3 - "$dir" "$pid" <<'PY' &
# Scrapes pipe's /metrics until pipe exits: lines "elapsed_s tokens".
import os, re, sys, time, urllib.request
d, pid = sys.argv[1], int(sys.argv[2])
def alive():
    try:
        os.kill(pid, 0)
        return True
    except OSError:
        return False
url = None
with open(d + "/samples", "w") as out:
    while alive():
        if url is None:
            m = re.search(r"metrics on (http://\S+/metrics)", open(d + "/log").read())
            url = m and m.group(1)
        if url:
            try:
                body = urllib.request.urlopen(url, timeout=1).read().decode()
            except OSError:
                body = ""
            el = re.search(r"^pipe_run_elapsed_seconds (\S+)$", body, re.M)
            tok = re.findall(r"^pipe_generate_output_tokens_total\{[^}]*\} (\S+)$", body, re.M)
            if el and tok:
                print(el.group(1), sum(float(t) for t in tok), file=out, flush=True)
        time.sleep(0.05)
PY
	local scraper=$!
	wait "$pid" || { cat "$dir/log" >&2; exit 1; }
	wait "$scraper"
	python3 - "$dir" "$SPEED" "$WINDOW_FROM" <<'PY'
import json, sys, re
d, speed, wfrom = sys.argv[1], float(sys.argv[2]), float(sys.argv[3])
lat, tokens = [], 0
# Latencies are wall seconds as the client saw them (× speed: simulated);
# throughput over the run as its summary times it.
for line in open(d + "/out.jsonl"):
    c = json.loads(line)["completion"]
    lat.append(c["latency_s"]); tokens += c["completion_tokens"]
log = open(d + "/log").read()
m = re.search(r"summary of \S+ after ([0-9.]+)(ms|s|m)", log)
el = float(m.group(1)) * {"ms": 1e-3, "s": 1, "m": 60}[m.group(2)]
# The window: first snapshot at or after wfrom simulated seconds, last at or
# before 80% of the run.
samples = sorted({float(a): float(b) for a, b in (l.split() for l in open(d + "/samples"))}.items())
a = next((s for s in samples if s[0] * speed >= wfrom), None)
b = next((s for s in reversed(samples) if s[0] <= 0.8 * el), None)
if a is None or b is None or b[0] - a[0] < 0.2:
    sys.exit(f"{d}: run of {el * speed:.0f} simulated s leaves no window from {wfrom:.0f} s to 80% of it (raise N)")
win = (b[1] - a[1]) / ((b[0] - a[0]) * speed)
lat.sort()
print(f"{tokens / (el * speed):.0f} {win:.0f} {lat[int(0.95 * len(lat))] * speed:.1f} {el * speed:.0f}")
PY
}

status=0
for cap in $CAPACITIES; do
	echo "capacity $cap (max_running_requests), $SERVERS servers, $N prompts, speed $SPEED:"
	declare -A TPS=() WIN=() P95=() LEN=()
	best=0 bestc="" bestw=0
	for c in $SWEEP auto; do
		read -r TPS[$c] WIN[$c] P95[$c] LEN[$c] < <(run "$cap" "$c")
		if [ "$c" != auto ] && [ "${TPS[$c]}" -gt "$best" ]; then best=${TPS[$c]} bestc=$c; fi
		if [ "$c" != auto ] && [ "${WIN[$c]}" -gt "$bestw" ]; then bestw=${WIN[$c]}; fi
	done
	for c in $SWEEP auto; do
		printf '  concurrency %-5s %7s tokens/s %4s%% of best | %ss..80%%: %7s tokens/s %4s%% of best | p95 %6ss  run %5ss\n' \
			"$c" "${TPS[$c]}" "$((100 * TPS[$c] / best))" "$WINDOW_FROM" "${WIN[$c]}" "$((100 * WIN[$c] / bestw))" "${P95[$c]}" "${LEN[$c]}"
	done
	# A second run of the best fixed setting and of auto. Two runs of one
	# setting differ (p95 by ~1.5%, tokens/s by a few % on a loaded
	# machine), and at a capacity the server reports auto holds exactly
	# that capacity, sending what the fixed setting at it sends: one run of
	# each would decide "no worse" by a coin flip. Auto's figures become the
	# means of its two runs; the best fixed tokens/s stay the most any fixed
	# run gave (the repeat included); auto's mean p95 must be no worse than
	# the mean p95 of the best fixed setting's two runs (two samples each).
	declare -A TPS2=() WIN2=() P952=() LEN2=()
	for c in "$bestc" auto; do
		read -r TPS2[$c] WIN2[$c] P952[$c] LEN2[$c] < <(run "$cap" "$c")
		printf '  again %-11s %7s tokens/s             | %ss..80%%: %7s tokens/s             | p95 %6ss  run %5ss\n' \
			"$c" "${TPS2[$c]}" "$WINDOW_FROM" "${WIN2[$c]}" "${P952[$c]}" "${LEN2[$c]}"
	done
	if [ "${TPS2[$bestc]}" -gt "$best" ]; then best=${TPS2[$bestc]}; fi
	if [ "${WIN2[$bestc]}" -gt "$bestw" ]; then bestw=${WIN2[$bestc]}; fi
	p95ref=$(python3 -c "print(round((${P95[$bestc]} + ${P952[$bestc]}) / 2, 2))")
	tps=$(((TPS[auto] + TPS2[auto]) / 2))
	win=$(((WIN[auto] + WIN2[auto]) / 2))
	p95=$(python3 -c "print(round((${P95[auto]} + ${P952[auto]}) / 2, 2))")
	pct=$((100 * tps / best))
	wpct=$((100 * win / bestw))
	verdict=met
	if [ "$pct" -lt 95 ] || [ "$wpct" -lt 95 ] || python3 -c "import sys; sys.exit(not ($p95 > $p95ref))"; then verdict="NOT met"; status=1; fi
	echo "  auto, mean of 2 runs: $tps tokens/s = ${pct}% of the best fixed run over the run ($best tokens/s, ramp included), $win tokens/s = ${wpct}% of the best fixed run from ${WINDOW_FROM}s to 80% of the run ($bestw tokens/s), p95 ${p95}s vs ${p95ref}s (${P95[$bestc]}s and ${P952[$bestc]}s) of $bestc, the best fixed setting of the sweep: goal $verdict"
	unset TPS WIN P95 LEN TPS2 WIN2 P952 LEN2
done
exit $status
