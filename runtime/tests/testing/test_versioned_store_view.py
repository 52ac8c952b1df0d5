"""The TopologyTestDriver's read view of a versioned store (Kafka's ``VersionedKeyValueStore.get(key, asOf)``)."""

from __future__ import annotations

import pytest
from streamapp import StreamsBuilder
from streamapp.state.versioned import VersionedRecord
from streamapp.testing import TopologyTestDriver


def test_the_driver_reads_a_versioned_table_as_of_any_time_within_its_history() -> None:
    builder = StreamsBuilder()
    builder.table("rates", key_serde="string", value_serde="long", name="rates", history_retention_ms=10_000)
    with TopologyTestDriver(builder, {"application.id": "app"}) as driver:
        rates = driver.create_input_topic("rates")
        rates.pipe_input("eur", 1, 1_000)
        rates.pipe_input("eur", 3, 3_000)
        rates.pipe_input("eur", 2, 2_000)
        store = driver.get_versioned_store("rates-store")
        assert store.get("eur") == VersionedRecord(3, 3_000)
        assert store.get("eur", 2_500) == VersionedRecord(2, 2_000)
        assert store.get("eur", 999) is None
        assert store.get("usd") is None
        with pytest.raises(KeyError, match="is a versioned store, not a key_value store"):
            driver.get_key_value_store("rates-store")
