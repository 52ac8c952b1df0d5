#!/usr/bin/env bash
# helm install (or upgrade) the operator chart into the local cluster and wait until the operator is ready.
# Usage: hack/operator-install.sh [namespace]
# Helm never upgrades CRDs and does not restart a Deployment whose pod template is unchanged, so this script
# applies crds/ itself and stamps the operator pod with the id of the image it deploys ($IMAGE, default
# localhost/streamapp:dev): a rebuilt image (same tag) rolls the operator, an unchanged one is a no-op.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
ns=${1:-streamapp-system}
# shellcheck disable=SC1091
. "$root/.cache/run/env"
# shellcheck disable=SC1091
. "$root/hack/image/lib.sh"
export PATH="$STACK_BIN:$PATH" KUBECONFIG
# The image helm deploys is the one whose id stamps the pod: $IMAGE split into repository and tag (a colon
# in the last path segment is the tag; one before it is a registry port).
case "${IMAGE##*/}" in
  *:*) repository=${IMAGE%:*} tag=${IMAGE##*:} ;;
  *) repository=$IMAGE tag=latest ;;
esac
image_id=$(podman image inspect --format '{{.Id}}' "$repository:$tag" 2>/dev/null | cut -c1-12 || true)
kubectl apply --server-side --force-conflicts --field-manager=operator-install -f "$root/crds/" >/dev/null
# Before anything reads or writes StreamApps (the operator starts watching them at once).
kubectl wait --for=condition=Established crd/streamapps.streamapp.io crd/streamreplays.streamapp.io --timeout=60s
helm upgrade --install streamapp-operator "$root/charts/streamapp-operator" \
  --namespace "$ns" --create-namespace \
  --set "image.repository=$repository" --set "image.tag=$tag" --set image.pullPolicy=Never \
  --set "replayImage.tag=$tag" \
  --set-string "podAnnotations.streamapp\.io/image-id=${image_id:-unknown}" \
  --wait --timeout 5m
kubectl -n "$ns" rollout status deployment/streamapp-operator --timeout=300s
