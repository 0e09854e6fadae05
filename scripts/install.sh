#!/usr/bin/env bash
# Installs a built Hayloft as a systemd service: a release artifact (scripts/release.sh: built,
# with its production dependencies and their prebuilt native modules, so nothing is built or
# downloaded on the device), or a checkout after `npm ci && npm run build`:
#
#   <prefix>/releases/<version>/   the release (dist, systemd, scripts, docs, package.json) and
#                                  its production dependencies (npm ci --omit=dev)
#   <prefix>/current               symlink to the release in use, switched in one rename, so an
#                                  upgrade never leaves a half-copied tree running and the
#                                  previous release stays for a rollback
#   <prefix>/bin/hayloft           the command (also linked from /usr/local/bin/hayloft)
#   /etc/hayloft/hayloft.yaml      the configuration: written once, never overwritten
#   /var/lib/hayloft               the data folder (LevelDB, token signing key), mode 0700
#   /etc/systemd/system/hayloft.service
#
# and creates the `hayloft` system user, then enables the unit (and restarts it when it was
# running: that is an upgrade). With --root DIR everything goes under DIR instead of /, and the
# steps that need the real system (useradd, chown, systemctl) are skipped: that is for tests and
# for preparing an image.
set -euo pipefail
umask 022

usage() {
  cat <<'EOF'
usage: scripts/install.sh [options]
  --prefix DIR   where the releases go (default /opt/hayloft)
  --root DIR     install under DIR instead of / (no useradd, chown or systemctl)
  --artifact F   the release artifact to install (hayloft-<version>-linux.tar.gz): no npm step
  --from DIR     the built release to install (default: the folder above this script)
  --node PATH    the node binary the service runs (default: node on PATH)
  --no-deps      do not run npm ci --omit=dev (the release already has its node_modules)
  --no-enable    do not enable or restart the service
  -h, --help     this text
EOF
}

PREFIX=/opt/hayloft
ROOT=/
FROM="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
NODE=""
DEPS=1
ENABLE=1
SERVICE_USER=hayloft
ARTIFACT=""

die() { echo "install.sh: $*" >&2; exit 1; }

while [ $# -gt 0 ]; do
  case "$1" in
    --prefix) PREFIX="${2:?--prefix needs a folder}"; shift 2;;
    --root) ROOT="${2:?--root needs a folder}"; shift 2;;
    --from) FROM="${2:?--from needs a folder}"; shift 2;;
    --artifact) ARTIFACT="${2:?--artifact needs a file}"; shift 2;;
    --node) NODE="${2:?--node needs a path}"; shift 2;;
    --no-deps) DEPS=0; shift;;
    --no-enable) ENABLE=0; shift;;
    -h|--help) usage; exit 0;;
    *) usage >&2; die "unknown option $1";;
  esac
done

