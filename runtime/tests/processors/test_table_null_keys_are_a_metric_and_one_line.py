"""A null key into a table is an expected skip (Kafka's KTableSource): counted in dropped-records and logged as
one rate-limited line, not one line per record."""

from __future__ import annotations

import logging

import pytest
from streamapp import StreamsBuilder
from streamapp.testing import TopologyTestDriver


def test_a_flood_of_null_keys_into_a_table_is_counted_and_logged_once(caplog: pytest.LogCaptureFixture) -> None:
    builder = StreamsBuilder()
    store = "null-key-flood-store"  # the process-wide skip log keeps its reasons: one of its own
    builder.table("users", key_serde="string", value_serde="json", store=store).to_stream().to("changes")

    with caplog.at_level(logging.WARNING), TopologyTestDriver(builder) as driver:
        users = driver.create_input_topic("users")
        users.pipe_records([(None, {"name": f"user {i}"}, i) for i in range(50)])
        users.pipe_input("alice", {"name": "Alice"}, 50)
        dropped = driver.metrics().dropped_records_total
        changes = driver.create_output_topic("changes").read_key_values_to_list()

    skip_lines = [r.getMessage() for r in caplog.records if "null key" in r.getMessage()]
    assert skip_lines == [f"Skipping record due to null key (table store {store})"]
    assert dropped == 50
    assert changes == [("alice", {"name": "Alice"})]
