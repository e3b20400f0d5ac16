#!/usr/bin/env bash
# Installs what the tests need (Debian packages) when missing, then runs every check and test.
# Usage: scripts/test.sh   (as root, or with sudo available for apt-get)
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(python3-yaml bind9 bind9-dnsutils pdns-server pdns-backend-sqlite3 sqlite3)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ]; then
  echo "installing: ${missing[*]}"
  sudo_cmd=""
  [ "$(id -u)" -eq 0 ] || sudo_cmd="sudo"
  # The tests start their own DNS servers on loopback; keep the packages' services from starting.
  if [ ! -e /usr/sbin/policy-rc.d ]; then
    printf '#!/bin/sh\nexit 101\n' | $sudo_cmd tee /usr/sbin/policy-rc.d >/dev/null
    $sudo_cmd chmod +x /usr/sbin/policy-rc.d
    trap '$sudo_cmd rm -f /usr/sbin/policy-rc.d' EXIT
  fi
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

cargo fmt --all -- --check
cargo clippy --all-targets --locked -- -D warnings
cargo test --all-targets --locked
