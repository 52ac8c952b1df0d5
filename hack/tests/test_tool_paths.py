"""A fresh machine has only the image's tools: every other tool a script calls is reached through the project.

The machine image brings python3, go, java, mvn, kubectl, git, make, apt-get and coreutils. Everything else is
installed by the project's own set-up into ``.cache/`` and reached through one place: ``hack/env.sh`` (sourced by
the scripts, directly or through ``hack/image/lib.sh`` / ``hack/stack/lib.sh``) puts ``hack/bin`` (uv, uvx) and
``$STACK_BIN`` (helm, etcd, the kube-* binaries) on PATH; the venv's tools run through ``uv run``. A script that
calls one of them bare without that is what broke a new user's first ``make demo`` (``uv: command not found``),
hidden on machines where someone had installed uv by hand; these tests fail on such a call, and show that the
reduced PATH of ``.ci/run`` really hides hand-installed tools while the project's own are still found.
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT_FOLDERS = ("hack", "e2e", "bench", ".ci")

#: Installed by the project into .cache and put on PATH by hack/env.sh (hack/bin and $STACK_BIN).
ENV_TOOLS = ("uv", "uvx", "helm", "etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler")
#: Never called by bare name, even where hack/env.sh is sourced: always "$UV" / "$UVX" (hack/env.sh) or hack/bin/uv.
UV_TOOLS = ("uv", "uvx")
#: Console scripts of the project's venv: only ever through `uv run` (or $(RUN) in the Makefile).
VENV_TOOLS = ("ruff", "mypy", "pytest", "lint-imports", "hadolint", "kopf", "py-spy", "streamapp")

_SEPARATOR = (
    r"(?:^|[;&|`{!]|(?<!=)\(|\$\(|\b(?:then|do|else|if|elif|while|until|exec|time|nohup|setsid|xargs|command)\b)"
)
_ASSIGNMENTS = r"(?:\s*[A-Za-z_][A-Za-z0-9_]*=(?:'[^']*'|\"[^\"]*\"|\$\{?\w+\}?|[^\s;&|()$`]*))*"


def _bare_call(tool: str) -> re.Pattern[str]:
    return re.compile(_SEPARATOR + _ASSIGNMENTS + r"\s*" + re.escape(tool) + r"(?=\s|$|;)")


def _code_lines(text: str) -> list[tuple[int, str]]:
    """Lines without comments (a '#' at the start or after whitespace) and without echo/log/die messages."""
    lines = []
    # a continued command is one line (its continuation lines are arguments, not commands)
    joined = re.sub(r"\\\n", " ", text).splitlines()
    for number, line in enumerate(joined, start=1):
        code = re.split(r"(?:^|\s)#", line, maxsplit=1)[0]
        code = re.sub(r"\b(?:echo|log|die|printf)\b.*", "", code)
        if code.strip():
            lines.append((number, code))
    return lines


def shell_scripts() -> list[Path]:
    found = []
    for folder in SCRIPT_FOLDERS:
        for path in sorted((ROOT / folder).rglob("*")):
            if not path.is_file() or ".venv" in path.parts or "__pycache__" in path.parts:
                continue
            head = path.read_bytes()[:64]
            if path.suffix == ".sh" or head.startswith(b"#!/usr/bin/env bash") or head.startswith(b"#!/bin/bash"):
                found.append(path)
    return found


def _sourced(path: Path) -> list[Path]:
    """Files ``path`` sources (``. file`` / ``source file``), resolved by name next to it or under hack/."""
    lines = re.findall(r"(?:^|[;&]|\s)(?:\.|source)\s+(.+)$", path.read_text(), re.M)
    resolved = []
    for line in lines:
        target = re.search(r"([\w.-]+\.sh)\b", line) or re.search(r"/(env)\b", line)
        if not target:
            continue
        base = target.group(1).lstrip("/")
        for candidate in (path.parent / base, ROOT / "hack" / base, ROOT / "hack" / "stack" / base):
            if candidate.is_file():
                resolved.append(candidate)
                break
    return resolved


def has_project_env(path: Path, seen: frozenset[Path] = frozenset()) -> bool:
    """Whether ``path`` sources hack/env.sh, directly or through the files it sources."""
    if path == ROOT / "hack" / "env.sh":
        return True
    if path in seen:
        return False
    return any(has_project_env(s, seen | {path}) for s in _sourced(path))


def bare_calls(text: str, tools: tuple[str, ...]) -> list[str]:
    """Bare calls of ``tools``; a venv tool on a line that runs it through uv (``uv run``, ``$RUN``) is not bare,
    while uv and uvx themselves are bare on any line (``uv run`` is a bare uv)."""
    return [
        f"line {number}: {line.strip()}"
        for number, line in _code_lines(text)
        for tool in tools
        if _bare_call(tool).search(line)
        and (tool in UV_TOOLS or ("uv run" not in line and "$RUN" not in line and "$(RUN)" not in line))
    ]


def test_the_check_finds_a_bare_call_of_a_project_tool() -> None:
    """The detector itself: the call that broke a fresh machine is found, mentions and paths are not."""
    assert bare_calls('  (cd "$ROOT" && uv export --frozen --all-packages)\n', ENV_TOOLS)
    assert bare_calls("PIP_FIND_LINKS='' uvx --quiet pip download\n", ENV_TOOLS)
    assert bare_calls("if ruff check .; then :; fi\n", VENV_TOOLS)
    assert bare_calls('(cd "$ROOT" && uv run --frozen pytest -q)\n', UV_TOOLS)  # a bare uv, though pytest is not
    assert not bare_calls('(cd "$ROOT" && "$UV" run --frozen python -c pass)\n', UV_TOOLS)
    assert not bare_calls('log "wheelhouse: reusing uv cache"\n# uv export is run below\n', ENV_TOOLS)
    assert not bare_calls('"$STACK_BIN/helm" version\n"$UV_HOME/bin/uv" "$@"\n', ENV_TOOLS)


@pytest.mark.parametrize("script", shell_scripts(), ids=lambda p: str(p.relative_to(ROOT)))
def test_scripts_reach_project_tools_through_hack_env(script: Path) -> None:
    """A script calls helm/etcd/kube-* bare only when it sources hack/env.sh; uv, uvx and venv tools never bare
    (uv through "$UV"/"$UVX" of hack/env.sh, venv tools through uv run)."""
    problems = bare_calls(script.read_text(), (*VENV_TOOLS, *(UV_TOOLS if has_project_env(script) else ENV_TOOLS)))
    assert not problems, f"{script.relative_to(ROOT)} calls a project tool it cannot find on a fresh machine:\n" + (
        "\n".join(problems)
    )


def test_makefile_reaches_uv_through_hack_bin() -> None:
    """The Makefile's recipes put hack/bin first on PATH, call uv as $(UV) and no venv tool outside $(RUN)."""
    text = (ROOT / "Makefile").read_text()
    assert "FRESH_PATH := $(shell $(CURDIR)/hack/ci-path.sh)" in text
    assert "export PATH := $(CURDIR)/hack/bin:$(FRESH_PATH)" in text
    assert "UV := $(CURDIR)/hack/bin/uv" in text
    recipes = "\n".join(line for line in text.splitlines() if line.startswith("\t"))
    assert not bare_calls(recipes, (*VENV_TOOLS, *UV_TOOLS, "helm", "etcd"))


