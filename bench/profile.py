"""py-spy profiles of streamapp runs: collapsed stacks (flame-graph input) and a "top" summary.

``py-spy record --subprocesses --nonblocking --format raw`` samples the CLI and its stream-thread worker
processes; the output has one line per distinct stack, ``process <pid>:"<cmd>";frame;frame;... <samples>``
(load it into speedscope or flamegraph.pl for the picture). ``top`` summarizes the worker processes'
samples: per function the share of samples where it is on top of the stack (self) and anywhere on it
(inclusive), like ``py-spy top``.
"""

from __future__ import annotations

import re
import subprocess
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

__all__ = ["PY_SPY_VERSION", "Top", "py_spy", "summarize", "wrap_with_py_spy"]

PY_SPY_VERSION = "0.4.3"
_FRAME = re.compile(r"^(?P<func>.*?) \((?P<file>[^()]*?)(?::(?P<line>\d+))?\)$")


def py_spy() -> str:
    """Path of py-spy ``PY_SPY_VERSION``, from ``hack/bin/uv run --with`` (the project's pinned uv).

    Never a py-spy found on PATH: its version is unknown and a fresh machine has none.
    """
    result = subprocess.run(
        [
            str(Path(__file__).resolve().parent.parent / "hack" / "bin" / "uv"),
            "run",
            "--no-project",
            "--with",
            f"py-spy=={PY_SPY_VERSION}",
            "python",
            "-c",
            "import shutil; print(shutil.which('py-spy'))",
        ],
        check=True,
        capture_output=True,
        text=True,
    )
    return result.stdout.strip().splitlines()[-1]


def wrap_with_py_spy(
    binary: str, output: Path, rate: int = 100, idle: bool = False
) -> Callable[[list[str], Path], list[str]]:
    """A command wrapper for ``Bench.wrap``: run the engine under ``py-spy record`` writing ``output``.

    ``idle``: also sample threads that wait (``--idle``, with ``--threads`` so each stack names its thread):
    a wall-clock profile, where a blocking call (a flush, a transaction commit, a poll timeout) shows with the
    time it waits instead of only the CPU it uses."""

    def wrap(command: list[str], run_dir: Path) -> list[str]:
        output.parent.mkdir(parents=True, exist_ok=True)
        return [
            binary,
            "record",
            "--subprocesses",
            "--nonblocking",
            "--rate",
            str(rate),
            *(["--idle", "--threads"] if idle else []),
            "--format",
            "raw",
            "-o",
            str(output),
            "--",
            *command,
        ]

    return wrap


def _function(frame: str) -> str:
    match = _FRAME.match(frame)
    if match is None:
        return frame
    file = match.group("file")
    for marker in ("site-packages/", "src/", "lib/python3.11/"):
        if marker in file:
            file = file.split(marker, 1)[1]
            break
    return f"{match.group('func')} ({file})"


@dataclass
class Top:
    samples: int
    self_counts: Counter[str]
    total_counts: Counter[str]

    def render(self, limit: int = 25) -> str:
        lines = [f"{self.samples} samples of the stream-thread worker(s)", "", "  self%  total%  function"]
        for name, count in self.total_counts.most_common(limit):
            share = 100 * count / self.samples
            own = 100 * self.self_counts.get(name, 0) / self.samples
            lines.append(f"{own:6.1f}  {share:6.1f}  {name}")
        lines += ["", "Top by self time:", "  self%  function"]
        for name, count in self.self_counts.most_common(limit):
            lines.append(f"{100 * count / self.samples:6.1f}  {name}")
        return "\n".join(lines)


def summarize(lines: Iterable[str], worker_marker: str = "spawn_main") -> Top:
    """Self and inclusive sample counts per function over the stacks of the worker processes."""
    own: Counter[str] = Counter()
    total: Counter[str] = Counter()
    samples = 0
    for line in lines:
        line = line.rstrip("\n")
        if not line:
            continue
        stack, _, count_text = line.rpartition(" ")
        try:
            count = int(count_text)
        except ValueError:
            continue
        frames = stack.split(";")
        processes = [f for f in frames if f.startswith("process ")]
        if worker_marker and not any(worker_marker in p for p in processes):
            continue
        functions = [_function(f) for f in frames if not f.startswith("process ") and not f.startswith("thread ")]
        if not functions:
            continue
        samples += count
        own[functions[-1]] += count
        for name in set(functions):
            total[name] += count
    return Top(samples, own, total)
