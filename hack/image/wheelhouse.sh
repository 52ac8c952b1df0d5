#!/usr/bin/env bash
# Lay out the podman build context in .cache/image-context/ (see the Dockerfile's header):
#   requirements.txt, wheels/deps/   third-party pins with hashes from uv.lock and their wheels for CPython 3.11
#                                    on glibc x86_64 (the base image: bookworm, glibc 2.36), cached in
#                                    .cache/wheelhouse-<sha256(uv.lock)>/ and downloaded only when missing;
#   wheels/project/                  the workspace members, built on every run (seconds; hatchling wheels are
#                                    reproducible, so unchanged sources give byte-identical wheels);
#   bin/, .dockerignore              copied from hack/image/bin and the repo root.
# pip inside the build cannot reach the package index, hence this step outside it.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

wheelhouse=$CACHE/wheelhouse-$(wheelhouse_key)
context=$CACHE/image-context
members=(streamapp-runtime streamapp-operator streamapp-example-flights)

# Every manylinux tag glibc 2.36 accepts (pip does not expand manylinux_2_N by itself), plus the legacy names.
platform_args() {
  local minor
  for minor in $(seq 36 -1 5); do printf -- '--platform\nmanylinux_2_%s_x86_64\n' "$minor"; done
  printf -- '--platform\n%s\n' manylinux2014_x86_64 manylinux2010_x86_64 manylinux1_x86_64 linux_x86_64
}

fill_wheelhouse() {
  local tmp=$wheelhouse.tmp
  rm -rf "$tmp"; mkdir -p "$tmp/wheels"
  # the closure of all workspace members' runtime dependencies (no dev group) plus the runtime's schema-registry
  # extra (Avro/Protobuf serdes), exactly as pinned in uv.lock
  (cd "$ROOT" && "$UV" export --frozen --all-packages --no-dev --extra schema-registry --no-emit-workspace --no-header \
                  --format requirements.txt --output-file "$tmp/requirements.txt" >/dev/null)
  local args
  mapfile -t args < <(platform_args)
  # binary-only for the target interpreter; the hashes from uv.lock are checked (pip's hash-checking mode)
  PIP_FIND_LINKS='' "$UVX" --quiet --from "pip==$PIP_VERSION" pip download --quiet --disable-pip-version-check \
    --no-deps --only-binary=:all: --python-version 3.11 --implementation cp --abi cp311 "${args[@]}" \
    --require-hashes -r "$tmp/requirements.txt" --dest "$tmp/wheels"
  rm -rf "$wheelhouse"; mv "$tmp" "$wheelhouse"
  log "wheelhouse: $(find "$wheelhouse/wheels" -name '*.whl' | wc -l) wheels, $(du -sh "$wheelhouse/wheels" | cut -f1) in $wheelhouse"
}

build_project_wheels() {
  local out=$1 m
  for m in "${members[@]}"; do
    (cd "$ROOT" && "$UV" build --quiet --wheel --no-create-gitignore --package "$m" --out-dir "$out")
  done
  local n
  n=$(find "$out" -name '*.whl' | wc -l)
  [ "$n" -eq "${#members[@]}" ] || die "wheelhouse: expected ${#members[@]} project wheels in $out, found $n"
}

layout_context() {
  rm -rf "$context"; mkdir -p "$context/wheels/deps" "$context/wheels/project" "$context/bin"
  cp "$wheelhouse/requirements.txt" "$context/requirements.txt"
  # hard links when possible: same file system, no copy
  cp -l "$wheelhouse"/wheels/*.whl "$context/wheels/deps/" 2>/dev/null \
    || cp "$wheelhouse"/wheels/*.whl "$context/wheels/deps/"
  build_project_wheels "$context/wheels/project"
  cp "$IMAGE_DIR"/bin/* "$context/bin/"
  cp "$ROOT/.dockerignore" "$context/.dockerignore"
  # fixed timestamps: the context's content alone decides podman's layer cache
  find "$context" -exec touch -h -d @315532800 {} +
}

if [ -f "$wheelhouse/requirements.txt" ] && [ -d "$wheelhouse/wheels" ]; then
  log "wheelhouse: reusing $wheelhouse"
else
  timed wheelhouse fill_wheelhouse
fi
timed context layout_context
echo "$context"
