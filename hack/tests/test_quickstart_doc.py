"""docs/quickstart.md tells the truth about examples/quickstart, as far as it can be checked without Kafka or a
cluster: every file the page shows is the example's file, the Dockerfile it shows is the one ``streamapp image
build`` writes for the example's wheel, the example's own driver tests pass, ``streamapp manifest`` prints the
manifests the page shows, and every ``streamapp`` command on the page exists with the options it uses.

The page marks a code block with an HTML comment on the line before it: ``<!-- file: PATH -->`` (the block is that
file of the repository) or ``<!-- dockerfile of: WHEEL -->``. What needs the running stack (``streamapp run``,
``image build``, ``kubectl apply``, the replay) is walked by ``e2e/test_quickstart.py``.
"""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
import tomllib
from pathlib import Path

import click
import pytest
from click.testing import CliRunner
from streamapp.app_image.plan import DEFAULT_BASE, Wheel, dockerfile
from streamapp.cli import main

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "quickstart.md"
EXAMPLE = ROOT / "examples" / "quickstart"
_BLOCK = re.compile(
    r"^(?:<!-- (?P<mark>[a-z ]+): (?P<arg>\S+) -->\n)?```(?P<lang>\w*)\n(?P<body>.*?)^```$", re.M | re.S
)


def _blocks() -> list[tuple[str | None, str | None, str, str]]:
    """``(mark, argument, language, text)`` of every fenced code block of the page, in order."""
    return [(m["mark"], m["arg"], m["lang"], m["body"]) for m in _BLOCK.finditer(PAGE.read_text())]


def _marked(mark: str) -> dict[str, str]:
    return {arg: body for kind, arg, _, body in _blocks() if kind == mark and arg is not None}


def _commands() -> list[list[str]]:
    """The ``streamapp`` command lines of the page's bash blocks, split as the shell would, without comments and
    output redirections."""
    commands = []
    for _, _, lang, body in _blocks():
        if lang != "bash":
            continue
        for line in body.splitlines():
            words = shlex.split(line, comments=True)
            if words[:1] == ["streamapp"]:
                commands.append(words[: words.index(">")] if ">" in words else words)
    return commands


def test_every_file_the_page_shows_is_the_examples_file() -> None:
    shown = _marked("file")

    assert set(shown) >= {
        "examples/quickstart/pyproject.toml",
        "examples/quickstart/src/clickstream/logic.py",
        "examples/quickstart/src/clickstream/topology.py",
        "examples/quickstart/tests/test_topology.py",
        "examples/quickstart/k8s/streamapp.yaml",
        "examples/quickstart/k8s/replay-v2.yaml",
    }
    for path, text in shown.items():
        assert text == (ROOT / path).read_text(), f"docs/quickstart.md shows {path} other than it is"


def test_the_dockerfile_shown_is_what_image_build_writes_for_the_examples_wheel() -> None:
    project = tomllib.loads((EXAMPLE / "pyproject.toml").read_text())["project"]
    name = f"{project['name']}-{project['version']}-py3-none-any.whl"
    [(wheel_name, text)] = _marked("dockerfile of").items()

    assert wheel_name == name
    assert text == dockerfile(DEFAULT_BASE, Wheel(Path(name), project["name"], project["version"], ()))


def test_the_examples_driver_tests_pass() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-c", "pyproject.toml", "tests"],
        cwd=EXAMPLE,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )

    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "2 passed" in done.stdout


@pytest.mark.parametrize("manifest", ["k8s/streamapp.yaml", "k8s/replay-v2.yaml"])
def test_streamapp_manifest_prints_the_manifest_the_page_shows(manifest: str, monkeypatch: pytest.MonkeyPatch) -> None:
    [command] = [c for c in _page_lines() if c.endswith(f"> {manifest}")]
    monkeypatch.chdir(EXAMPLE)
    monkeypatch.syspath_prepend(str(EXAMPLE / "src"))  # what `pip install -e .` does for the reader

    result = CliRunner().invoke(main, shlex.split(command.split(">")[0])[1:], catch_exceptions=False)

    assert result.exit_code == 0, result.output
    assert result.output == (EXAMPLE / manifest).read_text()


def _page_lines() -> list[str]:
    return [line for _, _, lang, body in _blocks() if lang == "bash" for line in body.splitlines()]


def test_every_streamapp_command_on_the_page_exists_with_its_options() -> None:
    commands = _commands()
    named = {" ".join(_command_path(words)[0]) for words in commands}

    assert named >= {"topics create", "topics tail", "run", "image build", "manifest"}
    for words in commands:
        path, command, rest = _command_path(words)
        options = {name for param in command.params for name in getattr(param, "opts", [])}
        used = {word.split("=")[0] for word in rest if word.startswith("--")}
        assert used <= options, f"streamapp {' '.join(path)} has no option {sorted(used - options)}"


def _command_path(words: list[str]) -> tuple[list[str], click.Command, list[str]]:
    """The subcommand names of ``streamapp ...`` words, the click command they name and the words after them."""
    command: click.Command = main
    path: list[str] = []
    rest = words[1:]
    while isinstance(command, click.Group):
        name, rest = rest[0], rest[1:]
        found = command.get_command(click.Context(command), name)
        assert found is not None, f"no command streamapp {' '.join([*path, name])}"
        command, path = found, [*path, name]
    return path, command, rest
