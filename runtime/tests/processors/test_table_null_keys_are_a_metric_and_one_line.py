"""A null key into a table is an expected skip (Kafka's KTableSource): counted in dropped-records under its reason
and logged as one rate-limited line naming the record, not one line per record."""

from __future__ import annotations

import logging

import pytest
from streamapp import StreamsBuilder
from streamapp import skips as skips_module
from streamapp.testing import TopologyTestDriver


def test_a_flood_of_null_keys_into_a_table_is_counted_and_logged_once(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(skips_module, "_LOGS", {})  # a fresh process-wide skip log: no other test's reasons
    builder = StreamsBuilder()
    store = "null-key-flood-store"
    builder.table("users", key_serde="string", value_serde="json", store=store).to_stream().to("changes")

    with caplog.at_level(logging.WARNING), TopologyTestDriver(builder) as driver:
        users = driver.create_input_topic("users")
        users.pipe_records([(None, {"name": f"user {i}"}, i) for i in range(50)])
        users.pipe_input("alice", {"name": "Alice"}, 50)
        metrics = driver.metrics()
        changes = driver.create_output_topic("changes").read_key_values_to_list()

    skip_lines = [r.getMessage() for r in caplog.records if "null key" in r.getMessage()]
    assert len(skip_lines) == 1
    assert skip_lines[0].startswith("Skipping record due to null key in KTABLE-SOURCE-")
    assert skip_lines[0].endswith(f": task=[0_0] topic=[users] partition=[0] offset=[0] store=[{store}]")
    assert metrics.dropped_records_total == 50
    assert metrics.dropped_records_by_reason == {"null_key_or_value": 50}
    assert changes == [("alice", {"name": "Alice"})]
