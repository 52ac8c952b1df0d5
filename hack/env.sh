# shellcheck shell=bash
# The one place that knows where the project's own tools are. Sourced (never run) by every script under hack/,
# e2e/ and bench/ that calls one of them, and exported to make's recipes by the Makefile (through hack/bin).
#
# Tools come from two places only:
#   - the machine image: python3, go, java, mvn, kubectl, git, make, apt-get, coreutils (on a fresh machine's PATH);
#   - the project's own set-up, cached under $ROOT/.cache (git-ignored) keyed by version, and reached through
#     hack/bin/ (wrappers that install on first use) or $STACK_BIN (built by hack/stack/build-*.sh).
# Nothing relies on a tool someone installed by hand (~/.local/bin, ~/go/bin): .ci/run runs with a PATH that
# has neither (hack/ci-path.sh), and hack/tests/test_tool_paths.py fails on a bare call of a project tool.
STREAMAPP_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=stack/versions.env
. "$STREAMAPP_ROOT/hack/stack/versions.env"
UV_HOME=$STREAMAPP_ROOT/.cache/uv-$UV_VERSION
# uv and uvx as every script calls them ("$UV" ..., "$UVX" ...): the wrappers install the pinned uv on first use.
UV=$STREAMAPP_ROOT/hack/bin/uv
UVX=$STREAMAPP_ROOT/hack/bin/uvx
export UV UVX  # `streamapp image build` builds a project folder's wheel with $UV
STACK_BIN=$STREAMAPP_ROOT/.cache/k8s-v$K8S_VERSION/bin
# uv's download cache next to the venv (same file system: hard links, no copies) and project-local, so that a
# fresh clone really starts from nothing; a user's own UV_CACHE_DIR wins.
export UV_CACHE_DIR=${UV_CACHE_DIR:-$STREAMAPP_ROOT/.cache/uv-cache}
case ":$PATH:" in *":$STREAMAPP_ROOT/hack/bin:"*) ;; *) PATH=$STREAMAPP_ROOT/hack/bin:$PATH ;; esac
case ":$PATH:" in *":$STACK_BIN:"*) ;; *) PATH=$PATH:$STACK_BIN ;; esac
export PATH STACK_BIN UV UVX

# uv_ensure: install uv $UV_VERSION into $UV_HOME with the image's python3 and pip (no network other than PyPI,
# no ~/.local). Idempotent and safe to run concurrently (flock); ~5 s cold.
uv_ensure() {
  [ -x "$UV_HOME/bin/uv" ] && return 0
  mkdir -p "$STREAMAPP_ROOT/.cache"
  (
    flock -w 600 8 || { echo "hack/env.sh: timeout waiting for $UV_HOME.lock" >&2; exit 1; }
    [ -x "$UV_HOME/bin/uv" ] && exit 0
    echo "[env] installing uv $UV_VERSION into $UV_HOME" >&2
    rm -rf "$UV_HOME.tmp"
    PIP_USER=0 PYTHONNOUSERSITE=1 python3 -m pip install --quiet --disable-pip-version-check --root-user-action=ignore --no-deps \
      --target "$UV_HOME.tmp" "uv==$UV_VERSION"
    [ -x "$UV_HOME.tmp/bin/uv" ] || { echo "hack/env.sh: no bin/uv after pip install" >&2; exit 1; }
    mv "$UV_HOME.tmp" "$UV_HOME"
  ) 8>"$UV_HOME.lock"
}
