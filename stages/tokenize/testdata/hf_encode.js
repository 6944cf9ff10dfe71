// Reference encoder for the tests: Hugging Face tokenizers (npm
// tokenizers@0.23.2, its Rust core) from .cache/node (scripts/setup-tokenizer-ref.sh).
// Usage: node hf_encode.js NODE_MODULES TOKENIZER_JSON INPUT_JSONL [decode]
// INPUT_JSONL has one JSON string per line; prints one JSON array of ids per
// line, or with "decode" {"ids": [...], "text": decode(ids)} per line.
const path = require('path');
const fs = require('fs');
const [nodeModules, tokenizerJSON, input, mode] = process.argv.slice(2);
const { Tokenizer } = require(path.join(nodeModules, 'tokenizers'));
const tok = Tokenizer.fromFile(tokenizerJSON);
const lines = fs.readFileSync(input, 'utf8').split('\n').filter((l) => l.length > 0);
(async () => {
  const out = [];
  for (const line of lines) {
    const ids = (await tok.encode(JSON.parse(line), null, { addSpecialTokens: false })).getIds();
    // decode([]) is "" (and its Strip decoder would panic on it).
    if (mode === 'decode') {
      out.push(JSON.stringify({ ids, text: ids.length ? await tok.decode(ids, false) : "" }));
    } else {
      out.push(JSON.stringify(ids));
    }
  }
  process.stdout.write(out.join('\n') + '\n');
})().catch((e) => { console.error(e); process.exit(1); });
