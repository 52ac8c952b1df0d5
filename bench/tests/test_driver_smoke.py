"""Smoke test of ``bench.driver`` (it runs and counts what it piped; no speed is asserted)."""

from __future__ import annotations

import pytest

from bench.driver import measure


@pytest.mark.parametrize("topology", ["count", "join"])
def test_the_driver_benchmark_runs_both_topologies(topology: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert measure(topology, 50) > 0
    assert f"{topology:>6}: 50 flights in" in capsys.readouterr().out
