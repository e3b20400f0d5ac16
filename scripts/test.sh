#!/usr/bin/env bash
# Installs what the tests need when it is missing (Debian packages), builds the test control
# plane (etcd, kube-apiserver, kubectl and a node's kubelet, kube-proxy, scheduler and
# controller manager from the Kubernetes Go modules, cached) and the peer
# (external-dns from its Go module, cached), then runs every check and test:
# gofmt and go vet, cargo fmt, clippy, every test binary, and each fuzz target for 30 s.
# Usage: scripts/test.sh   (as root, or with sudo available for apt-get; needs Go and Rust)
set -euo pipefail
cd "$(dirname "$0")/.."

sudo_cmd=""
[ "$(id -u)" -eq 0 ] || sudo_cmd="sudo"

# prometheus: its promtool checks the alerting rules and the exported metrics (the server never starts).
# bash, zsh and fish load the completion scripts; groff renders the man pages.
# containerd, runc, the CNI plugins, iptables and conntrack run the test node (tests/node);
# buildah builds the image from the Dockerfile for it.
# chromium and its WebDriver load the status page in a real browser (tests/cluster/status_page.rs).
packages=(bind9 bind9-dnsutils bind9-utils dnsperf pdns-server pdns-backend-sqlite3 sqlite3 curl prometheus bash zsh fish groff-base
  containerd runc containernetworking-plugins buildah iptables conntrack iproute2 binutils
  chromium chromium-driver)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ]; then
  echo "installing: ${missing[*]}"
  # The tests start their own DNS servers on loopback; keep the packages' services from starting.
  made_policy=""
  if [ ! -e /usr/sbin/policy-rc.d ]; then
    printf '#!/bin/sh\nexit 101\n' | $sudo_cmd tee /usr/sbin/policy-rc.d >/dev/null
    $sudo_cmd chmod +x /usr/sbin/policy-rc.d
    made_policy=1
  fi
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq --no-install-recommends "${missing[@]}"
  [ -z "$made_policy" ] || $sudo_cmd rm -f /usr/sbin/policy-rc.d
fi

# The real control plane the cluster tests start (and the kubectl/kustomize the manifest tests
# use, and the helm the chart tests use), built from the Go modules pinned in
# tests/control-plane/go.mod into a cache outside the clone; a warm rebuild takes seconds.
# Likewise the peer the side-by-side tests run beside gateway-dns: real external-dns and a
# webhook-provider server around its RFC 2136 provider, from the module pinned in
# tests/peer/go.mod (a cold build downloads and compiles external-dns with every provider it
# ships: minutes).
command -v go >/dev/null || { echo "scripts/test.sh: Go (1.26) is needed to build the test control plane" >&2; exit 1; }
cache="${XDG_CACHE_HOME:-$HOME/.cache}/gateway-dns"
export GATEWAY_DNS_CONTROL_PLANE="${GATEWAY_DNS_CONTROL_PLANE:-$cache/control-plane}"
export GATEWAY_DNS_PEER="${GATEWAY_DNS_PEER:-$cache/peer}"
unformatted=$(gofmt -l tests/control-plane tests/peer)
[ -z "$unformatted" ] || { echo "gofmt would change: $unformatted" >&2; exit 1; }
(cd tests/control-plane && go vet ./...)
(cd tests/peer && go vet ./...)
echo "building the test control plane into $GATEWAY_DNS_CONTROL_PLANE"
tests/control-plane/build.sh "$GATEWAY_DNS_CONTROL_PLANE" >/dev/null
echo "building external-dns (the peer) into $GATEWAY_DNS_PEER"
tests/peer/build.sh "$GATEWAY_DNS_PEER" >/dev/null

# axe-core, the accessibility check the browser test runs in the page, from npm at the version
# tests/browser/package-lock.json pins, into the cache (again only when the lock changed).
command -v npm >/dev/null || { echo "scripts/test.sh: npm (Node.js) is needed for axe-core, the browser test's accessibility check" >&2; exit 1; }
browser_tools="${GATEWAY_DNS_BROWSER_TOOLS:-$cache/browser}"
if ! cmp -s tests/browser/package-lock.json "$browser_tools/package-lock.json" || [ ! -e "$browser_tools/node_modules/axe-core/axe.min.js" ]; then
  mkdir -p "$browser_tools"
  cp tests/browser/package.json tests/browser/package-lock.json "$browser_tools/"
  (cd "$browser_tools" && npm ci --no-audit --no-fund --silent)
fi
export GATEWAY_DNS_AXE="$browser_tools/node_modules/axe-core/axe.min.js"

cargo fmt --all -- --check
cargo clippy --all-targets --locked -- -D warnings
# Benchmarks and examples are compiled by clippy above; benchmarks run with `cargo bench`.
log=$(mktemp)
diff_log=$(mktemp)
trap 'rm -f "$log" "$diff_log"' EXIT
cargo test --locked --lib --bins --tests -- --skip a_seeded_schedule_of_changes_and_faults 2>&1 | tee "$log"
# The soak (tests/soak) on its own, so that its report (seed, operations, faults, checks,
# convergence) is shown whether it passes or not.
cargo test --locked --test soak -- --nocapture 2>&1 | tee -a "$log"
# The behaviour diff against real external-dns (benches/peer_diff.rs) as an assertion: it exits 1
# when a difference has no classification or a classification no longer matches a difference.
# Its document goes to the log only; `scripts/benchmarks` is what rewrites the docs.
echo "peer_diff: the scenarios side by side with external-dns"
cargo test --locked --bench peer_diff -- --no-write >"$diff_log" 2>&1 || { cat "$diff_log"; exit 1; }
grep -E '^[0-9]+ by design, ' "$diff_log"
# Every fuzz target for a while (30 s each unless GATEWAY_DNS_FUZZ_SECONDS says otherwise; 0 skips
# them); a crash fails the run. scripts/fuzz.sh installs cargo-fuzz and nightly when missing.
fuzz_seconds="${GATEWAY_DNS_FUZZ_SECONDS:-30}"
[ "$fuzz_seconds" = 0 ] || scripts/fuzz.sh "$fuzz_seconds"
# One closing line for all test binaries together.
awk '/^test result:/ { for (i = 1; i <= NF; i++) { if ($(i+1) ~ /^passed/) p += $i; if ($(i+1) ~ /^failed/) f += $i } }
     END { printf "tests: %d passed, %d failed\n", p, f }' "$log"
