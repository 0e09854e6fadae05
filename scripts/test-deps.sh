#!/bin/sh
# Installs the system packages the driver tests talk to, when they are missing: Debian's
# python3-pymodbus (a real Modbus TCP and RTU slave; python3-serial-asyncio, which pymodbus'
# server imports even for TCP), socat (virtual serial cables for RTU), chromium (the browser the
# console's tests drive through playwright-core, which cannot download its own here),
# mosquitto (the MQTT broker of the Sparkplug tests; openssl makes their certificates) and,
# optionally, tshark (an independent BACnet decoder), qemu-user-static with arm64 C libraries
# (the arm64 smoke check) and faketime (libfaketime: clock steps of the daemon). Run by `npm
# test` before tap.
#
# Idempotent and quick when everything is there (one dpkg-query). When installing is impossible
# (not root and no sudo, no apt, no network) it says so and exits 0: the tests that need a missing
# peer then skip with a message naming it, and the rest of the suite still runs.
set -u

REQUIRED="python3-pymodbus python3-serial-asyncio socat mosquitto openssl chromium"
# qemu-user-static and the arm64 C libraries run the arm64 smoke check (test/scripts/arm64.test.ts);
# faketime steps the daemon's clock (test/poller/clock-faketime.test.ts); strace counts the
# daemon's fsyncs in bench/wear (no test uses it; without it that figure is n/a); iproute2 (`ip
# netns`) builds the networks of namespaces of the broadcast and BBMD tests.
OPTIONAL="iproute2 tshark qemu-user-static libc6-arm64-cross libstdc++6-arm64-cross libgcc-s1-arm64-cross faketime strace"

missing() {
  for p in "$@"; do
    dpkg-query -W -f='${Status}\n' "$p" 2>/dev/null | grep -q '^install ok installed$' || printf '%s ' "$p"
  done
}

if ! command -v dpkg-query >/dev/null 2>&1 || ! command -v apt-get >/dev/null 2>&1; then
  echo "test-deps: not a Debian system (no dpkg/apt): Modbus peer tests will skip" >&2
  exit 0
fi

need=$(missing $REQUIRED)
want=$(missing $OPTIONAL)
[ -z "$need$want" ] && exit 0

if [ "$(id -u)" -eq 0 ]; then
  SUDO=""
elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
  SUDO="sudo -n"
else
  echo "test-deps: cannot install ${need}${want}(not root, no sudo): the tests needing them will skip" >&2
  exit 0
fi

export DEBIAN_FRONTEND=noninteractive
echo "test-deps: installing ${need}${want}" >&2
# A fresh machine has no package lists yet; an old list may name versions no longer served.
$SUDO apt-get update -qq >/dev/null 2>&1 || echo "test-deps: apt-get update failed; trying with the lists there are" >&2
if [ -n "$need" ]; then
  # shellcheck disable=SC2086
  $SUDO apt-get install -y -qq --no-install-recommends $need >/dev/null 2>&1 ||
    echo "test-deps: could not install ${need}: the tests needing them will skip" >&2
fi
if [ -n "$want" ]; then
  # tshark asks whether non-root users may capture: the noninteractive default (no) is right.
  # shellcheck disable=SC2086
  $SUDO apt-get install -y -qq --no-install-recommends $want >/dev/null 2>&1 ||
    echo "test-deps: could not install ${want}(optional: BACnet traffic is then not cross-checked, the arm64 check skips)" >&2
fi
exit 0
