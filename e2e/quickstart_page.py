"""The commands of docs/quickstart.md as ``e2e/test_quickstart.py`` runs them: every line of the page's ``bash``
blocks, as written, with only the app's names made unique, and the few lines the test does not run, with why.

Substitutions (``rename``), on the commands and on the example's files the test copies; nothing else changes:

- ``clickstream`` (the package, its module, the StreamApp and StreamReplay names, their ``application.id``, the
  image repository) becomes the test's unique name ``qs<hex>``;
- the word ``clicks`` (the namespace, the input topic ``clicks`` and the output topics ``clicks-per-...``) becomes
  ``qs<hex>-clicks``.

A page line that is neither run by the test nor in ``NOT_RUN`` fails the e2e test (``Walk.finished``), and a
``NOT_RUN`` entry that matches no line fails ``hack/tests/test_quickstart_doc.py``: the list follows the page.
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "quickstart.md"
_BLOCK = re.compile(
    r"^(?:<!-- (?P<mark>[a-z ]+): (?P<arg>\S+) -->\n)?```(?P<lang>\w*)\n(?P<body>.*?)^```$", re.M | re.S
)

# The start of each page line the test does not run, and why.
NOT_RUN = {
    "python3 -m venv": "step 1: the test runs in the project's venv, where the runtime is installed",
    "pip install /path/to/streamapp/runtime": "step 1: the runtime is the project's own, installed already",
    "pip install -e . pytest": "step 1: PYTHONPATH=src stands for the editable install of the test's package",
    "pytest": "step 3: the example's driver tests run in hack/tests/test_quickstart_doc.py",
    "python produce.py": "step 4: the test produces clicks of its own, with timestamps it counts exactly",
    "streamapp run": "step 4: a local app would be a second writer of the output topic the test counts exactly",
}


class Block(NamedTuple):
    """A fenced code block: the mark on the line before it (``file``, ``dockerfile of``) and its argument, if
    any; its language and text."""

    mark: str | None
    arg: str | None
    lang: str
    body: str


def blocks(page: str) -> list[Block]:
    """Every fenced code block of a Markdown page, in order."""
    return [Block(m["mark"], m["arg"], m["lang"], m["body"]) for m in _BLOCK.finditer(page)]


def bash_lines(page: str) -> list[str]:
    """The non-empty lines of the page's ``bash`` blocks, in order, comments included (bash ignores them)."""
    return [line for block in blocks(page) if block.lang == "bash" for line in block.body.splitlines() if line.strip()]


def rename(text: str, unique: str) -> str:
    """``text`` with the quick start's names made unique (the module docstring's list); ``unique`` is ``qs<hex>``."""
    return re.sub(r"\bclicks\b", f"{unique}-clicks", text.replace("clickstream", unique))


def not_run(line: str) -> str | None:
    """Why the test does not run page line ``line``, or None when it runs it."""
    command = line.split("#")[0].strip()
    return next((why for start, why in NOT_RUN.items() if command.startswith(start)), None)


@dataclass
class Walk:
    """The page's lines to run, renamed, taken by the test in the order the stack allows (a tail after the counts
    it prints), each run as written with ``bash -c`` in the package folder ``cwd`` with ``env``."""

    lines: list[str]
    cwd: Path
    env: Mapping[str, str]
    started: list[subprocess.Popen[str]] = field(default_factory=list)

    @classmethod
    def of_page(cls, unique: str, cwd: Path, env: Mapping[str, str]) -> Walk:
        return cls([rename(line, unique) for line in bash_lines(PAGE.read_text()) if not_run(line) is None], cwd, env)

    def take(self, start: str) -> str:
        """The first line not taken yet that starts with ``start`` (renamed); AssertionError when there is none."""
        found = next((line for line in self.lines if line.startswith(start)), None)
        assert found is not None, f"docs/quickstart.md has no (other) command starting {start!r}: {self.lines}"
        self.lines.remove(found)
        return found

    def start(self, start: str) -> subprocess.Popen[str]:
        """Start the line ``take(start)`` finds, in the background."""
        line = self.take(start)
        pipes = {"stdout": subprocess.PIPE, "stderr": subprocess.PIPE, "text": True}
        self.started.append(subprocess.Popen(["bash", "-c", line], cwd=self.cwd, env=dict(self.env), **pipes))
        return self.started[-1]

    @staticmethod
    def finish(started: subprocess.Popen[str], timeout_s: float = 300) -> str:
        """The stdout of a started line, once it exited 0; AssertionError with its output otherwise."""
        out, err = started.communicate(timeout=timeout_s)
        assert started.returncode == 0, f"{started.args[-1]}\nexit {started.returncode}:\n{out[-2000:]}{err[-3000:]}"
        return out

    def run(self, start: str, timeout_s: float = 300) -> str:
        """Run the line ``take(start)`` finds; its stdout."""
        return self.finish(self.start(start), timeout_s)

    def stop(self) -> None:
        """Kill what is still running (after a failure)."""
        for started in self.started:
            if started.poll() is None:
                started.kill()
                started.wait()

    def finished(self) -> None:
        """AssertionError naming the page's lines the test did not run (neither taken nor in ``NOT_RUN``)."""
        assert not self.lines, f"docs/quickstart.md lines the e2e test does not run: {self.lines}"
