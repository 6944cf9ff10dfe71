#!/usr/bin/env bash
# Tokenizer throughput per model family: pipe's tokenizer against Hugging
# Face tokenizers@0.23.2 (Rust core via npm, RAYON_NUM_THREADS=1) on the same
# corpus in the same run, one document at a time, both pinned to core 0.
# For each family (the real tokenizer.json files scripts/fetch-tokenizers.sh
# fetches) it checks both produce identical ids (hash of all ids) and prints
# MB/s and the ratio by CPU time (the fair figure on a busy machine; wall time
# is shown too) against the target: >= 5x for byte-level BPE families, >= 2x
# for the others. ALL_CORES=1 adds qwen3 over all cores (encodeBatch for HF).
# Exits non-zero if any family's ids differ from Hugging Face's.
# Usage: bench/tokenizer.sh [FAMILY...]   (after scripts/setup-tokenizer-ref.sh)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
nm=$root/.cache/node/node_modules
"$root/scripts/setup-tokenizer-ref.sh" >/dev/null
families=(qwen3 llama3 llama3_1 deepseek_v3 gemma3 gptoss llama2)
[ $# -gt 0 ] && families=("$@")
"$root/scripts/fetch-tokenizers.sh" "${families[@]}" >/dev/null
out=${BENCH_OUT:-$root/bench/out}
mkdir -p "$out"
cd "$root"
go build -o "$out/tokbench" ./stages/tokenize/internal/tokbench
"$out/tokbench" -write-corpus "$out/corpus.jsonl"
rounds=${ROUNDS:-3}
load0=$(cut -d' ' -f1 /proc/loadavg)
results=()
for f in "${families[@]}"; do
  dir=$root/.cache/tokenizers/$f
  go1=$(GOMAXPROCS=1 taskset -c 0 "$out/tokbench" -tokenizer "$dir" -rounds "$rounds")
  hf1=$(RAYON_NUM_THREADS=1 ROUNDS=$rounds taskset -c 0 node bench/tokenizer_hf.js "$nm" "$dir/tokenizer.json" "$out/corpus.jsonl")
  results+=("$f" "$go1" "$hf1")
done
if [ "${ALL_CORES:-0}" = 1 ]; then
  dir=$root/.cache/tokenizers/qwen3
  results+=("qwen3 (all cores)" "$("$out/tokbench" -tokenizer "$dir" -parallel -rounds "$rounds")" \
    "$(RAYON_NUM_THREADS=$(nproc) BATCH=1 ROUNDS=$rounds node bench/tokenizer_hf.js "$nm" "$dir/tokenizer.json" "$out/corpus.jsonl")")
fi
load1=$(cut -d' ' -f1 /proc/loadavg)
python3 - "$(nproc)" "$load0" "$load1" "${results[@]}" <<'PY'
import json, sys
cores, load0, load1 = sys.argv[1:4]
rows = sys.argv[4:]
print(f"machine: {cores} cores, load average {load0} before, {load1} after")
first = json.loads(rows[1])
print(f"corpus: {first['texts']} texts, {first['bytes']/1e6:.2f} MB")
print(f"{'family':<18} {'ids':<10} {'pipe MB/s':>10} {'hf MB/s':>8} {'cpu ratio':>10} {'wall ratio':>11}  target")
ok = True
for i in range(0, len(rows), 3):
    name, go, hf = rows[i], json.loads(rows[i + 1]), json.loads(rows[i + 2])
    same = go['hash'] == hf['hash'] and go['tokens'] == hf['tokens']
    ok = ok and same
    mb = go['bytes'] / 1e6
    cpu, wall = hf['cpu_s'] / go['cpu_s'], hf['wall_s'] / go['wall_s']
    target = 5 if go.get('byte_level') else 2
    verdict = "met" if cpu >= target else "NOT met"
    if "all cores" in name:
        verdict, target = "-", "-"
    print(f"{name:<18} {'identical' if same else 'DIFFER':<10} {mb/go['cpu_s']:10.2f} {mb/hf['cpu_s']:8.2f} {cpu:9.2f}x {wall:10.2f}x  >= {target}x {verdict}")
sys.exit(0 if ok else 1)
PY