case "$PREFIX" in /*) ;; *) die "--prefix must be an absolute path (it is the path on the device)";; esac
if [ -n "$ARTIFACT" ]; then
  [ -f "$ARTIFACT" ] || die "--artifact $ARTIFACT does not exist"
  UNPACKED="$(mktemp -d)"
  trap 'rm -rf "$UNPACKED"' EXIT
  tar -xzf "$ARTIFACT" -C "$UNPACKED" || die "$ARTIFACT is not a release artifact (tar.gz)"
  FROM="$(find "$UNPACKED" -mindepth 1 -maxdepth 1 -type d -name 'hayloft-*' | head -n 1)"
  [ -n "$FROM" ] && [ -f "$FROM/RELEASE.json" ] || die "$ARTIFACT is not a release artifact (no hayloft-<version>/RELEASE.json)"
fi
ROOT="$(cd "$ROOT" 2>/dev/null && pwd)" || die "--root folder does not exist"
FROM="$(cd "$FROM" 2>/dev/null && pwd)" || die "--from folder does not exist"
# R prefixes every path written; with the real root it is empty.
if [ "$ROOT" = / ]; then R=""; else R="$ROOT"; fi
REAL=0
if [ -z "$R" ]; then
  [ "$(id -u)" = 0 ] || die "run as root (sudo scripts/install.sh), or use --root DIR to install into a folder"
  REAL=1
fi

[ -f "$FROM/package.json" ] || die "$FROM is not a Hayloft release (no package.json)"
[ -f "$FROM/dist/cli.js" ] || die "$FROM is not built: run npm ci && npm run build there first"
[ -f "$FROM/systemd/hayloft.service" ] || die "$FROM has no systemd/hayloft.service"
[ -f "$FROM/bin/hayloft" ] || die "$FROM has no bin/hayloft"

if [ -z "$NODE" ]; then NODE="$(command -v node || true)"; fi
[ -n "$NODE" ] || die "node not found: install Node.js 20 or later, or pass --node PATH"
if [ -x "$NODE" ]; then
  major="$("$NODE" -p 'process.versions.node.split(".")[0]')"
  [ "$major" -ge 20 ] || die "$NODE is Node $major: Hayloft needs Node 20 or later"
  VERSION="$("$NODE" -p "require(process.argv[1]).version" "$FROM/package.json")"
else
  die "$NODE is not executable"
fi

RELEASES="$R$PREFIX/releases"
DEST="$RELEASES/$VERSION"
echo "installing Hayloft $VERSION from $FROM into ${R:-}$PREFIX"

# 1. The release, copied beside the one in use and renamed into place when complete.
mkdir -p "$RELEASES"
rm -rf "$DEST.new"
mkdir "$DEST.new"
for item in bin dist systemd scripts docs package.json package-lock.json README.md CHANGELOG.md LICENSE RELEASE.json; do
  if [ -e "$FROM/$item" ]; then cp -R "$FROM/$item" "$DEST.new/"; fi
done
if [ -f "$FROM/RELEASE.json" ] && [ -d "$FROM/node_modules" ]; then
  # A release artifact brings its production dependencies, native modules prebuilt.
  cp -R "$FROM/node_modules" "$DEST.new/"
elif [ "$DEPS" = 1 ]; then
  [ -f "$DEST.new/package-lock.json" ] || die "$FROM has no package-lock.json: cannot install the exact dependencies"
  echo "installing production dependencies (npm ci --omit=dev)"
  (cd "$DEST.new" && npm ci --omit=dev --no-audit --no-fund --loglevel=error) || die "npm ci failed"
elif [ -d "$FROM/node_modules" ] && [ ! -e "$DEST.new/node_modules" ]; then
  echo "note: --no-deps: the release's own node_modules are not copied; install them in $PREFIX/releases/$VERSION"
fi
if [ -e "$DEST" ]; then rm -rf "$DEST.old" && mv "$DEST" "$DEST.old"; fi
mv "$DEST.new" "$DEST"
rm -rf "$DEST.old"

# 2. Switch `current` in one rename.
ln -sfn "releases/$VERSION" "$R$PREFIX/current.new"
mv -T "$R$PREFIX/current.new" "$R$PREFIX/current"

# 3. The command.
mkdir -p "$R$PREFIX/bin"
cat > "$R$PREFIX/bin/hayloft.new" <<EOF
#!/bin/sh
# Written by scripts/install.sh: runs the release that $PREFIX/current points to with the chosen
# node, through the release's own command (bin/hayloft), which execs node with the daemon's
# runtime settings: one process, the one systemd started.
HAYLOFT_NODE="$NODE"
export HAYLOFT_NODE
exec "$PREFIX/current/bin/hayloft" "\$@"
EOF
chmod 755 "$R$PREFIX/bin/hayloft.new"
mv "$R$PREFIX/bin/hayloft.new" "$R$PREFIX/bin/hayloft"
mkdir -p "$R/usr/local/bin"
ln -sfn "$PREFIX/bin/hayloft" "$R/usr/local/bin/hayloft"

# 4. Configuration (kept across upgrades) and the data folder.
mkdir -p "$R/etc/hayloft"
if [ ! -e "$R/etc/hayloft/hayloft.yaml" ]; then
  cat > "$R/etc/hayloft/hayloft.yaml" <<'EOF'
# Hayloft configuration: every key is described in docs/configuration.md.
# Environment variables (HAYLOFT_PORT, ...) override these; `hayloft check-config --config
# /etc/hayloft/hayloft.yaml` validates this file.
dataDir: /var/lib/hayloft
host: 0.0.0.0
port: 8080
logLevel: info
# serverName: Level 3 controller
# tz: Sydney
# bacnetInterface: 192.168.1.20
EOF
  chmod 640 "$R/etc/hayloft/hayloft.yaml"
  echo "wrote /etc/hayloft/hayloft.yaml"
else
  echo "kept /etc/hayloft/hayloft.yaml"
fi
mkdir -p "$R/var/lib/hayloft"
chmod 700 "$R/var/lib/hayloft"

# 5. The unit, with this prefix.
mkdir -p "$R/etc/systemd/system"
sed -e "s#/opt/hayloft#$PREFIX#g" "$FROM/systemd/hayloft.service" > "$R/etc/systemd/system/hayloft.service.new"
chmod 644 "$R/etc/systemd/system/hayloft.service.new"
mv "$R/etc/systemd/system/hayloft.service.new" "$R/etc/systemd/system/hayloft.service"

# 6. The real system: user, ownership, systemd.
if [ "$REAL" = 0 ]; then
  echo "--root $ROOT: skipped creating the user, changing owners and systemctl"
  echo "installed Hayloft $VERSION"
  exit 0
fi
if ! id "$SERVICE_USER" >/dev/null 2>&1; then
  useradd --system --user-group --home-dir /var/lib/hayloft --no-create-home --shell /usr/sbin/nologin "$SERVICE_USER"
  echo "created the system user $SERVICE_USER"
fi
chown -R "$SERVICE_USER:$SERVICE_USER" /var/lib/hayloft
chgrp "$SERVICE_USER" /etc/hayloft/hayloft.yaml
if [ "$ENABLE" = 1 ] && [ ! -d /run/systemd/system ]; then
  echo "systemd is not running here: enable the service later with systemctl enable --now hayloft"
elif [ "$ENABLE" = 1 ]; then
  systemctl daemon-reload
  systemctl enable hayloft.service
  if systemctl is-active --quiet hayloft.service; then
    echo "restarting the running service on the new release"
    systemctl restart hayloft.service
  else
    echo "start it with: systemctl start hayloft"
  fi
fi
echo "installed Hayloft $VERSION (previous releases stay in $PREFIX/releases for a rollback)"
