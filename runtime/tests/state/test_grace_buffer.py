"""The grace buffer of a versioned stream-table join (KIP-923, Kafka's ``RocksDBTimeOrderedKeyValueBuffer``):
refusal of records older than the grace, eviction in timestamp order, Kafka's changelog records, and a rebuild
from its store or its changelog."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest
from logged_store_fixtures import CHANGELOG, LoggedStore
from streamapp.serdes import serde_for
from streamapp.state.grace_buffer import BufferedRecord, GraceBuffer, GraceBufferStore, RecordOrigin


class Buffered(LoggedStore):
    """A ``GraceBufferStore`` over a real persistent backend, with the commit protocol's store steps."""

    def __init__(self, backend: str, tmp_path: Path, name: str = "store") -> None:
        super().__init__(backend, tmp_path, name)
        self.logged = GraceBufferStore(self.store, CHANGELOG, lambda: self.now)

    def buffer(self, grace_ms: int = 100) -> GraceBuffer:
        return GraceBuffer(self.logged, serde_for("string"), serde_for("json"), grace_ms)


@pytest.fixture(params=["rocksdb", "memory"])
def logged(request: pytest.FixtureRequest, tmp_path: Path) -> Buffered:
    return Buffered(request.param, tmp_path)


def evicted(buffer: GraceBuffer) -> list[tuple[object, object, int]]:
    out: list[BufferedRecord] = []
    buffer.evict(out.append)
    return [(record.key, record.value, record.timestamp) for record in out]


def test_records_wait_until_stream_time_passes_their_timestamp_plus_the_grace(logged: Buffered) -> None:
    buffer = logged.buffer()
    assert buffer.put("a", {"n": 1}, 1_000)
    assert evicted(buffer) == []
    assert buffer.put("b", {"n": 2}, 1_050)
    assert buffer.put("c", {"n": 3}, 1_100)  # stream time 1100: 1000 <= 1100 - 100 is due
    assert evicted(buffer) == [("a", {"n": 1}, 1_000)]
    assert len(buffer) == 2


def test_a_record_older_than_stream_time_minus_the_grace_is_refused(logged: Buffered) -> None:
    buffer = logged.buffer()
    buffer.put("a", {"n": 1}, 1_000)
    assert not buffer.put("late", {"n": 0}, 899)
    assert buffer.put("edge", {"n": 0}, 900)  # Kafka refuses only `stream time - grace > timestamp`
    assert len(buffer) == 2


def test_evictions_come_in_timestamp_then_key_then_arrival_order(logged: Buffered) -> None:
    buffer = logged.buffer(grace_ms=10)
    for key, timestamp in [("b", 5), ("a", 5), ("b", 5), ("c", 3)]:
        buffer.put(key, {"k": key}, timestamp)
    buffer.put("z", {"k": "z"}, 20)
    assert [(k, t) for k, _, t in evicted(buffer)] == [("c", 3), ("a", 5), ("b", 5), ("b", 5)]


def test_changelog_records_are_kafkas_buffer_records_and_keep_the_record_context(logged: Buffered) -> None:
    """Kafka's ``RocksDBTimeOrderedKeyValueBuffer.logValue``: key = timestamp + key + seqnum; value =
    ``BufferValue`` (record context, prior, old, new value) + 8-byte buffer time; an eviction logs a tombstone."""
    buffer = logged.buffer()
    buffer.put("k", {"n": 1}, 1_000, RecordOrigin("orders", 2, 7, [("h", b"v")]))
    logged.commit()
    key, value, _ = logged.producer.sent[0]
    assert key == struct.pack(">q", 1_000) + b"k" + struct.pack(">i", 0)
    context = struct.pack(">qqi", 1_000, 7, 6) + b"orders" + struct.pack(">ii", 2, 1)
    header = struct.pack(">i", 1) + b"h" + struct.pack(">i", 1) + b"v"
    values = struct.pack(">ii", -1, -1) + struct.pack(">i", 7) + b'{"n":1}'
    assert value == context + header + values + struct.pack(">q", 0)
    out: list[BufferedRecord] = []
    buffer.put("k", {"n": 2}, 1_200)
    buffer.evict(out.append)
    assert out[0].origin == RecordOrigin("orders", 2, 7, [("h", b"v")])
    logged.commit()
    assert logged.producer.sent[-1] == (key, None, 0)


def test_a_buffer_rebuilt_from_its_store_evicts_and_refuses_as_before(logged: Buffered) -> None:
    buffer = logged.buffer()
    buffer.put("a", {"n": 1}, 1_000)
    buffer.put("b", {"n": 2}, 1_050)
    logged.commit()
    reopened = GraceBufferStore(logged.store, CHANGELOG, lambda: 0)  # a new owner of the same store folder
    rebuilt = GraceBuffer(reopened, serde_for("string"), serde_for("json"), 100)
    assert rebuilt.stream_time == 1_050
    assert not rebuilt.put("late", {"n": 0}, 900)
    rebuilt.put("c", {"n": 3}, 1_200)
    assert evicted(rebuilt) == [("a", {"n": 1}, 1_000), ("b", {"n": 2}, 1_050)]
    assert len(rebuilt) == 1


def test_a_restore_takes_the_stream_time_of_every_restored_key_tombstones_included(tmp_path: Path) -> None:
    """Kafka's segmented store advances its observed stream time with each restored record."""
    source = Buffered("memory", tmp_path)
    buffer = source.buffer(grace_ms=0)
    buffer.put("a", {"n": 1}, 1_000)
    buffer.evict(lambda record: None)  # grace 0: evicted at once, only its tombstone stays in the changelog
    source.commit()
    assert [value for _, value, _ in source.producer.sent] == [None]
    restored = Buffered("memory", tmp_path, name="restored")
    restored.logged.restore({key: (value, ts) for key, value, ts in source.producer.sent}, last_offset=0)
    assert restored.logged.stream_time == 1_000
    assert not restored.buffer(grace_ms=0).put("late", {"n": 0}, 999)
