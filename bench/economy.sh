#!/usr/bin/env bash
# bench/economy.sh — decoded tokens per trained token, and rows lost to
# length, with and without [trainer], side by side in one run (issue 32).
#
# N prompts (default 3,000; distinct texts of varied lengths, from a seeded
# generator) go through read-prompts → generate (api "generate", the real
# Qwen3 tokenizer) → validate-thinking → tokenize-and-mask → write-jsonl
# against SERVERS simulated servers with a reasoning model's heavy-tailed
# output lengths (sim lengths=reasoning: mean ~6,000 tokens, p99 ~29,000,
# thinking up to 30,000), in four configurations:
#
#   recipe          max_output_tokens 32768, no [trainer]
#   recipe+trainer  max_output_tokens 32768, [trainer] dflash max_length 4096
#   users           max_output_tokens 4096,  no [trainer]
#   users+trainer   max_output_tokens 4096,  [trainer] dflash max_length 4096
#
# (SpecForge's Qwen3.6 DFlash recipe: 32,768 output tokens in its
# regeneration script, max_length 4096 in its training config; our users'
# last run: 4,096 and 4,096.) Every configuration sees the same prompts and
# the same simulator seed, so a prompt draws the same output length in each.
#
# The figures, per configuration:
#   decoded   output tokens the servers generated: the sum of
#             completion.completion_tokens over every completion
#             generate emitted (accepted and rejected alike), read from
#             a write-jsonl of gen's output. Cross-checked against pipe's
#             own status.json economy.decoded_tokens (exit 1 if they
#             differ).
#   trained   loss tokens as SpecForge keeps them: `pipe export --layout
#             specforge --max-length 4096 --trainer dflash` of the training
#             rows (it cuts each row to its first 4096 tokens, as SpecForge's
#             prompt_builder does, and leaves out rows DFlash would drop),
#             then the ones among the first 4096 loss_mask values of each
#             line, counted here. Without [trainer] tokenize-and-mask does
#             not cut rows, so pipe's own "trained" would count tokens the
#             trainer never sees; this count does not. pipe's figure (status.json
#             economy.trained_tokens) is shown beside it.
#             SpecForge's qwen3 labelling also trains the "\n" its template
#             puts after <|im_end|>, a token no server decodes: a finished
#             row trains one token more than it decoded, so the ratio can
#             fall just below 1.
#   ratio     decoded / trained.
#   lost      prompts that ended with no training row because of length:
#             rejected truncated, or think_unclosed on a length cut
#             (finish_reason "length"), or prompt_too_long, or too_long, or
#             left out by the export (DFlash's minimum within max_length);
#             with their share of N.
#   at length rows kept at length (status.json economy.kept_at_length).
#   other     every other reject, by reason.
# Rejects are read from a write-jsonl of every stage's rejected port
# (reject.reason, completion.finish_reason).
#
# The goal (issue 32): with [trainer], ≤ 1.02 decoded per trained token and
# 0 rows lost to length in both settings; exit 1 when not met.
#
# About a minute at N=3000 on 2 cores.
#
#   bench/economy.sh                  # N=3000 SERVERS=4 SPEED=200000
#   N=200 bench/economy.sh            # a quick check
#   CONFIGS="users users+trainer" bench/economy.sh
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)

N=${N:-3000}
SERVERS=${SERVERS:-4}
# Simulated GPU time is compressed away: what is measured is what is
# decoded, not how fast. 48 requests per server, as the users' fleet runs.
SPEED=${SPEED:-200000}
CONCURRENCY=${CONCURRENCY:-48}
MAX_LENGTH=${MAX_LENGTH:-4096}
SEED=${SEED:-1}
CONFIGS=${CONFIGS:-"recipe recipe+trainer users users+trainer"}
for config in $CONFIGS; do
	case $config in recipe | recipe+trainer | users | users+trainer) ;;
	*) echo "economy.sh: unknown configuration $config (recipe, recipe+trainer, users, users+trainer)" >&2; exit 1 ;;
	esac
