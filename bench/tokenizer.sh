#!/usr/bin/env bash
# Tokenizer throughput: pipe's tokenizer against Hugging Face tokenizers@0.23.2
# (Rust core via npm, RAYON_NUM_THREADS=1) on the same corpus in the same
# run, one document at a time on core 0; then both over all cores. Checks
# that both produce identical ids (hash of all ids) and prints MB/s, tokens/s
# and the ratios, by wall clock and by CPU time (the CPU figures are the
# fairer ones on a busy machine).
# Usage: bench/tokenizer.sh   (after scripts/setup-tokenizer-ref.sh)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
model=${PIPE_QWEN3_DIR:-$root/.cache/qwen3}
nm=$root/.cache/node/node_modules
"$root/scripts/setup-tokenizer-ref.sh" >/dev/null
out=${BENCH_OUT:-$root/bench/out}
mkdir -p "$out"
cd "$root"
go build -o "$out/tokbench" ./stages/tokenize/internal/tokbench
"$out/tokbench" -write-corpus "$out/corpus.jsonl"
cores=$(nproc)
rounds=${ROUNDS:-3}
load0=$(cut -d' ' -f1 /proc/loadavg)

go1=$(GOMAXPROCS=1 taskset -c 0 "$out/tokbench" -tokenizer "$model" -rounds "$rounds")
hf1=$(RAYON_NUM_THREADS=1 ROUNDS=$rounds taskset -c 0 node bench/tokenizer_hf.js "$nm" "$model/tokenizer.json" "$out/corpus.jsonl")
goN=$("$out/tokbench" -tokenizer "$model" -parallel -rounds "$rounds")
hfN=$(RAYON_NUM_THREADS=$cores BATCH=1 ROUNDS=$rounds node bench/tokenizer_hf.js "$nm" "$model/tokenizer.json" "$out/corpus.jsonl")

load1=$(cut -d' ' -f1 /proc/loadavg)
python3 - "$go1" "$hf1" "$goN" "$hfN" "$cores" "$load0" "$load1" <<'PY'
import json, sys
go1, hf1, goN, hfN = (json.loads(a) for a in sys.argv[1:5])
cores, load0, load1 = sys.argv[5:8]
print(f"machine: {cores} cores, load average {load0} before, {load1} after (other work skews the all-cores lines most)")
print(f"corpus: {go1['texts']} texts, {go1['bytes']/1e6:.2f} MB, {go1['tokens']} tokens")
same = go1['hash'] == hf1['hash'] == goN['hash'] == hfN['hash'] and go1['tokens'] == hf1['tokens']
print("ids identical to Hugging Face:", "yes" if same else f"NO (pipe {go1['hash']}, hf {hf1['hash']})")
def row(name, r):
    mb = r['bytes'] / 1e6
    return (f"{name:<34} wall {mb/r['wall_s']:7.2f} MB/s {r['tokens']/r['wall_s']/1e6:6.2f} Mtok/s   "
            f"cpu {mb/r['cpu_s']:7.2f} MB/s {r['tokens']/r['cpu_s']/1e6:6.2f} Mtok/s")
print(row("pipe, 1 core", go1))
print(row("hf tokenizers, 1 core (RAYON=1)", hf1))
print(f"{'ratio pipe/hf, 1 core':<34} wall {hf1['wall_s']/go1['wall_s']:6.2f}x   cpu {hf1['cpu_s']/go1['cpu_s']:6.2f}x")
print(row(f"pipe, {goN['threads']} goroutines/cores", goN))
print(row(f"hf encodeBatch, {hfN['threads']} threads", hfN))
print(f"{'ratio pipe/hf, all cores':<34} wall {hfN['wall_s']/goN['wall_s']:6.2f}x")
print(f"{'pipe parallel speed-up':<34} wall {go1['wall_s']/goN['wall_s']:6.2f}x on {goN['threads']} cores")
sys.exit(0 if same else 1)
PY
