#!/usr/bin/env bash
# Print the PATH a fresh machine of this project's kind has: the directories of the image's own tools
# (python3, go, java, mvn, kubectl, git, make, gcc) plus the system directories, and nothing a person or an
# earlier session may have installed by hand (~/.local/bin, ~/go/bin, ~/.cargo/bin, a uv of their own).
# Used by .ci/run and by hack/tests/test_tool_paths.py.
set -euo pipefail
dirs=()
for tool in python3 go java mvn kubectl git make gcc; do
  p=$(command -v "$tool" 2>/dev/null) || { echo "hack/ci-path.sh: $tool is not on PATH (part of the machine image)" >&2; exit 1; }
  dirs+=("$(dirname "$p")")
done
dirs+=(/usr/local/sbin /usr/local/bin /usr/sbin /usr/bin /sbin /bin)
out=
for d in "${dirs[@]}"; do
  case $d in "$HOME"/.local/* | "$HOME"/go/* | "$HOME"/.cargo/*) continue ;; esac
  case ":$out:" in *":$d:"*) ;; *) out=${out:+$out:}$d ;; esac
done
echo "$out"
