// Reference for TestUnicodeTablesMatchHuggingFace: runs Hugging Face
// tokenizers' (npm tokenizers@0.23.2) character-level components over every
// Unicode scalar value and prints what they do, as one JSON object:
// punct / digits: the code points Punctuation / Digits(individual) isolate;
// lower / nfc / nfd / nfkc / nfkd: {code point: normalized} where it changes.
// Usage: node hf_unicode.js NODE_MODULES
const path = require('path');
const t = require(path.join(process.argv[2], 'tokenizers'));
const punct = t.punctuationPreTokenizer('isolated');
const digits = t.digitsPreTokenizer(true);
const norms = {
  lower: t.bertNormalizer({ cleanText: false, handleChineseChars: false, stripAccents: false, lowercase: true }),
  nfc: t.nfcNormalizer(), nfd: t.nfdNormalizer(), nfkc: t.nfkcNormalizer(), nfkd: t.nfkdNormalizer(),
};
const out = { punct: [], digits: [] };
for (const k of Object.keys(norms)) out[k] = {};
for (let base = 0; base < 0x110000; base += 4096) {
  let s = '';
  for (let c = base; c < base + 4096; c++) {
    if (c >= 0xd800 && c <= 0xdfff) continue;
    s += 'a' + String.fromCodePoint(c);
    const ch = String.fromCodePoint(c);
    for (const [k, n] of Object.entries(norms)) {
      const v = n.normalizeString(ch);
      if (v !== ch) out[k][c] = v;
    }
  }
  for (const [name, pt] of [['punct', punct], ['digits', digits]]) {
    for (const [p] of pt.preTokenizeString(s)) {
      const cps = [...p];
      if (cps.length === 1 && p !== 'a') out[name].push(cps[0].codePointAt(0));
    }
  }
}
process.stdout.write(JSON.stringify(out));
