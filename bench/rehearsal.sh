#!/usr/bin/env bash
# bench/rehearsal.sh — the seed-scale rehearsal shape, this tree next to REF.
#
# The demo graph (read-prompts → dedupe → generate → validate-thinking →
# tokenize-and-mask with the real Qwen3 tokenizer → Parquet shards, rejects
# to JSONL) over N prompts (default 200,000) against sim:7 at 48 requests
# each, with the simulated GPU time compressed away (speed 10^6): what is
# measured is pipe itself. `pipe` built from this tree and from REF (default
# 05cb071, the last commit with the hand-written HTTP/1.1 client) run
# alternately ROUNDS times (default 2), each from a fresh run directory; it
# prints wall time, CPU and peak RSS of each and the ratio of the medians (goal: this
# tree no more than 10% slower).
#
#   bench/rehearsal.sh
#   N=913786 ROUNDS=1 bench/rehearsal.sh
#   NEW=1c7c715 bench/rehearsal.sh    # a commit instead of the working tree
#   SHAPE=jsonl REF=fbb1b4f N=913786 ROUNDS=1 bench/rehearsal.sh
#   UPLOAD=1 REF=8dec3c0 N=100000 ROUNDS=1 bench/rehearsal.sh
#   TRAINER=1 REF=<a commit with [trainer]> bench/rehearsal.sh   # keeps the demo's [trainer]
#   NEAR_DUP=1 REF=HEAD N=913786 bench/rehearsal.sh   # the rehearsal with a near-duplicate stage, and without
#
# NEAR_DUP=1 puts a dedupe-near-duplicates stage (keep_numbers = true: the
# rehearsal's prompts differ mostly in their numbers) before dedupe in
# this tree's pipeline only: with REF=HEAD the two builds are the same
# code and the figures are the stage's cost (and what it spares).
# UPLOAD=1 (Parquet shape only) adds an upload-s3 stage after the shards,
# to a versitygw (.cache/bin/versitygw, scripts/setup-versitygw.sh) that
# this script starts on a free loopback port, each run under its own
# prefix; REF must have upload-s3 too.
# SHAPE=jsonl is the issue-23 cost shape, which a commit from before
# dedupe and Parquet (fbb1b4f) also runs: no dedupe, the training rows to
# train.jsonl instead of Parquet shards.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib/prompts.sh
root=$(pwd)
N=${N:-200000}
ROUNDS=${ROUNDS:-2}
REF=${REF:-05cb071}
NEW=${NEW:-}
SHAPE=${SHAPE:-parquet}
UPLOAD=${UPLOAD:-}
scripts/fetch-qwen3.sh >/dev/null
if [ -n "$UPLOAD" ] && [ "$SHAPE" != parquet ]; then
	echo "rehearsal.sh: UPLOAD=1 needs SHAPE=parquet (upload-s3 reads write-arrow's shards)" >&2
	exit 1
fi

T=$(mktemp -d)
s3pid=
cleanup() {
	[ -n "$s3pid" ] && kill "$s3pid" 2>/dev/null
	git worktree remove --force "$T/ref" 2>/dev/null || true
	git worktree remove --force "$T/new" 2>/dev/null || true
	rm -rf "$T"
}
trap cleanup EXIT

if [ -n "$NEW" ]; then
	git worktree add -q --detach "$T/new" "$NEW"
	(cd "$T/new" && go build -o "$T/pipe-new" ./cmd/pipe)
else
	go build -o "$T/pipe-new" ./cmd/pipe
fi
git worktree add -q --detach "$T/ref" "$REF"
(cd "$T/ref" && go build -o "$T/pipe-ref" ./cmd/pipe)

# N prompts in the shapes read-prompts takes, each with its own id.
rehearsal_prompts "$N" >"$T/prompts.jsonl"

