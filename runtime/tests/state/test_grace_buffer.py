"""The grace buffer of a versioned stream-table join (KIP-923, Kafka's ``RocksDBTimeOrderedKeyValueBuffer``):
refusal of records older than the grace, eviction in timestamp order, and a rebuild from its store."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from logged_store_fixtures import LoggedStore
from streamapp.serdes import serde_for
from streamapp.state.grace_buffer import GraceBuffer


def buffer_over(logged: LoggedStore, grace_ms: int = 100) -> GraceBuffer:
    return GraceBuffer(logged.logged, serde_for("string"), serde_for("json"), grace_ms)


@pytest.fixture(params=["rocksdb", "memory"])
def logged(request: pytest.FixtureRequest, tmp_path: Path) -> LoggedStore:
    return LoggedStore(request.param, tmp_path)


def evicted(buffer: GraceBuffer) -> list[tuple[Any, Any, int]]:
    out: list[tuple[Any, Any, int]] = []
    buffer.evict(lambda key, value, timestamp: out.append((key, value, timestamp)))
    return out


def test_records_wait_until_stream_time_passes_their_timestamp_plus_the_grace(logged: LoggedStore) -> None:
    buffer = buffer_over(logged)
    assert buffer.put("a", {"n": 1}, 1_000)
    assert evicted(buffer) == []
    assert buffer.put("b", {"n": 2}, 1_050)
    assert buffer.put("c", {"n": 3}, 1_100)  # stream time 1100: 1000 <= 1100 - 100 is due
    assert evicted(buffer) == [("a", {"n": 1}, 1_000)]
    assert len(buffer) == 2


def test_a_record_older_than_stream_time_minus_the_grace_is_refused(logged: LoggedStore) -> None:
    buffer = buffer_over(logged)
    buffer.put("a", {"n": 1}, 1_000)
    assert not buffer.put("late", {"n": 0}, 899)
    assert buffer.put("edge", {"n": 0}, 900)  # Kafka refuses only `stream time - grace > timestamp`
    assert len(buffer) == 2


def test_evictions_come_in_timestamp_then_key_then_arrival_order(logged: LoggedStore) -> None:
    buffer = buffer_over(logged, grace_ms=10)
    for key, timestamp in [("b", 5), ("a", 5), ("b", 5), ("c", 3)]:
        buffer.put(key, {"k": key}, timestamp)
    buffer.put("z", {"k": "z"}, 20)
    assert [(k, t) for k, _, t in evicted(buffer)] == [("c", 3), ("a", 5), ("b", 5), ("b", 5)]


def test_a_buffer_rebuilt_from_its_store_evicts_and_refuses_as_before(logged: LoggedStore) -> None:
    buffer = buffer_over(logged)
    buffer.put("a", {"n": 1}, 1_000)
    buffer.put("b", {"n": 2}, 1_050)
    logged.commit()
    again = buffer_over(logged)
    assert again.stream_time == 1_050
    assert not again.put("late", {"n": 0}, 900)
    again.put("c", {"n": 3}, 1_200)
    assert evicted(again) == [("a", {"n": 1}, 1_000), ("b", {"n": 2}, 1_050)]
    logged.commit()
    assert len(buffer_over(logged)) == 1
