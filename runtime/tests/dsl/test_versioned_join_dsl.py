"""The DSL of versioned tables and grace joins: ``table(history_retention_ms=...)`` and ``join(table, ...,
grace_ms=...)`` lowered to Kafka's stores (``<name>-Buffer``: ``KStreamImpl.doStreamTableJoin``)."""

from __future__ import annotations

import pytest
from streamapp import StreamsBuilder
from streamapp.dsl.windows import JoinWindows

S, J = "string", "json"
JOINER = "conformance.join_functions:pair"


def test_a_grace_join_buffers_in_kafkas_store_and_copies_the_table_in_a_versioned_store() -> None:
    builder = StreamsBuilder()
    rates = builder.table("rates", key_serde=S, value_serde=J, store="rates-v", history_retention_ms=900)
    orders = builder.stream("orders", key_serde=S, value_serde="long", name="orders")
    orders.left_join(rates, JOINER, name="priced", store="priced-copy", grace_ms=50).to("out", name="out")
    description = builder.build()
    stores = {store.name: store for store in description.stores}
    assert (stores["rates-v"].type, stores["rates-v"].history_retention_ms) == ("versioned", 900)
    assert (stores["priced-copy"].type, stores["priced-copy"].history_retention_ms) == ("versioned", 900)
    buffer = stores["priced-Buffer"]
    assert (buffer.type, buffer.key_serde, buffer.value_serde) == ("key_value", S, "long")  # the stream's records


def test_grace_applies_to_stream_table_joins_only() -> None:
    builder = StreamsBuilder()
    orders = builder.stream("orders", key_serde=S, value_serde=J, name="orders")
    views = builder.stream("views", key_serde=S, value_serde=J, name="views")
    profiles = builder.global_table("profiles", key_serde=S, value_serde=J, name="profiles")
    with pytest.raises(TypeError, match="grace_ms"):
        orders.join(views, JOINER, JoinWindows.of_time_difference_and_grace(10, 5), grace_ms=5)
    with pytest.raises(TypeError, match="grace_ms"):
        orders.join(profiles, JOINER, JOINER, grace_ms=5)


def test_a_join_without_grace_has_no_buffer_store() -> None:
    builder = StreamsBuilder()
    rates = builder.table("rates", key_serde=S, value_serde=J, name="rates", history_retention_ms=900)
    builder.stream("orders", key_serde=S, value_serde=J, name="orders").join(rates, JOINER, name="priced")
    assert [store.name for store in builder.build().stores] == ["rates-store", "priced-store"]
