"""ChangelogReader: restore from the stored offset to the end, in atomic batches, with progress."""

from __future__ import annotations

from kafka_fakes import FakeCluster, FakeRestoreConsumer
from streamapp.kafka.types import TopicPartition
from streamapp.state.changelogging import ChangeLoggingKeyValueStore
from streamapp.state.memory import InMemoryKeyValueStore
from streamapp.state.restore import ChangelogReader

CHANGELOG = TopicPartition("app-s-changelog", 0)


def setup(records: int) -> tuple[FakeCluster, FakeRestoreConsumer, ChangelogReader]:
    cluster = FakeCluster()
    cluster.create_topic(CHANGELOG.topic, 1)
    for i in range(records):
        cluster.append(CHANGELOG.topic, 0, f"k{i % 10}".encode(), str(i).encode())
    consumer = FakeRestoreConsumer(cluster)
    return cluster, consumer, ChangelogReader(consumer, batch_size=7)


def store_with(offset: int | None, data: dict[bytes, bytes | None] | None = None) -> ChangeLoggingKeyValueStore:
    inner = InMemoryKeyValueStore("s")
    if offset is not None:
        inner.write(data or {}, offset)
    return ChangeLoggingKeyValueStore(inner, CHANGELOG, lambda: 0)


def restore_all(reader: ChangelogReader) -> list[str]:
    done: list[str] = []
    for _ in range(100):
        done += reader.restore(0.0)
        if not reader.restoring:
            break
    return done


def test_a_store_without_offset_restores_the_whole_changelog() -> None:
    _, consumer, reader = setup(30)
    store = store_with(None)
    assert reader.register("0_0", [store]) is False
    assert restore_all(reader) == ["0_0"]
    assert consumer.records_read == 30
    assert store.get(b"k3") == b"23"
    assert store.changelog_offset() == 29


def test_restore_resumes_after_the_stored_offset_and_reads_only_the_tail() -> None:
    _, consumer, reader = setup(30)
    store = store_with(24, {b"k0": b"stale"})
    reader.register("0_0", [store])
    restore_all(reader)
    assert consumer.records_read == 5
    assert store.get(b"k5") == b"25"
    assert store.get(b"k0") == b"stale"


def test_a_store_at_the_end_needs_no_restore() -> None:
    _, consumer, reader = setup(30)
    assert reader.register("0_0", [store_with(29)]) is True
    assert not reader.restoring
    assert consumer.positions == {}


def test_an_empty_changelog_needs_no_restore() -> None:
    _, _, reader = setup(0)
    assert reader.register("0_0", [store_with(None)]) is True


def test_tombstones_delete_restored_keys() -> None:
    cluster, _, reader = setup(3)
    cluster.append(CHANGELOG.topic, 0, b"k1", None)
    store = store_with(None)
    reader.register("0_0", [store])
    restore_all(reader)
    assert store.get(b"k1") is None
    assert store.get(b"k2") == b"2"


def test_progress_counts_restored_and_remaining_records() -> None:
    _, _, reader = setup(30)
    reader.register("0_0", [store_with(None)])
    reader.restore(0.0)
    progress = reader.progress()["0_0"]
    assert (progress.restored, progress.remaining) == (7, 23)
    assert reader.records_restored == 7


def test_each_batch_is_applied_with_its_offset_so_an_interrupted_restore_resumes() -> None:
    _, consumer, reader = setup(30)
    store = store_with(None)
    reader.register("0_0", [store])
    reader.restore(0.0)
    assert store.changelog_offset() == 6
    reader.unregister("0_0")
    assert consumer.positions == {}
    second = ChangelogReader(consumer, batch_size=100)
    second.register("0_0", [store])
    restore_all(second)
    assert store.changelog_offset() == 29
    assert consumer.records_read == 30
