#!/usr/bin/env bash
# bench/plan.sh — how close pipe plan's projection comes to the run it
# plans (issue 33): for each simulated fleet, `pipe plan --sample SAMPLE
# --json` over N prompts (default 20,000; sample 400), then `pipe run` of
# the same file, and the projected wall-clock, output tokens and training
# rows against what the run did. The wall-clock is the run's own elapsed
# time (status.json elapsed_s: from its start to its end, the sample's
# completions already done); tokens and rows are this start's (the run
# after the plan), from its status.json.
#
#   bench/plan.sh
#   N=5000 SAMPLE=300 FLEETS="hetero" bench/plan.sh
#
# Fleets (servers × concurrency 16, output lengths log-normal, heavy-tailed
# with length_sigma=1.0; 10% empty answers rejected by validate-thinking):
#   hetero  two servers, one three times the other's speed
#   four    four servers of one speed, 2% 503s
#   hang    two servers, one of which holds 0.5% of its requests until
#           stall_timeout (5 s) sends them elsewhere
#   slows   two servers of one speed, one of which decodes at a third of
#           its speed from its 4,000th request on (sim fault slow): the
#           plan cannot see what happens after its sample, the run's ETA
#           must
#
# Besides plan against run, for each fleet the run's own ETA (status.json
# eta.seconds, the fleet's model) when half of the prompts left are done,
# against the time the run then took to finish: "eta@50%".
set -euo pipefail
cd "$(dirname "$0")/.."
N=${N:-20000}
SAMPLE=${SAMPLE:-400}
FLEETS=${FLEETS:-"hetero four hang slows"}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
go build -o "$work/pipe" ./cmd/pipe
pipe=$work/pipe
lens="think_mean=150&answer_mean=40&length_sigma=1.0&faults=empty-answer:0.1"
servers_of() {
	case $1 in
	hetero) echo "[\"sim:1?speed=12&$lens\", \"sim:1?speed=4&$lens\"]" ;;
	four) echo "[\"sim:4?speed=6&$lens,503:0.02\"]" ;;
	hang) echo "[\"sim:1?speed=8&$lens\", \"sim:1?speed=8&$lens,hang:0.005\"]" ;;
	slows) echo "[\"sim:1?speed=8&$lens\", \"sim:1?speed=8&$lens,slow@4000req\"]" ;;
	*) echo "unknown fleet $1" >&2; exit 2 ;;
	esac
}
python3 - "$work/prompts.jsonl" "$N" <<'PY'
import random, sys
rng = random.Random(7)
words = "the of a model token train data run server prompt answer reason think length".split()
with open(sys.argv[1], "w") as f:
    for i in range(int(sys.argv[2])):
        n = int(rng.lognormvariate(2.5, 0.8)) + 3
        f.write('{"id":"p%d","prompt":"%s"}\n' % (i, " ".join(rng.choice(words) for _ in range(n))))
PY
printf '%-8s %-14s %12s %12s %12s %8s\n' fleet figure projected low-high actual "act/proj"
for fleet in $FLEETS; do
	d=$work/$fleet
	mkdir -p "$d"
	cat >"$d/p.toml" <<TOML
[[stage]]
id   = "prompts"
kind = "read-prompts"
path = "$work/prompts.jsonl"

[[stage]]
id    = "todo"
kind  = "dedupe-against-progress"
input = "prompts"

[[stage]]
id                = "gen"
kind              = "generate"
input             = "todo"
servers           = $(servers_of "$fleet")
concurrency       = 16
max_output_tokens = 8192
stall_timeout     = "5s"

[[stage]]
id    = "check"
kind  = "validate-thinking"
input = "gen"

[[stage]]
id    = "rows"
kind  = "write-jsonl"
input = "check.accepted"
path  = "rows.jsonl"

[[stage]]
id    = "bad"
kind  = "write-jsonl"
input = ["gen.rejected", "check.rejected"]
path  = "bad.jsonl"
TOML
	"$pipe" plan --sample "$SAMPLE" --json "$d/p.toml" >"$d/plan.json" 2>"$d/plan.log" || { cat "$d/plan.log"; exit 1; }
	"$pipe" run "$d/p.toml" >"$d/run.log" 2>&1 &
	runpid=$!
	# The run's ETA when half the prompts left are done.
	python3 - "$d/runs/p/status.json" "$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["prompts_left"])' "$d/plan.json")" >"$d/eta.txt" <<'PY' &
import json, sys, time
path, left = sys.argv[1], int(sys.argv[2])
while True:
    time.sleep(0.5)
    try:
        st = json.load(open(path))
    except Exception:
        continue
    if st.get("state") not in ("running", "draining"):
        continue
    done = st.get("finished", 0) - st.get("finished_before_this_run", 0)
    eta = (st.get("eta") or {})
    if done >= left / 2 and eta.get("seconds"):
        print(time.time(), eta["seconds"], eta.get("by", ""))
        break
PY
	etapid=$!
	wait "$runpid" || { tail -20 "$d/run.log"; kill "$etapid" 2>/dev/null; exit 1; }
	kill "$etapid" 2>/dev/null || true
	ended=$(date +%s.%N)
	python3 - "$fleet" "$d/plan.json" "$d/runs/p/status.json" "$d/eta.txt" "$ended" <<'PY'
import json, sys
fleet, plan, status = sys.argv[1], json.load(open(sys.argv[2])), json.load(open(sys.argv[3]))
eta = open(sys.argv[4]).read().split()
if len(eta) >= 2:
    took = float(sys.argv[5]) - float(eta[0])
    print("%-8s %-14s %12.0f %12s %12.0f %8.3f" % (fleet, "eta@50%" + ("(" + eta[2] + ")" if len(eta) > 2 else ""), float(eta[1]), "-", took, took / float(eta[1])))
gen = next(s for s in status["stages"] if s["id"] == "gen")
rows = next(s for s in status["stages"] if s["id"] == "rows")
actual = {"wall_seconds": status["elapsed_s"], "output_tokens": status["generation"]["output_tokens"], "training_rows": rows["out"]}
for k in ("wall_seconds", "output_tokens", "training_rows"):
    p = plan[k]
    print("%-8s %-14s %12.0f %12s %12.0f %8.3f" % (fleet, k, p["value"], "%.0f-%.0f" % (p["low"], p["high"]), actual[k], actual[k] / p["value"]))
PY
done
