#!/usr/bin/env bash
# Build kube-apiserver, kube-controller-manager, kube-scheduler, kubectl and etcd from the Go module proxy through a
# wrapper module (k8s.io/kubernetes cannot be `go install`ed: its go.mod replaces every staging module).
# Idempotent: the binaries are cached in .cache/k8s-v$K8S_VERSION/bin; only missing ones are built.
# Go's module and build caches live in .cache/go (shared with build-helm.sh).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd); root=$(cd "$here/../.." && pwd)
. "$here/versions.env"
K=$K8S_VERSION; S=0.${K#1.}; MIN=$(echo "$K" | cut -d. -f2)
out=$root/.cache/k8s-v$K/bin
kube=(kube-apiserver kube-controller-manager kube-scheduler kubectl)
missing=()
for b in "${kube[@]}"; do [ -x "$out/$b" ] || missing+=("k8s.io/kubernetes/cmd/$b"); done
if [ ${#missing[@]} -eq 0 ] && [ -x "$out/etcd" ]; then
  echo "k8s v$K binaries cached in $out"; exit 0
fi
export GOMODCACHE=${GOMODCACHE:-$root/.cache/go/mod} GOCACHE=${GOCACHE:-$root/.cache/go/build} GOFLAGS=-mod=mod
mkdir -p "$out"
w=$root/.cache/k8s-v$K/wrapper; mkdir -p "$w"; cd "$w"
if [ ! -f go.mod ]; then
  go mod init local.test/k8sbin >/dev/null 2>&1
  { echo 'godebug default=go1.24'; echo 'replace ('
    for m in api apiextensions-apiserver apimachinery apiserver cli-runtime client-go cloud-provider cluster-bootstrap \
      code-generator component-base component-helpers controller-manager cri-api cri-client csi-translation-lib \
      dynamic-resource-allocation endpointslice externaljwt kms kube-aggregator kube-controller-manager kube-proxy \
      kube-scheduler kubectl kubelet metrics mount-utils pod-security-admission sample-apiserver sample-cli-plugin \
      sample-controller; do echo "	k8s.io/$m => k8s.io/$m v$S"; done; echo ')'; } >> go.mod
fi
if ! grep -q "k8s.io/kubernetes v$K" go.mod || ! grep -q "go.etcd.io/etcd/server/v3 v$ETCD_VERSION" go.mod; then
  echo "resolving k8s.io/kubernetes v$K ..."
  go get k8s.io/kubernetes/cmd/kube-apiserver@v$K k8s.io/kubernetes/cmd/kube-controller-manager@v$K \
         k8s.io/kubernetes/cmd/kube-scheduler@v$K k8s.io/kubernetes/cmd/kubectl@v$K go.etcd.io/etcd/server/v3@v$ETCD_VERSION
fi
LDF="-s -w"
for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  LDF="$LDF -X $p.gitVersion=v$K -X $p.gitMajor=1 -X $p.gitMinor=$MIN -X $p.gitTreeState=clean"; done
if [ ${#missing[@]} -gt 0 ]; then
  echo "building ${missing[*]} v$K (-pgo=off; cold 10-25 min on 2 cores) ..."
  # go build -o DIR/ with several main packages writes each binary into DIR
  time CGO_ENABLED=0 go build -p 2 -pgo=off -trimpath -ldflags "$LDF" -o "$out/" "${missing[@]}"
fi
if [ ! -x "$out/etcd" ]; then
  echo "building etcd v$ETCD_VERSION ..."
  time CGO_ENABLED=0 go build -p 2 -trimpath -ldflags "-s -w" -o "$out/etcd" go.etcd.io/etcd/server/v3
fi
"$out/kube-apiserver" --version
"$out/kubectl" version --client
"$out/etcd" --version | awk 'NR == 1'  # awk reads it all: head would close the pipe early and, under pipefail, fail the build on SIGPIPE
