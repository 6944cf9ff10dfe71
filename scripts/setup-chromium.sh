#!/usr/bin/env bash
# Installs the headless browser the run-report test loads RUN_DIR/report.html
# in (cmd/pipe TestReport): Debian's chromium, from apt. The test
# finds it as `chromium` on PATH (or $PIPE_CHROMIUM).
# Idempotent: an installed chromium is kept (no network).
set -euo pipefail
if command -v chromium >/dev/null 2>&1; then
  echo "setup-chromium: $(chromium --version 2>/dev/null | head -1) is installed"
  exit 0
fi
if [ "$(id -u)" != 0 ]; then
  echo "setup-chromium: chromium is missing and this is not root: run 'apt-get install chromium' as root" >&2
  exit 1
fi
echo "setup-chromium: installing chromium with apt-get (a few minutes, once)"
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium
echo "setup-chromium: $(chromium --version 2>/dev/null | head -1) installed"
