"""The interactive-queries example (``examples/interactive_queries``) answers the queries docs/interactive-queries.md
shows: a player's total (``KeyQuery``), every total (``RangeQuery``) and a player's minutes (``WindowKeyQuery``),
asked of the TopologyTestDriver's running tasks as a stream thread answers them (``streamapp.processing.queries``)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from streamapp.processing.queries import LocalQuery, answer
from streamapp.query.requests import KeyQuery, Query, RangeQuery, WindowKeyQuery, WindowRangeQuery
from streamapp.testing import TopologyTestDriver

EXAMPLE_SRC = Path(__file__).resolve().parents[2] / "examples" / "interactive_queries" / "src"
MINUTE_MS = 60_000


@pytest.fixture(scope="module")
def driver() -> Iterator[TopologyTestDriver]:
    sys.path.insert(0, str(EXAMPLE_SRC))
    try:
        from iq_app import topology

        with TopologyTestDriver(topology.build(), partitions={"scores": 1}) as driver:
            scores = driver.create_input_topic("scores")
            for player, points, ts in [("alice", 3, 1_000), ("bob", 5, 2_000), ("alice", 4, MINUTE_MS + 1)]:
                scores.pipe_input(player, {"points": points}, timestamp_ms=ts)
            yield driver
    finally:
        sys.path.remove(str(EXAMPLE_SRC))


def ask(driver: TopologyTestDriver, store: str, query: Query) -> Any:
    (task,) = [t for t in driver.tasks() if store in t.stores]
    (result,) = answer(LocalQuery(store, task.id.subtopology, query, (0,)), driver.description, {task.id: task}, {})
    assert (result.source, result.stale) == ("active", False)
    return result.result


def test_the_documented_queries_answer_the_players_points(driver: TopologyTestDriver) -> None:
    assert ask(driver, "points", KeyQuery("alice")) == 7
    assert ask(driver, "points", RangeQuery()) == [["alice", 7], ["bob", 5]]
    assert ask(driver, "points-per-minute", WindowKeyQuery("alice", 0, 10 * MINUTE_MS)) == [
        ["alice", 0, MINUTE_MS, 3],
        ["alice", MINUTE_MS, 2 * MINUTE_MS, 4],
    ]
    assert ask(driver, "points-per-minute", WindowRangeQuery(0, 0)) == [
        ["alice", 0, MINUTE_MS, 3],
        ["bob", 0, MINUTE_MS, 5],
    ]