# The demo pipeline with the rehearsal's fleet and this machine's paths.
sed -e "s|^servers .*|servers           = [\"sim:7?speed=1000000\&faults=empty-answer:0.05,no-think-end:0.03,503:0.02\"]|" \
	-e "s|^concurrency .*|concurrency       = 48|" \
	-e "s|^max_output_tokens .*|max_output_tokens = 2048|" \
	-e "s|^tokenizer = .*|tokenizer = \"$root/.cache/qwen3\"|" \
	-e "s|^path = \"../testdata/prompts/demo.jsonl\"|path = \"$T/prompts.jsonl\"|" \
	-e "s|^run_dir .*|run_dir = \"run\"|" \
	-e "s|\"runs/demo/|\"run/|" \
	pipelines/demo.toml >"$T/rehearsal.toml"
# The demo's [trainer] table is left out unless TRAINER=1: a REF from
# before it cannot read the file, and at max_output_tokens 2048 it changes
# no request (every row has more room left than that).
if [ -z "${TRAINER:-}" ]; then
	sed -i '/^\[trainer\]/,/^$/d' "$T/rehearsal.toml"
fi
grep -q "sim:7" "$T/rehearsal.toml" || { echo "rehearsal.sh: could not adapt pipelines/demo.toml" >&2; exit 1; }
if [ "$SHAPE" = jsonl ]; then
	# Drop the dedupe stage (generate reads the prompts) and write the
	# training rows as JSONL.
	awk '
		/^\[\[stage\]\]/ { flush(); buf = $0 "\n"; next }
		{ buf = buf $0 "\n" }
		END { flush() }
		function flush() {
			if (buf ~ /kind *= *"dedupe-against-progress"/) { buf = ""; return }
			gsub(/input *= *"todo"/, "input             = \"prompts\"", buf)
			if (buf ~ /id *= *"train"/) buf = "[[stage]]\nid    = \"train\"\nkind  = \"write-jsonl\"\ninput = \"tok\"\npath  = \"run/train.jsonl\"\n\n"
			printf "%s", buf; buf = ""
		}' "$T/rehearsal.toml" >"$T/rehearsal.jsonl.toml"
	mv "$T/rehearsal.jsonl.toml" "$T/rehearsal.toml"
	grep -q 'path  = "run/train.jsonl"' "$T/rehearsal.toml" || { echo "rehearsal.sh: could not make the JSONL shape" >&2; exit 1; }
fi

if [ -n "$UPLOAD" ]; then
	gw=$root/.cache/bin/versitygw
	[ -x "$gw" ] || { echo "rehearsal.sh: no $gw (scripts/setup-versitygw.sh)" >&2; exit 1; }
	port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
	export AWS_ACCESS_KEY_ID=rehearsal$RANDOM AWS_SECRET_ACCESS_KEY=rehearsal-secret-$RANDOM$RANDOM AWS_REGION=us-east-1
	mkdir -p "$T/s3"
	ROOT_ACCESS_KEY=$AWS_ACCESS_KEY_ID ROOT_SECRET_KEY=$AWS_SECRET_ACCESS_KEY \
		"$gw" --port "127.0.0.1:$port" --quiet posix "$T/s3" >"$T/versitygw.out" 2>&1 &
	s3pid=$!
	for _ in $(seq 100); do
		aws --endpoint-url "http://127.0.0.1:$port" s3api create-bucket --bucket rehearsal >/dev/null 2>&1 && break
		sleep 0.2
	done
	aws --endpoint-url "http://127.0.0.1:$port" s3api head-bucket --bucket rehearsal ||
		{ echo "rehearsal.sh: versitygw did not start:" >&2; tail "$T/versitygw.out" >&2; exit 1; }
	printf '\n[[stage]]\nid               = "upload"\nkind             = "upload-s3"\ninput            = "train.shards"\nuri              = "s3://rehearsal/RUN"\nendpoint         = "http://127.0.0.1:%s"\nforce_path_style = true\n' "$port" >>"$T/rehearsal.toml"
fi

