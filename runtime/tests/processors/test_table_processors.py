"""KTable processors forward Change(new, old) like Kafka's KTableSource, KTableFilter, KTableMapValues and
KTableRepartitionMap; a grouped table's repartition records use Kafka's ChangedSerializer layout."""

from __future__ import annotations

from typing import Any

import pytest
from streamapp.processors.aggregate import GroupByProcessor
from streamapp.processors.base import Change, ProcessorMetrics
from streamapp.processors.io import ChangeSerde, TableSourceProcessor
from streamapp.processors.stateless import TableFilterProcessor, TableMapValuesProcessor
from streamapp.serdes import SerdeError, serde_for
from streamapp.state.memory import InMemoryKeyValueStore
from streamapp.state.stores import TypedKeyValueStore


class Collect:
    def __init__(self) -> None:
        self.records: list[tuple[Any, Any, int]] = []

    def process(self, key: Any, value: Any, timestamp: int) -> None:
        self.records.append((key, value, timestamp))


class WritableBytes:
    name = "table-store"

    def __init__(self) -> None:
        self._inner = InMemoryKeyValueStore("table-store")

    def get(self, key: bytes) -> bytes | None:
        return self._inner.get(key)

    def put(self, key: bytes, value: bytes | None) -> None:
        self._inner.write({key: value}, None)


def table_source() -> tuple[TableSourceProcessor, TypedKeyValueStore, Collect, ProcessorMetrics]:
    out, metrics = Collect(), ProcessorMetrics()
    store = TypedKeyValueStore(WritableBytes(), serde_for("string"), serde_for("long"))
    source = TableSourceProcessor(serde_for("string"), serde_for("long"), store, [out], metrics)
    return source, store, out, metrics


def test_table_source_forwards_inserts_updates_and_deletes_with_the_old_value() -> None:
    source, store, out, _ = table_source()
    source.forward("a", 1, 10)
    source.forward("a", 2, 11)
    source.forward("a", None, 12)
    assert out.records == [("a", Change(1, None), 10), ("a", Change(2, 1), 11), ("a", Change(None, 2), 12)]
    assert store.get("a") is None


def test_table_source_deserializes_then_materializes() -> None:
    source, store, out, _ = table_source()
    source.process(b"a", (7).to_bytes(8, "big"), 1)
    assert store.get("a") == 7
    assert out.records == [("a", Change(7, None), 1)]


def test_table_source_drops_null_keys_and_counts_them() -> None:
    source, _, out, metrics = table_source()
    source.forward(None, 1, 1)
    assert out.records == []
    assert metrics.dropped_records == 1


def test_table_filter_turns_a_value_that_stops_matching_into_a_delete() -> None:
    out = Collect()
    f = TableFilterProcessor(lambda k, v: v > 1, [out])
    f.process("a", Change(5, None), 1)
    f.process("a", Change(0, 5), 2)
    assert out.records == [("a", Change(5, None), 1), ("a", Change(None, 5), 2)]


def test_table_filter_forwards_nothing_when_neither_value_matches() -> None:
    out = Collect()
    TableFilterProcessor(lambda k, v: v > 1, [out]).process("a", Change(0, 1), 1)
    assert out.records == []


def test_table_map_values_maps_both_values_and_keeps_deletes() -> None:
    out = Collect()
    m = TableMapValuesProcessor(lambda v: v * 10, [out])
    m.process("a", Change(2, 1), 1)
    m.process("a", Change(None, 2), 2)
    assert out.records == [("a", Change(20, 10), 1), ("a", Change(None, 20), 2)]


def by_region(key: Any, value: Any) -> tuple[Any, Any]:
    return value["region"], value["n"]


def test_group_by_on_an_unchanged_group_key_forwards_one_change() -> None:
    out = Collect()
    GroupByProcessor(by_region, [out]).process("u1", Change({"region": "eu", "n": 2}, {"region": "eu", "n": 1}), 5)
    assert out.records == [("eu", Change(2, 1), 5)]


def test_group_by_that_moves_a_row_retracts_under_the_old_key_first() -> None:
    out = Collect()
    GroupByProcessor(by_region, [out]).process("u1", Change({"region": "us", "n": 2}, {"region": "eu", "n": 1}), 5)
    assert out.records == [("eu", Change(None, 1), 5), ("us", Change(2, None), 5)]


def test_group_by_skips_pairs_with_a_null_key_or_value() -> None:
    out = Collect()
    g = GroupByProcessor(by_region, [out])
    g.process("u1", Change({"region": None, "n": 2}, None), 1)
    g.process("u1", Change({"region": "eu", "n": None}, None), 2)
    g.process("u1", Change(None, {"region": "eu", "n": 3}), 3)
    assert out.records == [("eu", Change(None, 3), 3)]


def test_group_by_rejects_a_null_table_key() -> None:
    with pytest.raises(ValueError, match="must not be null"):
        GroupByProcessor(by_region, [Collect()]).process(None, Change(None, None), 1)


@pytest.mark.parametrize(
    ("change", "encoded"),
    [
        (Change(None, "old"), b"old\x00"),
        (Change("new", None), b"new\x01"),
        (Change("new", "old"), b"\x06newold\x02"),
    ],
    ids=["old_only", "new_only", "both"],
)
def test_change_serde_uses_kafkas_changed_serializer_layout(change: Change, encoded: bytes) -> None:
    serde = ChangeSerde(serde_for("string"))
    assert serde.serialize(change) == encoded
    assert serde.deserialize(encoded) == change


def test_change_serde_round_trips_values_longer_than_one_varint_byte() -> None:
    serde = ChangeSerde(serde_for("string"))
    change = Change("n" * 300, "o" * 5)
    assert serde.deserialize(serde.serialize(change)) == change


def test_change_serde_refuses_a_change_without_values_and_unknown_flags() -> None:
    serde = ChangeSerde(serde_for("string"))
    with pytest.raises(SerdeError, match="both old and new values"):
        serde.serialize(Change(None, None))
    with pytest.raises(SerdeError, match="unknown Change encoding flag 7"):
        serde.deserialize(b"x\x07")
