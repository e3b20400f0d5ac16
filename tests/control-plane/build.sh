#!/usr/bin/env bash
# Builds the test control plane (etcd, kube-apiserver, kubectl and the `cluster` tool that drives
# them) and a node's programs (kubelet, kube-proxy, kube-scheduler, kube-controller-manager and
# the sandbox image's `pause`) from the Kubernetes Go modules pinned in go.mod, helm from its Go
# module (a `tool` in go.mod), and copies CRDs beside them: the Gateway API's from the pinned sigs.k8s.io/gateway-api
# module, and the few of cert-manager and prometheus-operator that the chart and the monitoring
# bundle create (pinned below by version and checksum):
#
#   OUT/bin/{cluster,etcd,kube-apiserver,kubectl,helm}
#   OUT/bin/{kubelet,kube-proxy,kube-scheduler,kube-controller-manager,pause}   the test node's
#   OUT/crds/{standard,experimental}/*.yaml
#   OUT/crds/{cert-manager,prometheus-operator}/*.yaml
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
helm_release=$(go list -m -f '{{.Version}}' helm.sh/helm/v4)
ldflags+=" -X helm.sh/helm/v4/internal/version.version=$helm_release -X helm.sh/helm/v4/internal/version.gitTreeState=clean"
# One build for all programs, so the packages they share compile once.
go build -trimpath -buildvcs=false -ldflags "$ldflags" -o "$out/bin/" ./cmd/... helm.sh/helm/v4/cmd/helm

crds=$(go list -m -f '{{.Dir}}' sigs.k8s.io/gateway-api)/config/crd
for channel in standard experimental; do
  rm -rf "$out/crds/$channel"
  cp -r "$crds/$channel" "$out/crds/$channel"
  chmod -R u+w "$out/crds/$channel"
done

# CRDs that only a few tests need, from Go modules that nothing here imports: downloaded (and
# verified against the checksum database) into the module cache without touching go.mod, then
# checked against the hash pinned here.
module_crds() {
  local into=$1 module=$2 version=$3 sum=$4 dir=$5
  shift 5
  local info got from
  info=$(go mod download -json "$module@$version")
  got=$(echo "$info" | sed -n 's/^[[:space:]]*"Sum": "\(.*\)",$/\1/p')
  from=$(echo "$info" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
  if [ "$got" != "$sum" ]; then
    echo "build.sh: $module@$version has checksum '$got', pinned '$sum'" >&2
    exit 1
  fi
  rm -rf "${out:?}/crds/$into"
  mkdir -p "$out/crds/$into"
  for file in "$@"; do
    cp "$from/$dir/$file" "$out/crds/$into/"
  done
  chmod -R u+w "$out/crds/$into"
}
# The root module ships the CRD YAML (example/prometheus-operator-crd); its pkg/apis/monitoring
# module has only the Go types.
module_crds prometheus-operator github.com/prometheus-operator/prometheus-operator v0.85.0 \
  h1:M5xLCLEoaW2IJfnuCwFzzpL+jSVQu3KGT84Pye+fW8s= example/prometheus-operator-crd \
  monitoring.coreos.com_servicemonitors.yaml monitoring.coreos.com_prometheusrules.yaml
module_crds cert-manager github.com/cert-manager/cert-manager v1.21.2 \
  h1:UWgoYM+KLNtRlqmoWOKjKBOBUPVHeepQ6/ac3ERJW68= deploy/crds \
  cert-manager.io_certificates.yaml cert-manager.io_issuers.yaml cert-manager.io_clusterissuers.yaml
echo "$out"
