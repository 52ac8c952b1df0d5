#!/usr/bin/env bash
# Make the replay image's base $REPLAY_BASE_REPO:bookworm-<key> (and alias :bookworm): the project's base root
# filesystem (base.sh's cached tarball) plus a Java runtime for Spark (REPLAY_PACKAGES, from Debian bookworm),
# installed with apt in a chroot here, outside `podman build` (which cannot reach the network), slimmed like the
# base and imported with `podman import`. The streaming image stays without Java.
# Idempotent: the tarball is cached in .cache/image-replaybase-<key>/rootfs.tar (key: the base's key, this file
# and the package list); the import is skipped when the image exists. Prints the image reference on stdout.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

REPLAY_BASE_REPO=localhost/streamapp-replay-base
REPLAY_PACKAGES="openjdk-17-jre-headless"

key=$({ base_key; cat "$IMAGE_DIR/replay-base.sh"; echo "$REPLAY_PACKAGES"; } | sha256sum | cut -c1-12)
tag=$REPLAY_BASE_REPO:$SUITE-$key
dir=$CACHE/image-replaybase-$key
tarball=$dir/rootfs.tar

make_tarball() {
  local base_tar rootfs=$dir/rootfs.tmp rc=0
  base_tar=$CACHE/image-base-$(base_key)/rootfs.tar
  [ -f "$base_tar" ] || "$IMAGE_DIR/base.sh" >/dev/null
  [ -f "$base_tar" ] || die "replay base: $base_tar missing (hack/image/base.sh makes it)"
  mkdir -p "$dir"; rm -rf --one-file-system "$rootfs"; mkdir -p "$rootfs"
  tar --numeric-owner -C "$rootfs" -xf "$base_tar"
  cp /etc/resolv.conf "$rootfs/etc/resolv.conf"
  # the device nodes apt and dpkg's scripts need (the base keeps /dev empty: the container runtime fills it)
  mknod -m 666 "$rootfs/dev/null" c 1 3; mknod -m 666 "$rootfs/dev/zero" c 1 5
  mknod -m 666 "$rootfs/dev/random" c 1 8; mknod -m 666 "$rootfs/dev/urandom" c 1 9
  # apt verifies the archive's signatures with gpgv, which the slimmed base lacks: its .deb, fetched by the host's apt
  (cd "$dir" && apt-get download -qq gpgv) > "$dir/apt.log" 2>&1 || die "replay base: apt-get download gpgv failed"
  cp "$dir"/gpgv_*.deb "$rootfs/tmp/gpgv.deb"
  # the JRE's postinst links its man page there (the slimmed base excludes man pages, not their directory)
  mkdir -p "$rootfs/usr/share/man/man1"
  mount -t proc proc "$rootfs/proc"
  {
    chroot "$rootfs" dpkg -i /tmp/gpgv.deb \
      && chroot "$rootfs" apt-get update -qq \
      && DEBIAN_FRONTEND=noninteractive chroot "$rootfs" apt-get install -y -qq --no-install-recommends \
           $REPLAY_PACKAGES
  } >> "$dir/apt.log" 2>&1 || rc=$?
  if [ "$rc" -eq 0 ]; then chroot "$rootfs" java -version > "$dir/java.txt" 2>&1 || rc=$?; fi
  umount "$rootfs/proc"
  [ "$rc" -eq 0 ] || { tail -n 20 "$dir/apt.log" >&2; die "replay base: apt-get install $REPLAY_PACKAGES failed"; }
  rm -f "$rootfs"/dev/* "$rootfs/tmp/gpgv.deb" "$dir"/gpgv_*.deb
  rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/cache/apt/*.bin "$rootfs"/var/lib/apt/lists/* \
         "$rootfs"/var/log/*
  : > "$rootfs/etc/resolv.conf"
  tar --numeric-owner -C "$rootfs" --exclude='./dev/*' -cf "$tarball.tmp" .
  mv "$tarball.tmp" "$tarball"
  rm -rf --one-file-system "$rootfs"
  log "replay base: cached $tarball ($(du -h "$tarball" | cut -f1); $(head -n 1 "$dir/java.txt"))"
}

if podman image exists "$tag"; then
  log "replay base: $tag present"
else
  [ -f "$tarball" ] || timed replay-base make_tarball
  timed replay-import podman import --quiet \
    --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change 'ENV LANG=C.UTF-8' \
    --change 'CMD ["/bin/bash"]' \
    --message "streamapp base + $REPLAY_PACKAGES" \
    "$tarball" "$tag" >/dev/null
fi
podman tag "$tag" "$REPLAY_BASE_REPO:$SUITE"
# Drop replay bases of older keys (tarballs; images no build uses any more).
for old in "$CACHE"/image-replaybase-*; do
  [ "$old" = "$dir" ] || [ ! -d "$old" ] || rm -rf "$old"
done
for old in $(podman images --format '{{.Repository}}:{{.Tag}}' "$REPLAY_BASE_REPO" | grep -v -x -e "$tag" -e "$REPLAY_BASE_REPO:$SUITE"); do
  podman rmi "$old" >/dev/null 2>&1 || true
done
echo "$tag"
