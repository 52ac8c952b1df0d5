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

from e2e import quickstart_page
from e2e.quickstart_page import Block

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "quickstart.md"
EXAMPLE = ROOT / "examples" / "quickstart"


def _blocks() -> list[Block]:
    """Every fenced code block of the page, in order."""
    return quickstart_page.blocks(PAGE.read_text())


def _marked(mark: str) -> dict[str, str]:
    return {arg: body for kind, arg, _, body in _blocks() if kind == mark and arg is not None}


def _commands() -> list[list[str]]:
    """The ``streamapp`` command lines of the page's bash blocks, split as the shell would, without comments and
    output redirections."""
    commands = []
    for line in quickstart_page.bash_lines(PAGE.read_text()):
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
    return quickstart_page.bash_lines(PAGE.read_text())


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


def test_every_line_the_e2e_test_does_not_run_is_on_the_page_once() -> None:
    lines = _page_lines()

    for start in quickstart_page.NOT_RUN:
        assert len([line for line in lines if quickstart_page.not_run(line) and line.startswith(start)]) == 1, start
    assert [quickstart_page.not_run(line) is None for line in lines].count(False) == len(quickstart_page.NOT_RUN)


def test_the_e2e_test_runs_the_page_lines_with_only_the_names_made_unique(tmp_path: Path) -> None:
    walk = quickstart_page.Walk.of_page("qs1a2b3c", tmp_path, {})
    run = [line for line in _page_lines() if quickstart_page.not_run(line) is None]

    assert len(walk.lines) == len(run) >= 12
    for page_line, line in zip(run, walk.lines, strict=True):
        assert "clickstream" not in line and not re.search(r"\bclicks\b", line.replace("qs1a2b3c-clicks", ""))
        assert line.replace("qs1a2b3c-clicks", "clicks").replace("qs1a2b3c", "clickstream") == page_line
    assert "kubectl create namespace qs1a2b3c-clicks" in walk.lines
    assert walk.take("streamapp topics tail qs1a2b3c-clicks-per-page-minute --topology qs1a2b3c.topology:build_v2")
    assert not [line for line in walk.lines if " -w" in line.split("#")[0]], "a watch never ends: use kubectl wait"


def test_the_examples_files_renamed_name_only_the_unique_package_and_topics() -> None:
    topology = quickstart_page.rename((EXAMPLE / "src" / "clickstream" / "topology.py").read_text(), "qs1a2b3c")
    streams = quickstart_page.rename((EXAMPLE / "streams.yaml").read_text(), "qs1a2b3c")

    assert "from qs1a2b3c import logic" in topology
    assert '"qs1a2b3c-clicks"' in topology and '"qs1a2b3c-clicks-per-page-minute"' in topology
    assert "application.id: qs1a2b3c-local" in streams