cp "$T/rehearsal.toml" "$T/rehearsal-ref.toml"
cp "$T/rehearsal.toml" "$T/rehearsal-new.toml"
if [ -n "${NEAR_DUP:-}" ]; then
	awk '
		/^\[\[stage\]\]/ { flush(); buf = $0 "\n"; next }
		{ buf = buf $0 "\n" }
		END { flush() }
		function flush() {
			if (buf ~ /kind *= *"dedupe-against-progress"/) {
				printf "[[stage]]\nid           = \"unique\"\nkind         = \"dedupe-near-duplicates\"\ninput        = \"prompts\"\nkeep_numbers = true\n\n"
				sub(/input *= *"prompts"/, "input = \"unique\"", buf)
			}
			if (buf ~ /id *= *"rejects"/) sub(/input *= *\[/, "input = [\"unique.rejected\", ", buf)
			printf "%s", buf; buf = ""
		}' "$T/rehearsal.toml" >"$T/rehearsal-new.toml"
	grep -q '"unique.rejected"' "$T/rehearsal-new.toml" || { echo "rehearsal.sh: could not add the near-duplicate stage" >&2; exit 1; }
fi

echo "$N prompts, demo graph ($SHAPE${UPLOAD:+ + upload-s3}), sim:7 × 48; ${NEW:-this tree} vs $REF, $ROUNDS rounds"
: >"$T/rounds"
for round in $(seq "$ROUNDS"); do
	# A B B A …: each build goes first as often as the other, so a machine
	# that speeds up or slows down over the rounds weighs on both alike.
	order="new ref"
	[ $((round % 2)) = 0 ] && order="ref new"
	for v in $order; do
		rm -rf "$T/run"
		# Nothing of the set-up (the prompts, the builds) or of the last
		# run (GBs of shards and rejects) is still being written out while
		# this one runs and commits. The first run of an invocation was
		# the slowest of its build in three sets without this (a72f07a:
		# 915 s CPU first, 752 and 731 after).
		sync
		sed "s|s3://rehearsal/[^\"]*|s3://rehearsal/$v-$round|" "$T/rehearsal-$v.toml" >"$T/round.toml"
		/usr/bin/time -f '%e %U %S %M' -o "$T/$v.time" "$T/pipe-$v" run "$T/round.toml" >"$T/$v.out" 2>&1 ||
			{ echo "pipe ($v) failed:" >&2; tail -20 "$T/$v.out" >&2; exit 1; }
		if [ "$SHAPE" = jsonl ]; then
			rows=$(wc -l <"$T/run/train.jsonl")
		else
			# The manifest is in .pipe/ since pipe-row-2, beside the shards before.
			manifest="$T/run/train/.pipe/manifest.json"
			[ -f "$manifest" ] || manifest="$T/run/train/manifest.json"
			rows=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["rows"])' "$manifest")
		fi
		extra=
		[ -n "$UPLOAD" ] && extra=", $(find "$T/s3/rehearsal/$v-$round" -name '*.parquet' | wc -l) shards uploaded"
		read -r wall user sys rss <"$T/$v.time"
		echo "round $round $v: ${wall}s wall, $(awk -v u="$user" -v s="$sys" 'BEGIN {printf "%.1f", u + s}')s CPU, peak RSS $((rss / 1024)) MB, $rows training rows$extra"
		echo "$v $wall $user $sys $rss" >>"$T/rounds"
	done
done
median() { awk -v v="$1" -v k="$2" '$1 == v {print $k}' "$T/rounds" | sort -g | awk '{a[NR] = $1} END {print a[int((NR + 1) / 2)]}'; }
cpu() { awk -v v="$1" '$1 == v {print $3 + $4}' "$T/rounds" | sort -g | awk '{a[NR] = $1} END {print a[int((NR + 1) / 2)]}'; }
awk -v nw="$(median new 2)" -v rw="$(median ref 2)" -v nc="$(cpu new)" -v rc="$(cpu ref)" -v nm="$(median new 5)" -v rm="$(median ref 5)" -v new="${NEW:-this tree}" -v ref="$REF" 'BEGIN {
	printf "\nmedian wall time: %s %.1fs, %s %.1fs: %.2fx (goal ≤ 1.10x)\n", new, nw, ref, rw, nw / rw
	printf "median CPU time:  %s %.1fs, %s %.1fs: %.2fx\n", new, nc, ref, rc, nc / rc
	printf "median peak RSS:  %s %d MB, %s %d MB: %.2fx\n", new, nm / 1024, ref, rm / 1024, nm / rm
}'
