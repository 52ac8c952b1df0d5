#!/usr/bin/env bash
# Build the project image localhost/streamapp:dev from the repo's Dockerfile, without a daemon and without
# pulling anything:
#   1. setup.sh      podman, buildah, debootstrap from Debian's packages (skipped when present)
#   2. base.sh       local base image from debootstrap (cached tarball; import skipped when the image exists)
#   3. wheelhouse.sh third-party wheels from uv.lock (cached) + project wheels -> .cache/image-context/
#   4. podman build --isolation=chroot (RUN steps in a chroot: no OCI runtime, no user namespace needed)
#   5. smoke.sh      the built image's rootfs runs `python -c "import streamapp, ..."` via buildah run
# Idempotent: a second run with unchanged inputs reuses every cache and podman's layer cache (seconds).
# Prints the time of each step. Env: STREAMAPP_IMAGE (default localhost/streamapp:dev), STORAGE_DRIVER
# (default overlay; use the same for every podman/buildah call on the built image), IMAGE_SKIP_SMOKE=1.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

mkdir -p "$CACHE"
# one build at a time (make demo and make test may both ask for the image)
exec 9> "$CACHE/image-build.lock"
flock 9

IMAGE_TIMINGS=$(mktemp); export IMAGE_TIMINGS
trap 'rm -f "$IMAGE_TIMINGS"' EXIT
start=$(date +%s.%N)

timed setup "$IMAGE_DIR/setup.sh"
base=$("$IMAGE_DIR/base.sh")
context=$("$IMAGE_DIR/wheelhouse.sh")

revision=$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)
log "podman build $IMAGE (base $base, storage driver $STORAGE_DRIVER)"
timed podman-build podman build \
  --isolation=chroot \
  --pull=never \
  --layers \
  --file "$ROOT/Dockerfile" \
  --build-arg "BASE_IMAGE=$base" \
  --build-arg "REVISION=$revision" \
  --tag "$IMAGE" \
  "$context"

if [ "${IMAGE_SKIP_SMOKE:-0}" != 1 ]; then
  timed smoke "$IMAGE_DIR/smoke.sh" "$IMAGE"
fi

total=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
{
  echo "image build timings ($IMAGE):"
  sed 's/^/  /' "$IMAGE_TIMINGS"
  printf '  %-12s %7ss\n' total "$total"
  podman image ls --format '  {{.Repository}}:{{.Tag}} {{.ID}} {{.Size}}' "$IMAGE"
} >&2
