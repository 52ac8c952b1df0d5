"""Stream-table, stream-global and table-table join processors: Kafka Streams' null rules, triggers and
``Change`` results (KStreamKTableJoin, KStreamGlobalKTableJoin, KTableKTable{Inner,Left,Outer}Join)."""

from __future__ import annotations

from typing import Any

import pytest
from streamapp.processors.base import Change, ProcessorMetrics
from streamapp.processors.joins.tables import (
    StreamGlobalJoinProcessor,
    StreamTableJoinProcessor,
    TableTableJoinProcessor,
)
from streamapp.serdes import serde_for
from streamapp.state.stores import TypedKeyValueStore


class Collect:
    def __init__(self) -> None:
        self.records: list[tuple[Any, Any, int]] = []

    def process(self, key: Any, value: Any, timestamp: int) -> None:
        self.records.append((key, value, timestamp))


class DictStore:
    def __init__(self, name: str = "s") -> None:
        self.name = name
        self.data: dict[bytes, bytes] = {}

    def get(self, key: bytes) -> bytes | None:
        return self.data.get(key)

    def put(self, key: bytes, value: bytes | None) -> None:
        if value is None:
            self.data.pop(key, None)
        else:
            self.data[key] = value


def store() -> TypedKeyValueStore:
    return TypedKeyValueStore(DictStore(), serde_for("string"), serde_for("json"))


def pair(left: Any, right: Any) -> list[Any]:
    return [left, right]


# -- stream-table ------------------------------------------------------------------------------------


def stream_table(left_join: bool) -> tuple[StreamTableJoinProcessor, Collect, ProcessorMetrics]:
    out, metrics = Collect(), ProcessorMetrics()
    return StreamTableJoinProcessor("orders", "users", pair, left_join, store(), [out], metrics), out, metrics


def test_stream_table_inner_join_emits_only_stream_records_that_find_a_table_value() -> None:
    join, out, _ = stream_table(left_join=False)
    orders, users = join.for_input("orders"), join.for_input("users")
    orders.process("alice", "o1", 10)  # no user yet: nothing
    users.process("alice", Change("north", None), 11)  # a table update never emits
    orders.process("alice", "o2", 12)
    users.process("alice", Change("south", "north"), 13)
    orders.process("alice", "o3", 14)
    users.process("alice", Change(None, "south"), 15)  # tombstone deletes
    orders.process("alice", "o4", 16)
    assert out.records == [("alice", ["o2", "north"], 12), ("alice", ["o3", "south"], 14)]


def test_stream_table_left_join_joins_missing_table_values_with_none() -> None:
    join, out, _ = stream_table(left_join=True)
    join.for_input("orders").process("bob", "o1", 10)
    join.for_input("users").process("bob", Change("east", None), 11)
    join.for_input("orders").process("bob", "o2", 12)
    assert out.records == [("bob", ["o1", None], 10), ("bob", ["o2", "east"], 12)]


def test_stream_table_null_values_are_dropped_and_null_keys_only_kept_by_left_join() -> None:
    inner, inner_out, inner_metrics = stream_table(left_join=False)
    inner.for_input("orders").process(None, "o1", 1)
    inner.for_input("orders").process("a", None, 1)
    assert inner_out.records == [] and inner_metrics.dropped_records == 2
    left, left_out, left_metrics = stream_table(left_join=True)
    left.for_input("orders").process(None, "o1", 1)
    left.for_input("orders").process("a", None, 1)
    assert left_out.records == [(None, ["o1", None], 1)] and left_metrics.dropped_records == 1


def test_a_join_cannot_be_fed_without_naming_the_side() -> None:
    join, _, _ = stream_table(left_join=False)
    with pytest.raises(TypeError, match="for_input"):
        join.process("k", "v", 0)
    with pytest.raises(KeyError):
        join.for_input("not-an-input")


# -- stream-global -------------------------------------------------------------------------------------


