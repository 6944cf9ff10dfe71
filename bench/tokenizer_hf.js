// Reference side of bench/tokenizer.sh: Hugging Face tokenizers (npm
// tokenizers@0.23.2) encoding the corpus one document at a time, or with
// encodeBatch (Rayon threads) when BATCH=1. Prints the same JSON line as
// tokbench: bytes, tokens, wall and CPU seconds (best of ROUNDS), id hash.
// Usage: node tokenizer_hf.js NODE_MODULES TOKENIZER_JSON CORPUS_JSONL
const path = require('path');
const fs = require('fs');
const [nodeModules, tokenizerJSON, corpusPath] = process.argv.slice(2);
const { Tokenizer } = require(path.join(nodeModules, 'tokenizers'));
const tok = Tokenizer.fromFile(tokenizerJSON);
const texts = fs.readFileSync(corpusPath, 'utf8').split('\n').filter((l) => l.length > 0).map((l) => JSON.parse(l));
const rounds = Number(process.env.ROUNDS || 3);
const batch = process.env.BATCH === '1';

// FNV-1a 64 over each id as 4 little-endian bytes, 0xffffffff after each text.
function fnv(rows) {
  let h = 0xcbf29ce484222325n;
  const p = 0x100000001b3n;
  const m = (1n << 64n) - 1n;
  const byte = (b) => { h ^= BigInt(b); h = (h * p) & m; };
  for (const row of rows) {
    for (const id of row) { byte(id & 255); byte((id >> 8) & 255); byte((id >> 16) & 255); byte((id >>> 24) & 255); }
    byte(255); byte(255); byte(255); byte(255);
  }
  return h.toString(16).padStart(16, '0');
}

(async () => {
  let bestWall = Infinity, bestCPU = Infinity, ids = null;
  for (let r = 0; r < rounds; r++) {
    const c0 = process.cpuUsage();
    const t0 = process.hrtime.bigint();
    let rows;
    if (batch) {
      const encs = await tok.encodeBatch(texts, { addSpecialTokens: false });
      rows = encs.map((e) => e.getIds());
    } else {
      rows = [];
      for (const s of texts) rows.push((await tok.encode(s, null, { addSpecialTokens: false })).getIds());
    }
    const wall = Number(process.hrtime.bigint() - t0) / 1e9;
    const c = process.cpuUsage(c0);
    bestWall = Math.min(bestWall, wall);
    bestCPU = Math.min(bestCPU, (c.user + c.system) / 1e6);
    ids = rows;
  }
  let bytes = 0, tokens = 0;
  for (const s of texts) bytes += Buffer.byteLength(s, 'utf8');
  for (const r of ids) tokens += r.length;
  console.log(JSON.stringify({ impl: 'hf-tokenizers-0.23.2', texts: texts.length, bytes, tokens, wall_s: bestWall, cpu_s: bestCPU, hash: fnv(ids), threads: batch ? Number(process.env.RAYON_NUM_THREADS || 0) : 1 }));
})().catch((e) => { console.error(e); process.exit(1); });
