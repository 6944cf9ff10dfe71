// Reference for TestUnicodeTablesMatchHuggingFace: runs Hugging Face
// tokenizers' (npm tokenizers@0.23.2) character-level components over every
// Unicode scalar value and prints what they do, as one JSON object:
// punct / digits: the code points Punctuation / Digits(individual) isolate;
// lower / nfc / nfd / nfkc / nfkd: {code point: normalized} where it changes;
// onig: {class: [code points]} for the \p{X} classes Split patterns use, as
// Oniguruma (which runs them) has them.
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
out.onig = {};
for (const cls of ['L', 'Lu', 'Ll', 'Lt', 'Lm', 'Lo', 'M', 'N', 'P', 'S']) {
  const json = {
    version: '1.0', truncation: null, padding: null, added_tokens: [], normalizer: null, post_processor: null, decoder: null,
    pre_tokenizer: { type: 'Split', pattern: { Regex: '\\p{' + cls + '}' }, behavior: 'Isolated', invert: false },
    model: { type: 'BPE', dropout: null, unk_token: null, continuing_subword_prefix: null, end_of_word_suffix: null, fuse_unk: false, byte_fallback: false, vocab: { a: 0 }, merges: [] },
  };
  const pt = t.Tokenizer.fromString(JSON.stringify(json)).getPreTokenizer();
  const cps = [];
  for (let base = 0; base < 0x110000; base += 4096) {
    let s = '';
    for (let c = base; c < base + 4096; c++) { if (c >= 0xd800 && c <= 0xdfff) continue; s += '\u0001' + String.fromCodePoint(c); }
    for (const [p] of pt.preTokenizeString(s)) { const d = [...p]; if (d.length === 1 && p !== '\u0001') cps.push(d[0].codePointAt(0)); }
  }
  out.onig[cls] = cps;
}
process.stdout.write(JSON.stringify(out));
