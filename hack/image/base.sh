#!/usr/bin/env bash
# Make the local base image $BASE_REPO:bookworm-<key> (and alias $BASE_REPO:bookworm): Debian bookworm
# `debootstrap --variant=minbase` + python3 (3.11), python3-venv, ca-certificates, upgraded from bookworm-updates
# and bookworm-security (debootstrap installs the release as first published), slimmed (no apt lists, no .debs,
# no man pages, docs or translations), imported with `podman import`. Nothing can be pulled here.
# The security updates are those published when the tarball was made: remove .cache/image-base-*/ to take newer
# ones (the next build debootstraps again).
# Idempotent: the root filesystem tarball is cached in .cache/image-base-<key>/rootfs.tar (debootstrap runs only
# when it is missing) and the import is skipped when the image exists. The key hashes this file and the
# package set, so editing either makes a new base. Prints the image reference on stdout.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

tag=$(base_tag)
dir=$CACHE/image-base-$(base_key)
tarball=$dir/rootfs.tar

# The Debian mirror apt is configured with (deb822 or one-line sources), else deb.debian.org.
debian_mirror() {
  local uri
  uri=$(awk '/^URIs:/ { print $2; exit }' /etc/apt/sources.list.d/debian.sources 2>/dev/null || true)
  [ -n "$uri" ] || uri=$(awk '$1 == "deb" && $3 ~ /^bookworm/ { print $2; exit }' \
                         /etc/apt/sources.list 2>/dev/null || true)
  echo "${uri:-http://deb.debian.org/debian}"
}

# The Debian security mirror apt is configured with, else deb.debian.org's.
debian_security_mirror() {
  local uri
  uri=$(awk '/^URIs:/ { uri = $2 } /^Suites:.*-security/ { print uri; exit }' \
        /etc/apt/sources.list.d/debian.sources 2>/dev/null || true)
  [ -n "$uri" ] || uri=$(awk '$1 == "deb" && $3 ~ /-security$/ { print $2; exit }' /etc/apt/sources.list 2>/dev/null || true)
  echo "${uri:-http://deb.debian.org/debian-security}"
}

# The image's apt sources: the release, its updates and its security updates (deb822, as Debian's own images),
# so that the upgrade below and `apt-get` in derived images see the fixes.
write_sources() {
  local r=$1 mirror=$2 security=$3
  rm -f "$r/etc/apt/sources.list"
  cat > "$r/etc/apt/sources.list.d/debian.sources" <<SOURCES
Types: deb
URIs: $mirror
Suites: $SUITE $SUITE-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: $security
Suites: $SUITE-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SOURCES
}

# apt-get upgrade inside the new root filesystem; the upgraded packages go to $dir/upgraded.txt.
upgrade_rootfs() {
  local r=$1
  mount -t proc proc "$r/proc"
  local rc=0
  {
    chroot "$r" apt-get update -qq \
      && DEBIAN_FRONTEND=noninteractive chroot "$r" apt-get -y -qq -o Dpkg::Options::=--force-confold \
           --no-install-recommends upgrade
  } > "$dir/upgrade.log" 2>&1 || rc=$?
  umount "$r/proc"
  [ "$rc" -eq 0 ] || { tail -n 20 "$dir/upgrade.log" >&2; return "$rc"; }
  awk '$3 == "upgrade" && $5 != $6 { print $4, $5, "->", $6 }' "$r/var/log/dpkg.log" > "$dir/upgraded.txt"
}

# Unmount anything a failed debootstrap left mounted under $1 (proc, sys), then remove it.
remove_rootfs() {
  local target=$1 m
  [ -e "$target" ] || return 0
  for m in $(awk -v t="$target" 'index($2, t) == 1 { print $2 }' /proc/mounts | sort -r); do
    umount -l "$m" || true
  done
  rm -rf --one-file-system "$target"
}

