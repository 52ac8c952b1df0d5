#!/usr/bin/env bash
# helm install (or upgrade) the operator chart into the local cluster and wait until the operator is ready.
# Usage: hack/operator-install.sh [namespace]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
ns=${1:-streamapp-system}
# shellcheck disable=SC1091
. "$root/.cache/run/env"
export PATH="$STACK_BIN:$PATH" KUBECONFIG
helm upgrade --install streamapp-operator "$root/charts/streamapp-operator" \
  --namespace "$ns" --create-namespace \
  --set image.repository=localhost/streamapp --set image.tag=dev --set image.pullPolicy=Never \
  --wait --timeout 5m
kubectl -n "$ns" rollout status deployment/streamapp-operator --timeout=300s
kubectl wait --for=condition=Established crd/streamapps.streamapp.io --timeout=60s