done
scripts/fetch-qwen3.sh >/dev/null
tokenizer=$root/.cache/qwen3

T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
go build -o "$T/pipe" ./cmd/pipe

# N distinct prompts: a numbered task over a seeded draw of words, from a
# dozen to ~900 words (log-normal, median ~60), so that prompts take from
# ~20 to ~1,200 of the row's 4,096 tokens.
python3 - "$N" "$SEED" >"$T/prompts.jsonl" <<'PY'
import json, math, random, sys
n, seed = int(sys.argv[1]), int(sys.argv[2])
rng = random.Random(seed)
words = """time year people way day man thing woman life child world school state
family student group country problem hand part place case week company system
program question work government number night point home water room mother area
money story fact month lot right study book eye job word business issue side kind
head house service friend father power hour game line end member law car city
community name president team minute idea kid body information back parent face
others level office door health person art war history party result change morning
reason research girl guy moment air teacher force education graph matrix prime
integer function proof lemma theorem vector tensor gradient kernel cache thread
mutex queue stack heap tree node edge cycle path route packet socket server client
protocol latency throughput memory disk file buffer stream token model train loss
batch layer weight bias neuron signal noise filter sample rate frequency circuit
voltage current energy mass velocity force orbit planet star galaxy cell gene
protein enzyme acid base salt metal crystal river mountain ocean forest desert
climate rain storm harvest market price trade contract law court judge poem novel
verse rhyme melody chord rhythm painting color shadow light bridge tower castle""".split()
verbs = ["Explain", "Prove", "Summarize", "Compare", "Design", "Derive", "Critique",
         "Translate", "Plan", "Debug", "Outline", "Estimate"]
for i in range(n):
    k = min(900, max(12, int(rng.lognormvariate(math.log(60), 1.0))))
    body = " ".join(rng.choice(words) for _ in range(k))
    text = f"Task {i}: {rng.choice(verbs)} the following, step by step. {body}"
    if i % 2:
        print(json.dumps({"id": f"p{i:05d}", "prompt": text}))
    else:
        print(json.dumps({"id": f"p{i:05d}", "messages": [{"role": "user", "content": text}]}))
PY

# pipeline CONFIG prints the pipeline file of one configuration.
pipeline() {
	local config=$1 maxout=32768
	case $config in users*) maxout=4096 ;; esac
	cat <<TOML
[pipeline]
name         = "economy"
run_dir      = "run"
max_rejected = "off"    # users without [trainer] rejects half its completions: that is the figure

TOML
	case $config in *+trainer) cat <<TOML
[trainer]
name          = "specforge"
method        = "dflash"
max_length    = $MAX_LENGTH
chat_template = "qwen3-thinking"

TOML
	esac
	# context_length 40960: room for a prompt and 32,768 output tokens.
	# kv_tokens: every running request's longest output fits, so no
	# retraction re-decodes anything (not what is measured here).
	cat <<TOML
[[stage]]
id   = "prompts"
kind = "read-prompts"
path = "$T/prompts.jsonl"

[[stage]]
id                = "gen"
kind              = "generate"
input             = "prompts"
servers           = ["sim:$SERVERS?speed=$SPEED&lengths=reasoning&context_length=40960&max_running=$CONCURRENCY&kv_tokens=$((CONCURRENCY * 40960))&seed=$SEED"]
concurrency       = $CONCURRENCY
api               = "generate"
tokenizer         = "$tokenizer"
max_output_tokens = $maxout

[[stage]]
id        = "check"
kind      = "validate-thinking"
input     = "gen"
tokenizer = "$tokenizer"
disable   = ["repetition"]

[[stage]]
id        = "tok"
kind      = "tokenize-and-mask"
input     = "check.accepted"
tokenizer = "$tokenizer"

[[stage]]
id    = "rows"
kind  = "write-jsonl"
input = "tok"
path  = "run/rows.jsonl"

[[stage]]
id    = "completions"
kind  = "write-jsonl"
input = "gen"
path  = "run/completions.jsonl"

