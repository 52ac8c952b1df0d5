"""Expected skips are logged at most once per reason and interval, with the count of the skips in between."""

from __future__ import annotations

import logging

import pytest
from streamapp.processing.timestamps import TimestampExtractor
from streamapp.skips import SkipLog, SkipWarnings
from streamapp.topology.timestamps import TimestampExtractorSpec


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [record.getMessage() for record in caplog.records if record.name == "skips-test"]


def test_a_flood_of_skips_gives_one_line_per_interval_and_reason_with_the_count(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = Clock()
    skips = SkipLog(logging.getLogger("skips-test"), interval_s=10.0, clock=clock)

    with caplog.at_level(logging.WARNING, logger="skips-test"):
        for i in range(1_000):
            skips.skipped("null key into table store users", f"offset {i}")
        skips.skipped("no valid timestamp", "negative timestamp -1")
        clock.now += 9.9
        skips.skipped("null key into table store users", "offset 1000")
        logged_within_the_interval = lines(caplog)
        clock.now += 0.1
        skips.skipped("null key into table store users", "offset 1001")

    assert logged_within_the_interval == [
        "null key into table store users: offset 0",
        "no valid timestamp: negative timestamp -1",
    ]
    assert lines(caplog)[2:] == ["null key into table store users: 1001 more in the last 10 s; the latest: offset 1001"]


def test_flush_logs_the_skips_counted_since_the_last_line(caplog: pytest.LogCaptureFixture) -> None:
    skips = SkipLog(logging.getLogger("skips-test"), clock=Clock())

    with caplog.at_level(logging.WARNING, logger="skips-test"):
        skips.skipped("r", "first")
        skips.skipped("r", "second")
        skips.flush()
        skips.flush()

    assert lines(caplog) == ["r: first", "r: 1 more in the last 0 s; the latest: second"]


def test_an_extractor_skipping_invalid_timestamps_logs_once_per_interval(caplog: pytest.LogCaptureFixture) -> None:
    spec = TimestampExtractorSpec.model_validate({"type": "field", "field": "ts", "onInvalid": "skip"})
    skips = SkipLog(logging.getLogger("skips-test"), clock=Clock())
    extractor = TimestampExtractor(spec, lambda: 0, skips)

    with caplog.at_level(logging.WARNING, logger="skips-test"):
        results = [extractor.extract(None, {"other": 1}, 5, -1) for _ in range(500)]

    assert results == [None] * 500
    assert lines(caplog) == ["Skipped a record without a valid timestamp (field 'ts' as epoch_ms): KeyError: 'ts'"]


def test_a_module_log_of_skip_warnings_rate_limits_each_distinct_warning(caplog: pytest.LogCaptureFixture) -> None:
    clock = Clock()
    log = SkipWarnings(logging.getLogger("skips-test"), SkipLog(logging.getLogger("skips-test"), clock=clock))

    with caplog.at_level(logging.INFO, logger="skips-test"):
        for _ in range(300):
            log.warning("Skipping record due to null key (table store %s)", "users")
            log.warning("Skipping record due to null key (table store %s)", "items")
        log.info("not a skip: %d", 1)
        clock.now += 10
        log.warning("Skipping record due to null key (table store %s)", "users")

    assert lines(caplog) == [
        "Skipping record due to null key (table store users)",
        "Skipping record due to null key (table store items)",
        "not a skip: 1",
        "Skipping record due to null key (table store users): 300 more in the last 10 s",
    ]


def test_a_burst_of_skips_that_stopped_gets_its_count_logged_once_its_interval_is_over(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = Clock()
    skips = SkipLog(logging.getLogger("skips-test"), interval_s=10.0, clock=clock)

    with caplog.at_level(logging.WARNING, logger="skips-test"):
        for i in range(4):
            skips.skipped("late record", f"offset {i}")
        clock.now += 9.0
        skips.flush_due()  # within the interval: nothing yet
        within = lines(caplog)
        clock.now += 1.0
        skips.flush_due()
        skips.flush_due()  # once

    assert within == ["late record: offset 0"]
    assert lines(caplog) == ["late record: offset 0", "late record: 3 more in the last 10 s; the latest: offset 3"]
