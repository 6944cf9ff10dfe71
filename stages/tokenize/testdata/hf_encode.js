// Reference encoder for the tests: Hugging Face tokenizers (npm
// tokenizers@0.23.2, its Rust core) from .cache/node (scripts/setup-tokenizer-ref.sh).
// Usage: node hf_encode.js NODE_MODULES TOKENIZER_JSON INPUT_JSONL
// INPUT_JSONL has one JSON string per line; prints one JSON array of ids per line.
const path = require('path');
const fs = require('fs');
const [nodeModules, tokenizerJSON, input] = process.argv.slice(2);
const { Tokenizer } = require(path.join(nodeModules, 'tokenizers'));
const tok = Tokenizer.fromFile(tokenizerJSON);
const lines = fs.readFileSync(input, 'utf8').split('\n').filter((l) => l.length > 0);
(async () => {
  const out = [];
  for (const line of lines) {
    const enc = await tok.encode(JSON.parse(line), null, { addSpecialTokens: false });
    out.push(JSON.stringify(enc.getIds()));
  }
  process.stdout.write(out.join('\n') + '\n');
})().catch((e) => { console.error(e); process.exit(1); });