#: A project tool started from PATH in Python: an argument list starting with the bare name, or a command line
#: string starting with uv/uvx.
_PYTHON_BARE_CALL = re.compile(
    r"""\[\s*["'](?:uv|uvx|helm|py-spy|hadolint)["']|["']uvx? (?:run|pip|venv|sync|export|build|lock|tool)\b"""
)


def test_the_python_check_finds_a_bare_call_of_a_project_tool() -> None:
    assert _PYTHON_BARE_CALL.search('subprocess.run(["uv", "pip", "install", spec])')
    assert _PYTHON_BARE_CALL.search('subprocess.run("uv run --with py-spy py-spy --version", shell=True)')
    assert not _PYTHON_BARE_CALL.search('subprocess.run([str(ROOT / "hack" / "bin" / "uv"), "venv", path])')
    assert not _PYTHON_BARE_CALL.search('"""the venv is made with ``hack/bin/uv venv``"""')


def test_python_scripts_never_run_a_project_tool_from_path() -> None:
    """bench/, e2e/ and hack/ Python code starts uv/helm/py-spy by the project's path, not by a bare name."""
    offenders = [
        f"{path.relative_to(ROOT)}: {m.group(0)}"
        for folder in ("bench", "e2e", "hack")
        for path in sorted((ROOT / folder).rglob("*.py"))
        if "tests" not in path.parts
        for m in _PYTHON_BARE_CALL.finditer(path.read_text())
    ]
    assert not offenders, offenders


