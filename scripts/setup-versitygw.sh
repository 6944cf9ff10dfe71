#!/usr/bin/env bash
# Prepares the real S3-compatible server the upload-s3 tests run against
# (internal/testrig/testenv.StartS3), under .cache/ (gitignored):
#   .cache/bin/versitygw   versitygw v1.8.0 (github.com/versity/versitygw),
#                          built from the Go module proxy (pure Go; about a
#                          minute and a half cold, once)
# The tests start it as `versitygw --port 127.0.0.1:PORT posix DIR` with
# ROOT_ACCESS_KEY/ROOT_SECRET_KEY set: a directory served with real SigV4
# checks, on loopback only.
# Idempotent: a binary already built at that version is kept (no network).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
version=v1.8.0
bin_dir=$root/.cache/bin
bin=$bin_dir/versitygw

built_version() {
  go version -m "$1" 2>/dev/null | awk '$1 == "mod" && $2 == "github.com/versity/versitygw" { print $3 }'
}

if [ "$(built_version "$bin")" = "$version" ]; then
  echo "setup-versitygw: $bin is already versitygw $version"
  exit 0
fi
echo "setup-versitygw: building versitygw $version into $bin_dir (about a minute and a half, once)"
start=$(date +%s)
# Outside our module: go install pkg@version never touches our go.mod.
(cd / && GOBIN=$bin_dir GOFLAGS=-buildvcs=false go install "github.com/versity/versitygw/cmd/versitygw@$version")
got=$(built_version "$bin")
if [ "$got" != "$version" ]; then
  echo "setup-versitygw: built $bin reports version '$got', want $version" >&2
  exit 1
fi
echo "setup-versitygw: built versitygw $version in $(( $(date +%s) - start ))s"
