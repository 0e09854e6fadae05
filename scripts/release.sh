#!/usr/bin/env bash
# Builds the release artifact of this checkout: one tarball per version that installs on a fresh
# Raspberry Pi (arm64, and armv7 where the native modules allow) with the OS's Node, no build step
# and no dev dependencies:
#
#   hayloft-<version>/bin/            the launcher (bin/hayloft: execs node with the runtime settings)
#   hayloft-<version>/dist/           the built JavaScript (tsc) and the console (dist/web)
#   hayloft-<version>/node_modules/   production dependencies only (npm ci --omit=dev), with no
#                                     install script run: the native modules (classic-level,
#                                     serialport's bindings) load the prebuilt binaries their npm
#                                     tarballs ship for linux-x64, linux-arm64 and linux-arm
#   hayloft-<version>/systemd/        the unit; scripts/ (install.sh), docs/, package.json, ...
#   hayloft-<version>/RELEASE.json    version, Node engines, the platforms every native module
#                                     has a prebuilt binary for (checked here, not assumed)
#
# written as <out>/hayloft-<version>-linux.tar.gz. With --key, an Ed25519 signature of the
# tarball's bytes goes beside it (<tarball>.sig, base64), made with node:crypto: what
# `hayloft update` checks against the public key configured on the gateway.
#
#   scripts/release.sh [--out DIR] [--key private-key.pem] [--no-build]
set -euo pipefail
umask 022

OUT="$(pwd)/release"
KEY=""
BUILD=1
die() { echo "release.sh: $*" >&2; exit 1; }
while [ $# -gt 0 ]; do
  case "$1" in
    --out) OUT="${2:?--out needs a folder}"; shift 2;;
    --key) KEY="${2:?--key needs a PEM file}"; shift 2;;
    --no-build) BUILD=0; shift;;
    -h|--help) sed -n '2,22p' "$0"; exit 0;;
    *) die "unknown option $1";;
  esac
done

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO"
VERSION="$(node -p 'require("./package.json").version')"
if [ "$BUILD" = 1 ]; then
  echo "building (npm run build)"
  npm run --silent build
fi
[ -f dist/cli.js ] || die "dist/cli.js is missing: build first (npm run build)"
[ -f dist/web/index.html ] || die "dist/web is missing: the console is not built"

STAGE="$(mktemp -d)"
trap 'rm -rf "$STAGE"' EXIT
DIR="$STAGE/hayloft-$VERSION"
mkdir "$DIR"
for item in bin dist systemd scripts docs package.json package-lock.json README.md CHANGELOG.md LICENSE; do
  if [ -e "$item" ]; then cp -R "$item" "$DIR/"; fi
done
echo "production dependencies (npm ci --omit=dev --ignore-scripts)"
(cd "$DIR" && npm ci --omit=dev --ignore-scripts --prefer-offline --no-audit --no-fund --loglevel=error) || die "npm ci failed"

# Every native module (a binding.gyp) must ship a prebuilt binary per platform we claim.
PLATFORMS=""
for platform in linux-x64 linux-arm64 linux-arm; do
  ok=1
  while IFS= read -r gyp; do
    mod="$(dirname "$gyp")"
    if ! ls "$mod/prebuilds/$platform"/*.node >/dev/null 2>&1; then
      echo "note: $(basename "$mod") has no prebuilt binary for $platform"
      ok=0
    fi
  done < <(find "$DIR/node_modules" -name binding.gyp -not -path '*/deps/*')
  if [ "$ok" = 1 ]; then PLATFORMS="$PLATFORMS $platform"; fi
done
case "$PLATFORMS" in *linux-arm64*) ;; *) die "a native module has no linux-arm64 prebuild: the artifact would not run on a Pi";; esac
node -e '
  const [file, version, platforms] = process.argv.slice(1);
  const pkg = require(process.cwd() + "/package.json");
  require("fs").writeFileSync(file, JSON.stringify({ name: "hayloft", version, node: pkg.engines.node, platforms: platforms.trim().split(" "), builtAt: new Date().toISOString() }, null, 2) + "\n");
' "$DIR/RELEASE.json" "$VERSION" "$PLATFORMS"

mkdir -p "$OUT"
TARBALL="$OUT/hayloft-$VERSION-linux.tar.gz"
tar -czf "$TARBALL.new" -C "$STAGE" "hayloft-$VERSION"
mv "$TARBALL.new" "$TARBALL"
if [ -n "$KEY" ]; then
  node -e '
    const { createPrivateKey, sign } = require("crypto");
    const fs = require("fs");
    const [tarball, key] = process.argv.slice(1);
    const sig = sign(null, fs.readFileSync(tarball), createPrivateKey(fs.readFileSync(key)));
    fs.writeFileSync(tarball + ".sig", sig.toString("base64") + "\n");
  ' "$TARBALL" "$KEY"
  echo "signed: $TARBALL.sig"
fi
echo "built $TARBALL (platforms:$PLATFORMS)"
