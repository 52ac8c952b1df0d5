#!/usr/bin/env bash
# Install the image tools from Debian's packages: podman and buildah (build and run images without a daemon),
# debootstrap (makes the base root filesystem). Idempotent: does nothing when all are present.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
# `make` runs the stack's and the images' set-up side by side, and both call this: one apt-get at a time (dpkg's
# own lock would make the second fail instead of wait)
mkdir -p "$CACHE"
exec 7>"$CACHE/image-setup.lock"
flock -w 900 7 || die "setup: timeout waiting for $CACHE/image-setup.lock"

missing=()
for tool in podman:podman buildah:buildah debootstrap:debootstrap; do
  command -v "${tool%%:*}" >/dev/null 2>&1 || missing+=("${tool#*:}")
done
# debootstrap verifies the Release file with Debian's archive keyring.
[ -f /usr/share/keyrings/debian-archive-keyring.gpg ] || missing+=(debian-archive-keyring)
if [ ${#missing[@]} -eq 0 ]; then
  log "setup: podman, buildah, debootstrap present"
  exit 0
fi
[ "$(id -u)" -eq 0 ] || die "setup: need root to apt-get install ${missing[*]}"
log "setup: apt-get install ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
podman --version >&2
buildah --version >&2
