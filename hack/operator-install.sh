#!/usr/bin/env bash
# helm install (or upgrade) the operator chart into the local cluster and wait until the operator is ready.
# Usage: hack/operator-install.sh [namespace]
# Helm never upgrades CRDs and does not restart a Deployment whose pod template is unchanged, so this script
# applies crds/ itself and stamps the operator pod with the image's id: a rebuilt localhost/streamapp:dev (same
# tag) rolls the operator, an unchanged one is a no-op.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
ns=${1:-streamapp-system}
# shellcheck disable=SC1091
. "$root/.cache/run/env"
# shellcheck disable=SC1091
. "$root/hack/image/lib.sh"
export PATH="$STACK_BIN:$PATH" KUBECONFIG
image_id=$(podman image inspect --format '{{.Id}}' "$IMAGE" 2>/dev/null | cut -c1-12 || true)
kubectl apply --server-side --force-conflicts --field-manager=operator-install -f "$root/crds/" >/dev/null
helm upgrade --install streamapp-operator "$root/charts/streamapp-operator" \
  --namespace "$ns" --create-namespace \
  --set image.repository=localhost/streamapp --set image.tag=dev --set image.pullPolicy=Never \
  --set-string "podAnnotations.streamapp\.io/image-id=${image_id:-unknown}" \
  --wait --timeout 5m
kubectl -n "$ns" rollout status deployment/streamapp-operator --timeout=300s
kubectl wait --for=condition=Established crd/streamapps.streamapp.io --timeout=60s
