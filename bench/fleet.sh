#!/usr/bin/env bash
# bench/fleet.sh — what supervising launched servers is worth (issue 45):
# three launched pipe sim servers, each of whose processes crashes
# (SIGKILL) or hangs (SIGSTOP) after a random time (exponential, mean
# MEAN seconds), over a run of MINUTES; once with pipe restarting them
# (restarts = 100) and once as before pipe launched servers, where
# nobody restarts one (restarts = 0: a server that failed stays down).
# For each: the fleet's capacity-weighted availability (the share of
# server-time a server answered generations: from each server's ready
# to its next failure, in timeline.jsonl's server events), completions
# and output tokens written, requests sent again after a failure, and
# the decode lost to failures (tokens of completions whose first attempt
# failed, a lower bound of what was decoded and thrown away).
#
#   bench/fleet.sh                  # 5 minutes each, MEAN=60
#   MINUTES=30 MEAN=180 bench/fleet.sh
#   MODES=none bench/fleet.sh       # one mode (two at once in two shells)
set -euo pipefail
cd "$(dirname "$0")/.."
MINUTES=${MINUTES:-5}
MEAN=${MEAN:-60}
SEED=${SEED:-1}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
go build -o "$work/pipe" ./cmd/pipe
python3 -c "
import json
for i in range(200000): print(json.dumps({'id': 'p%06d' % i, 'prompt': 'Question %d' % i}))" > "$work/prompts.jsonl"
cat > "$work/chaos.sh" <<CHAOS
#!/usr/bin/env bash
# One server's process: a pipe sim that crashes or hangs after a random time.
port=\$1 index=\$2
"$work/pipe" sim --listen 127.0.0.1:\$port --speed 20 --think-mean 200 --answer-mean 60 &
p=\$!
n=\$(cat "\$CHAOS_DIR/starts-\$index" 2>/dev/null || echo 0); echo \$((n + 1)) > "\$CHAOS_DIR/starts-\$index"
after=\$(python3 -c "import random; random.seed(\$SEED * 1000 + \$index * 100 + \$n); print(round(random.expovariate(1 / $MEAN), 1))")
sleep "\$after"
if python3 -c "import random, sys; random.seed(\$SEED * 7 + \$index * 13 + \$n); sys.exit(random.random() < 0.5)"; then
	echo "chaos: SIGKILL after \${after}s"; kill -9 \$p; exit 1
else
	echo "chaos: SIGSTOP after \${after}s"; kill -STOP \$p; wait \$p
fi
CHAOS
chmod +x "$work/chaos.sh"
port=$((34000 + RANDOM % 20000 / 4 * 4))
printf "%-10s %12s %12s %14s %10s %10s %14s\n" mode availability completions output_tokens restarts resent decode_lost
for mode in ${MODES:-restart none}; do
	restarts=100
	[ $mode = none ] && restarts=0
	dir=$work/$mode
	mkdir -p "$dir"
	cat > "$dir/f.toml" <<TOML
[pipeline]
name    = "fleet-$mode"
run_dir = "run"
budget  = { wall = "${MINUTES}m" }

[[stage]]
id   = "prompts"
kind = "read-prompts"
path = "$work/prompts.jsonl"

[[stage]]
id                = "gen"
kind              = "generate"
input             = "prompts"
concurrency       = 16
max_output_tokens = 1024
stall_timeout     = "20s"

[[stage.servers]]
launch        = "$work/chaos.sh {port} {index}"
count         = 3
port          = $port
restarts      = $restarts
probe_every   = "5s"
probe_timeout = "5s"
stop_grace    = "2s"
env           = { CHAOS_DIR = "$dir", SEED = "$SEED" }

[[stage]]
id    = "out"
kind  = "write-jsonl"
input = "gen"
path  = "out.jsonl"
TOML
	(cd "$dir" && "$work/pipe" run f.toml --drain-timeout 5s > run.out 2>&1) || true
	python3 - "$dir" "$mode" "$MINUTES" <<'PY'
import json, sys, datetime
d, mode, minutes = sys.argv[1], sys.argv[2], float(sys.argv[3])
evs, t0, t1 = [], None, None
for line in open(d + "/run/timeline.jsonl"):
    p = json.loads(line)
    t = datetime.datetime.fromisoformat(p["t"].replace("Z", "+00:00"))
    t0 = t0 or t - datetime.timedelta(seconds=p["elapsed_s"])
    t1 = t
    for st in p["stages"]:
        evs += st.get("server_events", [])
span = (t1 - t0).total_seconds()
up, ready_since, restarts = 0.0, {}, 0
for e in sorted(evs, key=lambda e: e["t"]):
    t = (datetime.datetime.fromisoformat(e["t"].replace("Z", "+00:00")) - t0).total_seconds()
    s = e["server"]
    if e["kind"] == "ready":
        ready_since[s] = t
    elif e["kind"] in ("crash", "hang", "fatal_line", "never_ready", "breaker") and s in ready_since:
        up += t - ready_since.pop(s)
    if e["kind"] == "started" and e["start"] > 1:
        restarts += 1
for s, since in ready_since.items():
    up += span - since
rows = [json.loads(l) for l in open(d + "/out.jsonl")]
tokens = sum(r["completion"]["completion_tokens"] for r in rows)
resent = [r for r in rows if r["completion"]["attempts"] > 1]
lost = sum(r["completion"]["completion_tokens"] for r in resent) // 2
print("%-10s %11.1f%% %12d %14d %10d %10d %14d" % (mode, 100 * up / (3 * span), len(rows), tokens, restarts, len(resent), lost))
PY
done
