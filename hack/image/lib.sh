# Shared settings and helpers of hack/image/*.sh (sourced, not run).
# Everything an image build downloads or makes is cached under $ROOT/.cache (git-ignored):
#   .cache/image-base-<key>/rootfs.tar     debootstrapped base root filesystem (key: hash of base.sh)
#   .cache/wheelhouse-<key>/               third-party wheels + requirements.txt (key: hash of uv.lock)
#   .cache/image-context/                  the podman build context, laid out anew on every build
# shellcheck shell=bash
IMAGE_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$IMAGE_DIR/../.." && pwd)
CACHE=$ROOT/.cache
# the project's own tools (uv through hack/bin): hack/env.sh is the one place that knows where they are
# shellcheck source=../env.sh
. "$ROOT/hack/env.sh"

# The image every consumer uses (operator chart values, node agent, e2e).
IMAGE=${STREAMAPP_IMAGE:-localhost/streamapp:dev}
BASE_REPO=localhost/streamapp-base
SUITE=bookworm
# Packages on top of debootstrap's minbase (which already has libstdc++6, needed by rocksdict's wheel).
BASE_PACKAGES=python3,python3-venv,ca-certificates
# pip used outside the build to fetch wheels (run through "$UVX", hack/env.sh, so it needs no Python of its own).
PIP_VERSION=25.1.1

# Pinned for podman, buildah and every later `buildah from/run` (containers/storage reads STORAGE_DRIVER):
# the kernel's overlayfs works for root here; a different driver would not see the images built with this one.
export STORAGE_DRIVER=${STORAGE_DRIVER:-overlay}

log() { printf '[image] %s\n' "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

# base_key: 12 hex chars naming the base image; changes when base.sh or the package set changes.
base_key() {
  { cat "$IMAGE_DIR/base.sh"; echo "$SUITE $BASE_PACKAGES"; } | sha256sum | cut -c1-12
}
base_tag() { echo "$BASE_REPO:$SUITE-$(base_key)"; }

# wheelhouse_key: 16 hex chars of sha256(uv.lock) + the pip version and the extras used to fill it.
wheelhouse_key() {
  { cat "$ROOT/uv.lock"; echo "pip $PIP_VERSION"; echo "extras schema-registry"; } | sha256sum | cut -c1-16
}

# timed NAME CMD...: runs CMD (in a subshell, with set -e), records "NAME <seconds>" in $IMAGE_TIMINGS (if set) and logs it.
timed() {
  local name=$1; shift
  local t0 t1 rc errexit=0
  case $- in *e*) errexit=1 ;; esac
  t0=$(date +%s.%N)
  # a subshell outside any `||`, so that `set -e` still stops CMD at its first failing command
  set +e
  ( set -e; "$@" )
  rc=$?
  [ "$errexit" -eq 0 ] || set -e
  t1=$(date +%s.%N)
  local secs
  secs=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }')
  log "step $name: ${secs}s (rc=$rc)"
  if [ -n "${IMAGE_TIMINGS:-}" ]; then printf '%-12s %7ss\n' "$name" "$secs" >> "$IMAGE_TIMINGS"; fi
  return "$rc"
}