def region_of(key: Any, value: Any) -> Any:
    return None if value is None else value.get("user")


def stream_global(left_join: bool) -> tuple[StreamGlobalJoinProcessor, TypedKeyValueStore, Collect, ProcessorMetrics]:
    out, metrics, users = Collect(), ProcessorMetrics(), store()
    return StreamGlobalJoinProcessor(region_of, pair, left_join, users, [out], metrics), users, out, metrics


def test_stream_global_join_looks_up_the_selected_key_and_keeps_the_record_key() -> None:
    join, users, out, _ = stream_global(left_join=False)
    users._inner.put(b"alice", b'"north"')  # the global consumer's write
    join.process("order-1", {"user": "alice"}, 5)
    join.process("order-2", {"user": "zed"}, 6)
    assert out.records == [("order-1", [{"user": "alice"}, "north"], 5)]


def test_stream_global_left_join_and_null_rules() -> None:
    join, _, out, metrics = stream_global(left_join=True)
    join.process("order-2", {"user": "zed"}, 6)  # no global value: joined with None
    join.process("order-3", {"other": 1}, 7)  # selected key None, record key not None: dropped
    join.process(None, {"user": "zed"}, 8)  # null record key kept by a left join
    join.process("order-4", None, 9)  # null value dropped
    assert out.records == [("order-2", [{"user": "zed"}, None], 6), (None, [{"user": "zed"}, None], 8)]
    assert metrics.dropped_records == 2


# -- table-table ---------------------------------------------------------------------------------------


def table_table(join_type: str) -> tuple[TableTableJoinProcessor, Collect]:
    out = Collect()
    processor = TableTableJoinProcessor("l", "r", pair, join_type, (store(), store()), [out], ProcessorMetrics())
    return processor, out


def run_table_script(join_type: str) -> list[tuple[Any, Any, int]]:
    """One script of updates on both sides; every variant's answer is asserted below."""
    join, out = table_table(join_type)
    left, right = join.for_input("l"), join.for_input("r")
    left.process("k", Change("a1", None), 1)  # left insert, no right
    right.process("k", Change("b1", None), 2)  # right insert
    left.process("k", Change("a2", "a1"), 3)  # left update
    right.process("k", Change(None, "b1"), 4)  # right delete
    left.process("k", Change(None, "a2"), 5)  # left delete
    right.process("k", Change("b2", None), 6)  # right insert, no left
    return out.records


def test_table_table_inner_join_results_exist_only_while_both_sides_do() -> None:
    assert run_table_script("inner") == [
        ("k", Change(["a1", "b1"], None), 2),
        ("k", Change(["a2", "b1"], ["a1", "b1"]), 3),
        ("k", Change(None, ["a2", "b1"]), 4),
    ]


def test_table_table_left_join_keeps_every_left_row() -> None:
    assert run_table_script("left") == [
        ("k", Change(["a1", None], None), 1),
        ("k", Change(["a1", "b1"], ["a1", None]), 2),
        ("k", Change(["a2", "b1"], ["a1", "b1"]), 3),
        ("k", Change(["a2", None], ["a2", "b1"]), 4),
        ("k", Change(None, ["a2", None]), 5),
    ]


def test_table_table_outer_join_keeps_rows_of_either_side() -> None:
    assert run_table_script("outer") == [
        ("k", Change(["a1", None], None), 1),
        ("k", Change(["a1", "b1"], ["a1", None]), 2),
        ("k", Change(["a2", "b1"], ["a1", "b1"]), 3),
        ("k", Change(["a2", None], ["a2", "b1"]), 4),
        ("k", Change(None, ["a2", None]), 5),
        ("k", Change([None, "b2"], None), 6),
    ]


def test_table_table_join_drops_null_keys() -> None:
    join, out = table_table("outer")
    join.for_input("l").process(None, Change("a", None), 1)
    assert out.records == []
