#!/usr/bin/env bash
# Build the replay image localhost/streamapp-replay:dev (the Dockerfile's `replay` target): the streaming image's
# venv plus the runtime's `replay` extra (pyspark) and a Java runtime (the replay reads and writes Kafka with the
# runtime's own client: no Spark Kafka connector). It is the
# image of the StreamReplay Jobs (docs/replay.md "The operator"); the streaming image stays without Java/Spark.
#   1. base.sh, replay-base.sh   the base root filesystem, and it plus openjdk-17-jre-headless (apt, outside the build)
#   2. wheelhouse.sh             the build context; then here: requirements-replay.txt (uv.lock with the `replay`
#                                and `schema-registry` extras), wheels/replay/ (the wheels the streaming image does
#                                not have, cached in .cache/wheelhouse-replay-<key>/)
#   3. podman build --target replay
# Env: STREAMAPP_REPLAY_IMAGE (default localhost/streamapp-replay:dev). Idempotent; holds the image build lock.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

REPLAY_IMAGE=${STREAMAPP_REPLAY_IMAGE:-localhost/streamapp-replay:dev}
mkdir -p "$CACHE"
exec 9> "$CACHE/image-build.lock"
flock 9

"$IMAGE_DIR/base.sh" >/dev/null
replay_base=$("$IMAGE_DIR/replay-base.sh")
context=$("$IMAGE_DIR/wheelhouse.sh")
wheelhouse=$CACHE/wheelhouse-replay-$( { cat "$ROOT/uv.lock"; echo "pip $PIP_VERSION replay schema-registry"; } | sha256sum | cut -c1-16)

fill_replay_wheelhouse() {
  local tmp=$wheelhouse.tmp args
  rm -rf "$tmp"; mkdir -p "$tmp/wheels"
  (cd "$ROOT" && "$UV" export --frozen --all-packages --no-dev --extra schema-registry --extra replay \
                  --no-emit-workspace --no-header --format requirements.txt \
                  --output-file "$tmp/requirements.txt" >/dev/null)
  args=()
  for minor in $(seq 36 -1 5); do args+=(--platform "manylinux_2_${minor}_x86_64"); done
  args+=(--platform manylinux2014_x86_64 --platform manylinux2010_x86_64 --platform manylinux1_x86_64)
  args+=(--platform linux_x86_64)
  # pyspark is published as a source distribution only (pure Python): its wheel is built here, from the sdist
  # whose hash uv.lock pins; every other requirement is downloaded as a binary wheel
  awk '/^pyspark==/ { p = 1 } p { print; if ($0 !~ /\\$/) p = 0 }' "$tmp/requirements.txt" > "$tmp/sdist.txt"
  awk '/^pyspark==/ { p = 1 } !p { print } p && $0 !~ /\\$/ { p = 0 }' "$tmp/requirements.txt" > "$tmp/binary.txt"
  PIP_FIND_LINKS='' "$UVX" --quiet --from "pip==$PIP_VERSION" pip download --quiet --disable-pip-version-check \
    --no-deps --only-binary=:all: --python-version 3.11 --implementation cp --abi cp311 "${args[@]}" \
    --require-hashes -r "$tmp/binary.txt" --dest "$tmp/wheels"
  PIP_FIND_LINKS='' "$UVX" --quiet --python 3.11 --from "pip==$PIP_VERSION" pip wheel --quiet --disable-pip-version-check \
    --no-deps --require-hashes -r "$tmp/sdist.txt" --wheel-dir "$tmp/wheels"
  rm -rf "$wheelhouse"; mv "$tmp" "$wheelhouse"
}

add_replay_context() {
  # pins with hashes; pyspark's is the hash of the wheel built above (uv.lock's is its sdist's, checked then)
  local built
  built=$(find "$wheelhouse/wheels" -name 'pyspark-*.whl' | head -n 1)
  { cat "$wheelhouse/binary.txt"
    echo "$(head -n 1 "$wheelhouse/sdist.txt" | sed 's/ *\\$//') --hash=sha256:$(sha256sum "$built" | cut -d' ' -f1)"
  } > "$context/requirements-replay.txt"
  mkdir -p "$context/wheels/replay"
  local wheel
  for wheel in "$wheelhouse"/wheels/*.whl; do
    [ -e "$context/wheels/deps/$(basename "$wheel")" ] || cp -l "$wheel" "$context/wheels/replay/" 2>/dev/null \
      || cp "$wheel" "$context/wheels/replay/"
  done
  find "$context" -exec touch -h -d @315532800 {} +
}

[ -f "$wheelhouse/requirements.txt" ] || timed replay-wheels fill_replay_wheelhouse
timed replay-context add_replay_context
revision=$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)
log "podman build $REPLAY_IMAGE (target replay, base $replay_base)"
timed replay-build podman build \
  --isolation=chroot \
  --pull=never \
  --layers \
  --target replay \
  --file "$ROOT/Dockerfile" \
  --build-arg "BASE_IMAGE=$(base_tag)" \
  --build-arg "REPLAY_BASE_IMAGE=$replay_base" \
  --build-arg "REVISION=$revision" \
  --tag "$REPLAY_IMAGE" \
  "$context"
# smoke: Java runs and a local Spark job runs a Python worker, as the node agent runs a pod
timed replay-smoke "$IMAGE_DIR/smoke-replay.sh" "$REPLAY_IMAGE"
podman image ls --format '{{.Repository}}:{{.Tag}} {{.Size}}' "$REPLAY_IMAGE" >&2