slim_rootfs() {
  local r=$1
  rm -rf "$r"/var/cache/apt/archives/*.deb "$r"/var/cache/apt/*.bin "$r"/var/lib/apt/lists/* \
         "$r"/var/log/* "$r"/usr/share/man/* "$r"/usr/share/info/* "$r"/usr/share/locale/* \
         "$r"/usr/share/lintian "$r"/usr/share/linda
  # keep the licences (copyright files), drop the rest of /usr/share/doc
  find "$r/usr/share/doc" -mindepth 1 ! -type d ! -name copyright -delete
  find "$r/usr/share/doc" -mindepth 1 -type d -empty -delete
  # host-specific files debootstrap copied in; podman/buildah provide them at run time
  : > "$r/etc/resolv.conf"
  echo localhost > "$r/etc/hostname"
  # as Debian's official images do: apt in a derived image leaves no docs or .debs behind
  cat > "$r/etc/dpkg/dpkg.cfg.d/streamapp-slim" <<'CFG'
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/man/*
path-exclude /usr/share/info/*
path-exclude /usr/share/locale/*
CFG
  cat > "$r/etc/apt/apt.conf.d/streamapp-clean" <<'CFG'
DPkg::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/*.bin || true"; };
APT::Install-Recommends "false";
CFG
}

make_tarball() {
  local rootfs=$dir/rootfs.tmp mirror
  mirror=$(debian_mirror)
  mkdir -p "$dir"
  remove_rootfs "$rootfs"
  local attempt
  for attempt in 1 2 3; do
    log "base: debootstrap --variant=minbase --include=$BASE_PACKAGES $SUITE from $mirror (attempt $attempt)"
    if debootstrap --variant=minbase --include="$BASE_PACKAGES" --components=main \
         "$SUITE" "$rootfs" "$mirror" > "$dir/debootstrap.log" 2>&1; then
      break
    fi
    tail -n 20 "$dir/debootstrap.log" >&2
    remove_rootfs "$rootfs"
    [ "$attempt" -lt 3 ] || die "debootstrap failed 3 times (log: $dir/debootstrap.log)"
    sleep 5
  done
  write_sources "$rootfs" "$mirror" "$(debian_security_mirror)"
  upgrade_rootfs "$rootfs" || die "base: apt-get upgrade from $SUITE-updates and $SUITE-security failed (log: $dir/upgrade.log)"
  chroot "$rootfs" python3 -c 'import ssl, sqlite3, ensurepip, venv, sys; assert sys.version_info[:2] == (3, 11)' \
    || die "base: python3 in the new root filesystem is unusable"
  chroot "$rootfs" dpkg-query -W -f '${Package} ${Version}\n' > "$dir/packages.txt"
  slim_rootfs "$rootfs"
  # /dev is provided by the container runtime: keep the directory, not debootstrap's device nodes
  tar --numeric-owner -C "$rootfs" --exclude='./dev/*' -cf "$tarball.tmp" .
  mv "$tarball.tmp" "$tarball"
  remove_rootfs "$rootfs"
  log "base: cached $tarball ($(du -h "$tarball" | cut -f1), $(wc -l < "$dir/packages.txt") packages," \
      "$(wc -l < "$dir/upgraded.txt") upgraded from $SUITE-updates/$SUITE-security)"
}

if podman image exists "$tag"; then
  log "base: $tag present"
else
  if [ -f "$tarball" ]; then
    log "base: reusing $tarball"
  else
    timed debootstrap make_tarball
  fi
  log "base: podman import -> $tag"
  timed base-import podman import --quiet \
    --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change 'ENV LANG=C.UTF-8' \
    --change 'CMD ["/bin/bash"]' \
    --message "debootstrap --variant=minbase --include=$BASE_PACKAGES $SUITE" \
    "$tarball" "$tag" >/dev/null
fi
podman tag "$tag" "$BASE_REPO:$SUITE"

# Drop bases of older keys: their tarballs, and their tags where no image still builds on them.
for old in "$CACHE"/image-base-*; do
  [ "$old" = "$dir" ] || [ ! -d "$old" ] || { log "base: removing stale $old"; rm -rf "$old"; }
done
for old in $(podman images --format '{{.Repository}}:{{.Tag}}' "$BASE_REPO" | grep -v -x -e "$tag" -e "$BASE_REPO:$SUITE"); do
  podman rmi "$old" >/dev/null 2>&1 && log "base: removed stale image $old" || true
done
echo "$tag"
