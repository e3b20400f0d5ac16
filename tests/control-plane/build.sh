#!/usr/bin/env bash
# Builds the test control plane (etcd, kube-apiserver, kubectl and the `cluster` tool that drives
# them) from the Kubernetes Go modules pinned in go.mod, and copies the Gateway API CRDs of the
# pinned sigs.k8s.io/gateway-api module beside them:
#
#   OUT/bin/{cluster,etcd,kube-apiserver,kubectl}
#   OUT/crds/{standard,experimental}/*.yaml
#
# Usage: tests/control-plane/build.sh OUT
# Go's build and module caches (GOCACHE, GOMODCACHE) make a second run a matter of seconds.
set -euo pipefail
out=${1:?usage: build.sh OUT}
cd "$(dirname "$0")"
mkdir -p "$out/bin" "$out/crds"
out=$(cd "$out" && pwd)

# The version the binaries report (kubectl version, /version): the release go.mod pins.
release=$(go list -m -f '{{.Version}}' k8s.io/kubernetes)
minor=$(echo "$release" | cut -d. -f2)
ldflags=""
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  ldflags+=" -X $pkg.gitVersion=$release -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor -X $pkg.gitTreeState=clean"
done
go build -trimpath -buildvcs=false -ldflags "$ldflags" -o "$out/bin/" ./cmd/...

crds=$(go list -m -f '{{.Dir}}' sigs.k8s.io/gateway-api)/config/crd
for channel in standard experimental; do
  rm -rf "$out/crds/$channel"
  cp -r "$crds/$channel" "$out/crds/$channel"
  chmod -R u+w "$out/crds/$channel"
done
echo "$out"
