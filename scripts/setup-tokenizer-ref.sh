#!/usr/bin/env bash
# Sets up the references the tokenizer tests and bench/tokenizer.sh compare
# against: npm tokenizers@0.23.2 (Hugging Face's Rust core, prebuilt) in
# .cache/node/, and python3's jinja2 (the chat-template reference; on
# Debian, as root, apt-get install python3-jinja2). Also fetches the Qwen3 files (scripts/fetch-qwen3.sh).
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
  # Debian's python3 has no jinja2, and Debian 12 refuses `pip install` into
  # it (PEP 668, externally-managed-environment): its package is the way.
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1 && [ "$(command -v python3)" = /usr/bin/python3 ]; then
    echo "setup-tokenizer-ref: installing python3-jinja2 with apt-get (once)"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends python3-jinja2
  fi
fi
if ! python3 -c 'import jinja2' 2>/dev/null; then
  if command -v apt-get >/dev/null 2>&1; then
    echo "setup-tokenizer-ref: $(command -v python3) has no jinja2: run 'apt-get install python3-jinja2' as root (Debian's python3; pip is refused there), or 'pip install jinja2' for a python3 of your own" >&2
  else
    echo "setup-tokenizer-ref: $(command -v python3) has no jinja2: pip install jinja2" >&2
  fi
  exit 1
fi
