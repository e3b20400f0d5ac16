#!/usr/bin/env bash
# Runs every fuzz target (fuzz/fuzz_targets, see docs/fuzzing.md) for N seconds each, one after
# the other, at the lowest CPU priority. Installs cargo-fuzz (from crates.io) and the nightly
# toolchain (through rustup) when they are missing; the build goes to its own target directory,
# $GATEWAY_DNS_FUZZ_TARGET_DIR, so it never mixes with the stable build's.
# Each run starts from the committed corpus (fuzz/corpus/<target>) and keeps what it finds in a
# temporary directory, so the committed corpus changes only by hand. A crash, a panic, a timeout
# or running out of memory fails the script; the input is saved under fuzz/artifacts/<target>/.
# Usage: scripts/fuzz.sh [seconds per target, default 30] [target...]
set -euo pipefail
cd "$(dirname "$0")/.."

seconds="${1:-30}"
[ "$#" -eq 0 ] || shift
export CARGO_TARGET_DIR="${GATEWAY_DNS_FUZZ_TARGET_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/gateway-dns/target-fuzz}"
mkdir -p "$CARGO_TARGET_DIR"

rustup toolchain list | grep -q '^nightly' || rustup toolchain install nightly --profile minimal
cargo fuzz --version >/dev/null 2>&1 || cargo install cargo-fuzz --locked

# No sanitizer: the library's little unsafe code does no pointer arithmetic or freeing of its own
# (docs/fuzzing.md), so AddressSanitizer would only slow the search;
# panics, overflow (debug assertions are on), hangs and memory blow-ups are what is looked for.
fuzz=(cargo +nightly fuzz)
build_flags=(--sanitizer none)
nice -n 19 "${fuzz[@]}" build "${build_flags[@]}"

targets=("$@")
[ "${#targets[@]}" -gt 0 ] || mapfile -t targets < <("${fuzz[@]}" list)
found=$(mktemp -d)
trap 'rm -rf "$found"' EXIT
for target in "${targets[@]}"; do
  mkdir -p "$found/$target" "fuzz/corpus/$target"
  log="$found/$target.log"
  # -timeout: one input taking over 10 s is a hang; -rss_limit_mb: the default memory bound.
  if ! nice -n 19 "${fuzz[@]}" run "${build_flags[@]}" "$target" "$found/$target" "fuzz/corpus/$target" -- \
    -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 >"$log" 2>&1; then
    tail -n 60 "$log" >&2
    echo "fuzz: $target failed; the input is in fuzz/artifacts/$target/" >&2
    exit 1
  fi
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log")
  coverage=$(grep -oE 'cov: [0-9]+ ft: [0-9]+' "$log" | tail -n 1)
  echo "fuzz: $target: ${seconds}s, $runs runs, $rate runs/s, $coverage, $(find "$found/$target" -type f | wc -l) new inputs"
done
