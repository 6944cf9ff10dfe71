#!/usr/bin/env bash
# Sets up the references the tokenizer tests and bench/tokenizer.sh compare
# against: npm tokenizers@0.23.2 (Hugging Face's Rust core, prebuilt) in
# .cache/node/, and a check that python3 has jinja2 (the chat-template
# reference). Also fetches the Qwen3 files (scripts/fetch-qwen3.sh).
# Idempotent: a second run with everything in place does no network access.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/fetch-qwen3.sh"
dest=$root/.cache/node
want=0.23.2
have=$(node -e "console.log(require('$dest/node_modules/tokenizers/package.json').version)" 2>/dev/null || true)
if [ "$have" != "$want" ]; then
  mkdir -p "$dest"
  (cd "$dest" && [ -f package.json ] || echo '{"name":"pipe-tokenizer-ref","private":true}' > package.json)
  (cd "$dest" && npm install --silent --no-audit --no-fund "tokenizers@$want" >/dev/null)
  node -e "require('$dest/node_modules/tokenizers')" || {
    echo "setup-tokenizer-ref: tokenizers@$want installed but does not load in node" >&2
    exit 1
  }
  echo "setup-tokenizer-ref: tokenizers@$want in $dest"
fi
if ! python3 -c 'import jinja2' 2>/dev/null; then
  echo "setup-tokenizer-ref: python3 has no jinja2 (pip install jinja2)" >&2
  exit 1
fi