def _ci_path(extra_front: str) -> str:
    env = {**os.environ, "PATH": f"{extra_front}:{os.environ['PATH']}"}
    result = subprocess.run([str(ROOT / "hack" / "ci-path.sh")], env=env, capture_output=True, text=True, check=True)
    return result.stdout.strip()


def test_ci_path_hides_tools_installed_by_hand(tmp_path: Path) -> None:
    """.ci/run's PATH has no ~/.local/bin or ~/go/bin: a uv installed there by hand is not found."""
    home = tmp_path / "home"
    hand = home / ".local" / "bin"
    hand.mkdir(parents=True)
    (hand / "uv").write_text("#!/bin/sh\necho hand-installed\n")
    (hand / "uv").chmod(0o755)
    env = {**os.environ, "HOME": str(home), "PATH": f"{hand}:{home / 'go' / 'bin'}:{os.environ['PATH']}"}
    reduced = subprocess.run(
        [str(ROOT / "hack" / "ci-path.sh")], env=env, capture_output=True, text=True, check=True
    ).stdout.strip()
    assert str(hand) not in reduced.split(":")
    found = subprocess.run(
        ["bash", "-c", "command -v uv || true"], env={**env, "PATH": reduced}, capture_output=True, text=True
    ).stdout.strip()
    assert found != str(hand / "uv")
    # ... while the project's own uv is found once hack/env.sh is sourced
    project = subprocess.run(
        ["bash", "-c", f". {ROOT / 'hack' / 'env.sh'} && command -v uv"],
        env={**env, "PATH": reduced},
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert project == str(ROOT / "hack" / "bin" / "uv")


def test_project_uv_runs_with_the_reduced_path() -> None:
    """hack/bin/uv installs (if needed) and runs the pinned uv with nothing but the image's PATH."""
    versions = (ROOT / "hack" / "stack" / "versions.env").read_text()
    pinned = re.search(r"^UV_VERSION=(\S+)$", versions, re.M)
    assert pinned
    env = {**os.environ, "PATH": _ci_path("")}
    out = subprocess.run(
        [str(ROOT / "hack" / "bin" / "uv"), "--version"], env=env, capture_output=True, text=True, check=True
    ).stdout
    assert out.split()[:2] == ["uv", pinned.group(1)]


def test_ci_runs_exactly_the_readme_test_command() -> None:
    """.ci/run runs no command a new user does not see in the README: its only command after `set` and `cd` is
    the README's `make test` (the reduced PATH is the Makefile's own, so the README's command has it too)."""
    commands = [
        line.strip()
        for line in (ROOT / ".ci" / "run").read_text().splitlines()
        if line.strip()
        and not line.lstrip().startswith("#")
        and not line.startswith(("set -euo pipefail", 'cd "$(dirname "$0")/.."'))
    ]
    assert commands == ["make test"]
    readme_commands = re.findall(r"^(make \w+)\s", (ROOT / "README.md").read_text(), re.MULTILINE)
    assert "make test" in readme_commands
