"""The processors of versioned tables (KIP-914) and grace joins (KIP-923): Kafka's ``KTableSource`` over a versioned
store (out-of-order updates forwarded, expired ones dropped) and ``KStreamKTableJoinProcessor``'s null rules with
as-of lookups and the grace buffer."""

from __future__ import annotations

from typing import Any

from streamapp.drop_reasons import LATE, NULL_KEY_OR_VALUE
from streamapp.kafka.types import TopicPartition
from streamapp.processors.base import Change, ProcessorMetrics, RecordContext
from streamapp.processors.io import VersionedTableSourceProcessor
from streamapp.processors.joins.tables import VersionedStreamTableJoinProcessor
from streamapp.serdes import serde_for
from streamapp.state.grace_buffer import GraceBuffer, GraceBufferStore
from streamapp.state.memory import InMemoryKeyValueStore
from streamapp.state.versioned import VersionedChangeLoggingStore, VersionedKeyValueStore

CHANGELOG = TopicPartition("app-s-changelog", 0)


class Collect:
    def __init__(self) -> None:
        self.records: list[tuple[Any, Any, int]] = []

    def process(self, key: Any, value: Any, timestamp: int) -> None:
        self.records.append((key, value, timestamp))


def versioned(retention_ms: int) -> VersionedKeyValueStore:
    logged = VersionedChangeLoggingStore(InMemoryKeyValueStore("s"), CHANGELOG, lambda: 0, retention_ms)
    return VersionedKeyValueStore(logged, serde_for("string"), serde_for("json"))


def pair(left: Any, right: Any) -> list[Any]:
    return [left, right]


def test_a_versioned_table_forwards_out_of_order_updates_and_drops_expired_ones_as_late() -> None:
    out, metrics = Collect(), ProcessorMetrics()
    table = VersionedTableSourceProcessor(
        (serde_for("string"), serde_for("json")), versioned(100), [out], metrics=metrics, node="rates"
    )
    table.forward("k", {"v": 3}, 300)
    table.forward("k", {"v": 2}, 250)  # out of order, within retention: forwarded; old = the latest value
    table.forward("k", {"v": 0}, 199)  # older than 300 - 100: not put, not forwarded
    table.forward(None, {"v": 9}, 400)
    assert out.records == [("k", Change({"v": 3}, None), 300), ("k", Change({"v": 2}, {"v": 3}), 250)]
    assert metrics.dropped == {LATE: 1, NULL_KEY_OR_VALUE: 1}


def grace_join(left_join: bool, grace_ms: int | None) -> tuple[VersionedStreamTableJoinProcessor, Collect]:
    out = Collect()
    buffer = None
    if grace_ms is not None:
        logged = GraceBufferStore(InMemoryKeyValueStore("b"), CHANGELOG, lambda: 0)
        buffer = GraceBuffer(logged, serde_for("string"), serde_for("json"), grace_ms)
    args = ("orders", "rates", pair, left_join, versioned(1_000), [out], ProcessorMetrics(), "j")
    return VersionedStreamTableJoinProcessor(*args, buffer=buffer), out


def test_a_stream_record_joins_the_table_version_of_its_timestamp() -> None:
    join, out = grace_join(left_join=True, grace_ms=None)
    rates, orders = join.for_input("rates"), join.for_input("orders")
    rates.process("k", Change({"r": 1}, None), 100)
    rates.process("k", Change({"r": 2}, None), 200)
    orders.process("k", {"o": 1}, 150)
    orders.process("k", {"o": 2}, 50)
    assert out.records == [("k", [{"o": 1}, {"r": 1}], 150), ("k", [{"o": 2}, None], 50)]


def test_null_rules_come_before_the_buffer() -> None:
    """Kafka's ``maybeDropRecord``: a null value is dropped; a left join's null key is joined with null (here at
    once: Kafka's buffer would refuse a null key)."""
    join, out = grace_join(left_join=True, grace_ms=500)
    orders = join.for_input("orders")
    orders.process("k", None, 100)
    orders.process(None, {"o": 1}, 100)
    assert out.records == [(None, [{"o": 1}, None], 100)]
    inner, inner_out = grace_join(left_join=False, grace_ms=500)
    inner.for_input("orders").process(None, {"o": 1}, 100)
    assert inner_out.records == []


def test_buffered_records_join_with_table_updates_that_came_within_the_grace() -> None:
    join, out = grace_join(left_join=False, grace_ms=100)
    rates, orders = join.for_input("rates"), join.for_input("orders")
    orders.process("k", {"o": 1}, 1_000)
    rates.process("k", Change({"r": 1}, None), 990)
    assert out.records == []
    orders.process("k", {"o": 2}, 1_100)
    assert out.records == [("k", [{"o": 1}, {"r": 1}], 1_000)]


def test_an_evicted_record_is_joined_with_its_own_headers() -> None:
    """Kafka's ``KStreamKTableJoinProcessor.emit`` sets the buffered record's context while it joins it."""
    context, seen = RecordContext(), []

    class Headers:
        def process(self, key: Any, value: Any, timestamp: int) -> None:
            seen.append((value[0]["o"], context.headers))

    logged = GraceBufferStore(InMemoryKeyValueStore("b"), CHANGELOG, lambda: 0)
    buffer = GraceBuffer(logged, serde_for("string"), serde_for("json"), 100)
    args = ("orders", "rates", pair, True, versioned(1_000), [Headers()], ProcessorMetrics(), "j")
    join = VersionedStreamTableJoinProcessor(*args, buffer=buffer, record_context=context)
    context.headers = [("trace", b"1")]
    join.for_input("orders").process("k", {"o": 1}, 1_000)
    context.headers = [("trace", b"2")]
    join.for_input("orders").process("k", {"o": 2}, 1_100)
    assert seen == [(1, [("trace", b"1")])]
    assert context.headers == [("trace", b"2")]
