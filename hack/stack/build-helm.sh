#!/usr/bin/env bash
# Build helm v$HELM_VERSION with `go install helm.sh/helm/v3/cmd/helm@v$HELM_VERSION` (its go.mod has no replace
# directives), stamped with the ldflags of helm's own Makefile so `helm version` prints the real version.
# Idempotent: cached in .cache/helm-v$HELM_VERSION/bin/helm and linked into the stack's bin dir.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd); root=$(cd "$here/../.." && pwd)
. "$here/versions.env"
V=$HELM_VERSION
gobin=$root/.cache/helm-v$V/bin
stack_bin=$root/.cache/k8s-v$K8S_VERSION/bin
export GOMODCACHE=${GOMODCACHE:-$root/.cache/go/mod} GOCACHE=${GOCACHE:-$root/.cache/go/build} GOFLAGS=-mod=mod
if [ ! -x "$gobin/helm" ]; then
  # helm's Makefile derives k8sVersionMajor/Minor from the k8s.io/client-go version it is built with
  gomod=$(go mod download -json "helm.sh/helm/v3@v$V" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')
  cg=$(sed -n 's|^\s*k8s.io/client-go v0\.\([0-9]*\)\..*|\1|p' "$gomod" | head -n1)
  [ -n "$cg" ] || { echo "cannot read the k8s.io/client-go version of helm v$V" >&2; exit 1; }
  ldf="-s -w -X helm.sh/helm/v3/internal/version.version=v$V -X helm.sh/helm/v3/internal/version.gitTreeState=clean"
  for p in pkg/lint/rules pkg/chartutil; do
    ldf="$ldf -X helm.sh/helm/v3/$p.k8sVersionMajor=1 -X helm.sh/helm/v3/$p.k8sVersionMinor=$cg"
  done
  echo "building helm v$V (k8s libs 1.$cg) ..."
  mkdir -p "$gobin"
  time CGO_ENABLED=0 GOBIN=$gobin go install -p 2 -trimpath -ldflags "$ldf" "helm.sh/helm/v3/cmd/helm@v$V"
fi
mkdir -p "$stack_bin"
ln -sfn "$gobin/helm" "$stack_bin/helm"
"$stack_bin/helm" version
