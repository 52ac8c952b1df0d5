"""ChangeLoggingKeyValueStore: buffered writes, one changelog record per key, apply after acknowledgement."""

from __future__ import annotations

import struct
import tracemalloc
from collections.abc import Callable

import pytest
from streamapp.kafka.types import TopicPartition
from streamapp.state.changelogging import ChangeLoggingKeyValueStore
from streamapp.state.memory import InMemoryKeyValueStore

CHANGELOG = TopicPartition("app-s-changelog", 3)


class RecordingProducer:
    def __init__(self) -> None:
        self.sent: list[tuple[str, int | None, bytes | None, bytes | None, int]] = []
        self._callbacks: list[Callable[[TopicPartition, int], None] | None] = []
        self.next_offset = 100

    def send(self, topic, key, value, timestamp, partition=None, on_delivery=None):
        self.sent.append((topic, partition, key, value, timestamp))
        self._callbacks.append(on_delivery)

    def acknowledge(self) -> None:
        for callback in self._callbacks:  # in send order, as an idempotent producer acknowledges one partition
            if callback is not None:
                callback(CHANGELOG, self.next_offset)
            self.next_offset += 1
        self._callbacks.clear()


def make_store(now: list[int]) -> tuple[ChangeLoggingKeyValueStore, InMemoryKeyValueStore]:
    inner = InMemoryKeyValueStore("s")
    return ChangeLoggingKeyValueStore(inner, CHANGELOG, lambda: now[0]), inner


def test_reads_see_buffered_writes_before_they_are_applied() -> None:
    store, inner = make_store([5])
    store.put(b"a", b"1")
    assert store.get(b"a") == b"1"
    assert inner.get(b"a") is None
    store.put(b"a", None)
    assert store.get(b"a") is None


def test_commit_logs_the_latest_value_per_key_to_the_task_partition() -> None:
    now = [10]
    store, _ = make_store(now)
    producer = RecordingProducer()
    store.put(b"a", b"1")
    now[0] = 11
    store.put(b"a", b"2")
    store.put(b"b", None)
    store.send_changelog(producer)
    assert producer.sent == [
        ("app-s-changelog", 3, b"a", b"2", 11),
        ("app-s-changelog", 3, b"b", None, 11),
    ]


def test_apply_writes_the_buffer_with_the_last_acknowledged_offset() -> None:
    store, inner = make_store([0])
    producer = RecordingProducer()
    inner.write({b"b": b"old"}, changelog_offset=99)
    store.put(b"a", b"1")
    store.put(b"b", None)
    store.send_changelog(producer)
    producer.acknowledge()
    store.apply()
    assert inner.get(b"a") == b"1" and inner.get(b"b") is None
    assert inner.changelog_offset() == 101
    assert not store.has_pending and store.pending_bytes == 0


def test_only_the_last_changelog_record_of_a_commit_asks_for_its_offset() -> None:
    """A delivery callback per record cost the windowed count a tenth of its time; the producer is idempotent, so a
    partition's records are acknowledged in order and the last one's offset is the batch's."""
    store, _ = make_store([0])
    producer = RecordingProducer()
    for i in range(5):
        store.put(b"k%d" % i, b"v")
    store.send_changelog(producer)
    assert len(producer.sent) == 5
    assert [callback is not None for callback in producer._callbacks] == [False, False, False, False, True]


def test_apply_before_the_changelog_is_acknowledged_is_refused() -> None:
    store, _ = make_store([0])
    store.put(b"a", b"1")
    store.send_changelog(RecordingProducer())
    with pytest.raises(RuntimeError, match="acknowledged"):
        store.apply()


def test_discard_drops_uncommitted_writes() -> None:
    store, inner = make_store([0])
    inner.write({b"a": b"committed"}, changelog_offset=1)
    store.put(b"a", b"uncommitted")
    store.discard()
    assert store.get(b"a") == b"committed"
    assert store.changelog_offset() == 1


def test_pending_bytes_grow_with_writes() -> None:
    store, _ = make_store([0])
    store.put(b"key", b"value")
    first = store.pending_bytes
    store.put(b"key2", b"value")
    assert 0 < first < store.pending_bytes


def test_overwrites_do_not_grow_pending_bytes() -> None:
    store, _ = make_store([0])
    store.put(b"key", b"value")
    first = store.pending_bytes
    store.put(b"key", b"other")
    assert store.pending_bytes == first


def test_pending_bytes_account_for_pythons_memory_of_the_buffer() -> None:
    """statestore.cache.max.bytes bounds what the buffer really holds: counting only key + value lengths
    let a 10 MiB cache hold ~60 MB of Python objects with 8-byte keys and values."""
    store, _ = make_store([0])
    count = 50_000
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for i in range(count):
            store.put(b"k%07d" % i, struct.pack(">q", i))
        used = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert 0.8 * used <= store.pending_bytes <= 1.5 * used
