#!/usr/bin/env bash
# Installs the shard readers that are not ours, which the tests of the Parquet
# and Arrow IPC shards (write-arrow) read them back with: npm
# @duckdb/node-api@1.5.6-r.1 (DuckDB, prebuilt for the platform) for Parquet
# and npm apache-arrow@21.2.0 for Arrow IPC files. Exact versions come from
# scripts/readers/package.json and its package-lock.json; they are installed
# with `npm ci` into .cache/readers/ (gitignored), where internal/testrig/readers finds
# them. Idempotent: with the same lock file already installed and loading,
# it does no network access.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
src=$root/scripts/readers
dest=$root/.cache/readers
want=$(sha256sum "$src/package-lock.json" | cut -d' ' -f1)

loads() {
  (cd "$dest" && node -e '
    const duckdb = require("@duckdb/node-api");
    const arrow = require("apache-arrow");
    const v = (p) => JSON.parse(require("fs").readFileSync("node_modules/" + p + "/package.json", "utf8")).version;
    if (v("@duckdb/node-api") !== "1.5.6-r.1" || v("apache-arrow") !== "21.2.0") process.exit(2);
    if (typeof duckdb.DuckDBInstance !== "function" || typeof arrow.tableFromIPC !== "function") process.exit(3);
  ') 2>/dev/null
}

if [ "$(cat "$dest/.lock-sha256" 2>/dev/null || true)" = "$want" ] && loads; then
  exit 0
fi
mkdir -p "$dest"
rm -f "$dest/.lock-sha256"
cp "$src/package.json" "$src/package-lock.json" "$dest/"
(cd "$dest" && npm ci --silent --no-audit --no-fund >/dev/null)
loads || {
  echo "setup-readers: @duckdb/node-api and apache-arrow installed in $dest but do not load in node" >&2
  exit 1
}
echo "$want" > "$dest/.lock-sha256"
echo "setup-readers: @duckdb/node-api@1.5.6-r.1 and apache-arrow@21.2.0 in $dest"
