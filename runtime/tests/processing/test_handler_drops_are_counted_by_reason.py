"""A record an exception handler skipped is counted under its reason (deserialization_error, processing_error) and
logged in one rate-limited WARN line per stage naming the task and the record, not one line per record."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from harness import EVENTS, ThreadHarness, latest_counts, new_cluster, produce_events
from streamapp import skips as skips_module


def test_poison_records_skipped_by_log_and_continue_count_as_deserialization_errors_in_one_line(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(skips_module, "_LOGS", {})  # a fresh process-wide skip log
    cluster = new_cluster()
    produce_events(cluster, [(2, "red")], partition=0)
    for offset in range(3):
        cluster.append(EVENTS, 0, b"poison", b"not json", timestamp=5 + offset)
    produce_events(cluster, [(4, "red"), (6, "blue")], partition=0)
    h = ThreadHarness(
        cluster, tmp_path, **{"commit.interval.ms": 0, "default.deserialization.exception.handler": "log_and_continue"}
    )
    thread = h.start()
    h.assign_all()
    with caplog.at_level(logging.WARNING):
        h.run(30)

    assert latest_counts(cluster) == {"red": 2, "blue": 1}
    metrics = thread.status().metrics
    assert metrics.dropped_records_by_reason == {"deserialization_error": 3}
    assert metrics.dropped_records_total == 3
    lines = [r.getMessage() for r in caplog.records if "deserialization error" in r.getMessage()]
    assert len(lines) == 1
    assert lines[0].startswith(
        "Skipping record after a deserialization error (deserialization handler continues): task=[0_0] "
        f"topic=[{EVENTS}] partition=[0] offset=[1]: "
    )