[[stage]]
id    = "rejects"
kind  = "write-jsonl"
input = ["gen.rejected", "check.rejected", "tok.rejected"]
path  = "run/rejected.jsonl"
TOML
}

# measure CONFIG runs one configuration in its own directory and prints
# "decoded trained pipe_trained lost kept_at_length other_rejects".
measure() {
	local config=$1 dir
	dir=$T/$config
	mkdir -p "$dir"
	pipeline "$config" >"$dir/p.toml"
	(cd "$dir" && "$T/pipe" run p.toml >log 2>&1) || { echo "economy.sh: pipe run ($config) failed:" >&2; tail -30 "$dir/log" >&2; exit 1; }
	"$T/pipe" export --layout specforge --max-length "$MAX_LENGTH" --trainer dflash --stage rows \
		"$dir/export.jsonl" "$dir/run" >"$dir/export.log" 2>&1 ||
		{ echo "economy.sh: pipe export ($config) failed:" >&2; cat "$dir/export.log" >&2; exit 1; }
	python3 - "$dir" "$MAX_LENGTH" "$N" <<'PY'
import collections, json, re, sys
d, max_length, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
decoded = 0
for line in open(d + "/run/completions.jsonl"):
    decoded += json.loads(line)["completion"]["completion_tokens"]
trained = rows = 0
for line in open(d + "/export.jsonl"):
    r = json.loads(line)
    trained += sum(r["loss_mask"][:max_length]); rows += 1
eco = json.load(open(d + "/run/status.json"))["economy"]
if eco["decoded_tokens"] != decoded:
    sys.exit(f"{d}: status.json decoded_tokens {eco['decoded_tokens']} but the completions hold {decoded}")
lost, other = collections.Counter(), collections.Counter()
for line in open(d + "/run/rejected.jsonl"):
    r = json.loads(line)
    reason = (r.get("reject") or {}).get("reason", "?")
    finish = ((r.get("completion") or {}).get("finish_reason") or "")
    if reason in ("truncated", "prompt_too_long", "too_long") or (reason == "think_unclosed" and finish == "length"):
        lost[reason] += 1
    else:
        other[reason] += 1
# Rows the export left out (DFlash's minimum within max_length).
dropped = collections.Counter()
for m in re.finditer(r"^pipe export: left out (\d+) rows: (\S+)", open(d + "/export.log").read(), re.M):
    dropped["export " + m.group(2)] += int(m.group(1))
nlost = sum(lost.values()) + sum(dropped.values())
why = ",".join(f"{k}:{v}" for k, v in sorted((lost + dropped).items())) or "-"
oth = ",".join(f"{k}:{v}" for k, v in sorted(other.items())) or "-"
print(decoded, trained, eco["trained_tokens"], nlost, why, eco["kept_at_length"], oth, rows)
PY
}

echo "$N prompts, sim:$SERVERS (lengths=reasoning, seed $SEED) × $CONCURRENCY, trainer max_length $MAX_LENGTH (dflash)"
status=0
printf '\n%-15s %6s %12s %12s %8s %12s %-22s %9s %s\n' config max_out decoded trained ratio "pipe:trained" "lost to length" "at length" "other rejects"
for config in $CONFIGS; do
	read -r decoded trained ptrained lost why atlen other rows < <(measure "$config")
	maxout=32768
	case $config in users*) maxout=4096 ;; esac
	ratio=$(python3 -c "print(f'{$decoded / max($trained, 1):.3f}')")
	share=$(python3 -c "print(f'{100 * $lost / $N:.1f}')")
	printf '%-15s %6s %12s %12s %8s %12s %-22s %9s %s\n' "$config" "$maxout" "$decoded" "$trained" "$ratio" "$ptrained" "$lost (${share}%) $why" "$atlen" "$other"
	case $config in *+trainer)
		if python3 -c "import sys; sys.exit(not ($ratio > 1.02 or $lost > 0))"; then
			echo "  $config: goal NOT met (≤ 1.02 decoded per trained token, 0 rows lost to length)"
			status=1
		fi
	esac
done
exit $status
