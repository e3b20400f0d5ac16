#!/usr/bin/env bash
# Builds the peer the side-by-side tests and benchmarks run beside gateway-dns: real external-dns
# at the version go.mod pins (from the Go module proxy; none of its code is kept in this
# repository), a webhook-provider server around its RFC 2136 provider, and its DNSEndpoint CRD:
#
#   OUT/bin/{external-dns,webhook-rfc2136}
#   OUT/crds/dnsendpoints.externaldns.k8s.io.yaml
#
# Usage: tests/peer/build.sh OUT
# Go's build and module caches (GOCACHE, GOMODCACHE) make a second run a matter of seconds.
set -euo pipefail
out=${1:?usage: build.sh OUT}
cd "$(dirname "$0")"
mkdir -p "$out/bin" "$out/crds"
out=$(cd "$out" && pwd)

# The version `external-dns --version` reports: the release go.mod pins.
release=$(go list -m -f '{{.Version}}' sigs.k8s.io/external-dns)
go build -trimpath -buildvcs=false \
  -ldflags "-X sigs.k8s.io/external-dns/pkg/apis/externaldns.Version=$release" \
  -o "$out/bin/" sigs.k8s.io/external-dns ./cmd/...

crd=$(go list -m -f '{{.Dir}}' sigs.k8s.io/external-dns)/config/crd/standard/dnsendpoints.externaldns.k8s.io.yaml
install -m 0644 "$crd" "$out/crds/"
echo "$release" > "$out/VERSION"
echo "$out"
