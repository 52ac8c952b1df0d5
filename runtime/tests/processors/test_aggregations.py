"""Aggregations follow KStreamAggregate / KStreamReduce (null keys and values dropped, counted) and
KTableAggregate / KTableReduce (subtract the old value, then add the new one), forwarding Change(new, old)."""

from __future__ import annotations

from typing import Any

import pytest
from streamapp.processors.aggregate import (
    CountProcessor,
    StreamAggregateProcessor,
    StreamReduceProcessor,
    TableAggregateProcessor,
    _first_or,
    _keyed,
    _minus_one,
    _none,
    _plus_one,
    _zero,
)
from streamapp.processors.base import Change, ProcessorMetrics
from streamapp.serdes import serde_for
from streamapp.state.memory import InMemoryKeyValueStore
from streamapp.state.stores import TypedKeyValueStore


class Collect:
    def __init__(self) -> None:
        self.records: list[tuple[Any, Any, int]] = []

    def process(self, key: Any, value: Any, timestamp: int) -> None:
        self.records.append((key, value, timestamp))


class WritableBytes:
    name = "agg-store"

    def __init__(self) -> None:
        self._inner = InMemoryKeyValueStore("agg-store")

    def get(self, key: bytes) -> bytes | None:
        return self._inner.get(key)

    def put(self, key: bytes, value: bytes | None) -> None:
        self._inner.write({key: value}, None)


def store(value_serde: str = "long") -> TypedKeyValueStore:
    return TypedKeyValueStore(WritableBytes(), serde_for("string"), serde_for(value_serde))


def test_stream_reduce_starts_with_the_first_value_and_drops_null_keys_and_values() -> None:
    out, metrics, s = Collect(), ProcessorMetrics(), store()
    p = StreamReduceProcessor(s, lambda agg, v: agg + v, [out], metrics)
    for key, value in [("a", 3), ("a", 4), (None, 1), ("a", None), ("b", 1)]:
        p.process(key, value, 1)
    assert out.records == [("a", Change(3, None), 1), ("a", Change(7, 3), 1), ("b", Change(1, None), 1)]
    assert s.get("a") == 7
    assert metrics.dropped_records == 2


def test_stream_aggregate_folds_from_the_initializer_with_the_key() -> None:
    out, s = Collect(), store("json")
    p = StreamAggregateProcessor(s, list, lambda k, v, agg: [*agg, f"{k}{v}"], [out], ProcessorMetrics())
    p.process("a", 1, 1)
    p.process("a", 2, 2)
    assert out.records == [("a", Change(["a1"], None), 1), ("a", Change(["a1", "a2"], ["a1"]), 2)]


def test_count_is_an_aggregate_of_plus_one() -> None:
    out = Collect()
    p = CountProcessor(store(), [out], ProcessorMetrics())
    p.process("a", "x", 1)
    p.process("a", "y", 2)
    assert [change for _, change, _ in out.records] == [Change(1, None), Change(2, 1)]


def table_sum() -> tuple[TableAggregateProcessor, TypedKeyValueStore, Collect]:
    out, s = Collect(), store()
    reduce = TableAggregateProcessor(s, _none, _first_or(lambda a, v: a + v), _keyed(lambda a, v: a - v), [out])
    return reduce, s, out


def test_table_reduce_replaces_a_rows_old_value_by_its_new_one() -> None:
    reduce, s, out = table_sum()
    reduce.process("eu", Change(1, None), 1)
    reduce.process("eu", Change(5, None), 2)
    reduce.process("eu", Change(3, 1), 3)
    assert [change for _, change, _ in out.records] == [Change(1, None), Change(6, 1), Change(8, 6)]
    assert s.get("eu") == 8


def test_table_reduce_retraction_alone_subtracts() -> None:
    reduce, _, out = table_sum()
    reduce.process("eu", Change(4, None), 1)
    reduce.process("eu", Change(None, 4), 2)
    assert out.records[-1] == ("eu", Change(0, 4), 2)


def test_table_aggregate_ignores_a_retraction_for_a_key_without_aggregate() -> None:
    out, s = Collect(), store()
    p = TableAggregateProcessor(s, _zero, _plus_one, _minus_one, [out])
    p.process("eu", Change(None, "x"), 1)
    assert out.records == [("eu", Change(None, None), 1)]
    assert s.get("eu") is None


def test_table_count_counts_rows_added_minus_rows_removed() -> None:
    out, s = Collect(), store()
    p = TableAggregateProcessor(s, _zero, _plus_one, _minus_one, [out])
    p.process("eu", Change("u1", None), 1)
    p.process("eu", Change("u2", None), 2)
    p.process("eu", Change(None, "u1"), 3)
    assert s.get("eu") == 1
    assert out.records[-1] == ("eu", Change(1, 2), 3)


def test_table_aggregation_rejects_a_null_key() -> None:
    p = TableAggregateProcessor(store(), _zero, _plus_one, _minus_one, [])
    with pytest.raises(ValueError, match="must not be null"):
        p.process(None, Change(1, None), 1)
