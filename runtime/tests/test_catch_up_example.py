"""The catch-up example (``examples/catch_up``) does what docs/execution.md, "Catch-up after a repartition", says:
a page view within the grace of its hour is counted, one past it is dropped as late, counted under reason ``late``
and logged; a larger grace keeps it."""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path
from typing import Any

import pytest
from streamapp.testing import TopologyTestDriver

EXAMPLE_SRC = Path(__file__).resolve().parents[2] / "examples" / "catch_up" / "src"
MIN_MS = 60_000
HOUR_MS = 3_600_000


@pytest.fixture(scope="module")
def example() -> Any:
    sys.path.insert(0, str(EXAMPLE_SRC))
    try:
        from catch_up_app import topology

        yield topology
    finally:
        sys.path.remove(str(EXAMPLE_SRC))


def view(country: str, ts: int) -> tuple[str, dict[str, Any], int]:
    return ("user-1", {"country": country, "ts": ts}, ts)


VIEWS = [
    view("de", 10 * HOUR_MS + 30 * MIN_MS),  # window [10:00, 11:00), open until 12:00 (1 h grace)
    view("de", 12 * HOUR_MS + 10 * MIN_MS),  # stream time 12:10
    view("de", 10 * HOUR_MS + 50 * MIN_MS),  # [10:00, 11:00) closed at 12:00 <= 12:10: late
    view("de", 11 * HOUR_MS + 30 * MIN_MS),  # [11:00, 12:00) open until 13:00: counted
]


def final_counts(driver: TopologyTestDriver, topic: str) -> dict[int, int]:
    updates = driver.create_output_topic(topic).read_key_values_to_list()
    return {window.start // HOUR_MS: count for window, count in updates}


def test_a_view_past_the_grace_of_its_hour_is_dropped_counted_as_late_and_logged(
    example: Any, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING), TopologyTestDriver(example.build()) as driver:
        driver.create_input_topic(example.INPUT_TOPIC).pipe_records(VIEWS)

        assert final_counts(driver, example.OUTPUT_TOPIC) == {10: 1, 11: 1, 12: 1}
        assert driver.metrics().dropped_records_by_reason == {"late": 1}
    assert any("Skipping record for expired window" in r.getMessage() for r in caplog.records)


def test_a_grace_longer_than_the_lag_keeps_the_view(example: Any) -> None:
    with TopologyTestDriver(example.build(grace_ms=3 * HOUR_MS)) as driver:
        driver.create_input_topic(example.INPUT_TOPIC).pipe_records(VIEWS)

        assert final_counts(driver, example.OUTPUT_TOPIC) == {10: 2, 11: 1, 12: 1}
        assert driver.metrics().dropped_records_by_reason.get("late", 0) == 0


def test_the_example_reads_event_time_from_the_ts_field(example: Any) -> None:
    description = example.build().build()
    source = description.node("page-views")
    assert json.loads(source.model_dump_json(by_alias=True))["timestampExtractor"]["field"] == "ts"
