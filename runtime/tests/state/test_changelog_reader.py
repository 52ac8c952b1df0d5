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


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def two_stores(clock: Clock) -> tuple[ChangelogReader, ChangeLoggingKeyValueStore, ChangeLoggingKeyValueStore]:
    """Task 0_0 with store ``a`` (30 changelog records) and ``b`` (12); polls of at most 20 records."""
    cluster = FakeCluster()
    stores = []
    for name, records in (("a", 30), ("b", 12)):
        changelog = TopicPartition(f"app-{name}-changelog", 0)
        cluster.create_topic(changelog.topic, 1)
        for i in range(records):
            cluster.append(changelog.topic, 0, f"k{i}".encode(), str(i).encode())
        stores.append(ChangeLoggingKeyValueStore(InMemoryKeyValueStore(name), changelog, lambda: 0))
    reader = ChangelogReader(FakeRestoreConsumer(cluster), batch_size=20, clock=clock)
    reader.register("0_0", stores)
    return reader, stores[0], stores[1]


def test_progress_names_each_store_with_its_changelog_and_sums_them_for_the_task() -> None:
    clock = Clock()
    reader, _, _ = two_stores(clock)
    reader.restore(0.0)  # 20 records of a's changelog, none of b's yet
    progress = reader.progress()["0_0"]
    assert [(s.store, str(s.changelog), s.restored, s.remaining) for s in progress.stores] == [
        ("a", "app-a-changelog-0", 20, 10),
        ("b", "app-b-changelog-0", 0, 12),
    ]
    assert (progress.restored, progress.remaining) == (20, 22)


def test_each_store_has_its_own_rate_over_the_recent_window_and_its_time_left() -> None:
    clock = Clock()
    reader, _, _ = two_stores(clock)
    assert [s.records_per_second for s in reader.progress()["0_0"].stores] == [None, None]  # no time passed
    reader.restore(0.0)
    clock.now += 4.0
    a, b = reader.progress()["0_0"].stores
    assert (a.records_per_second, a.seconds_left) == (5.0, 2.0)  # 20 records in 4 s, 10 left
    assert (b.records_per_second, b.seconds_left) == (0.0, None)  # nothing restored yet: no estimate
    reader.restore(0.0)  # a's last 10, b's first 10
    clock.now += 1.0
    a, b = reader.progress()["0_0"].stores
    assert (a.restored, a.remaining, a.records_per_second, a.seconds_left) == (30, 0, 6.0, 0.0)
    assert (b.restored, b.remaining, b.records_per_second, b.seconds_left) == (10, 2, 2.0, 1.0)


def test_a_completed_restore_keeps_the_counts_of_the_stores_it_restored() -> None:
    clock = Clock()
    reader, _, _ = two_stores(clock)
    assert restore_all(reader) == ["0_0"]
    assert reader.progress() == {}
    assert [(s.store, s.restored, s.remaining) for s in reader.last_restored_stores["0_0"]] == [
        ("a", 30, 0),
        ("b", 12, 0),
    ]
    assert reader.last_restored["0_0"] == 42


def test_a_store_already_at_its_end_is_listed_with_nothing_left_and_not_kept_after_the_restore() -> None:
    _, _, reader = setup(30)
    at_end = store_with(29)
    fresh = ChangeLoggingKeyValueStore(InMemoryKeyValueStore("t"), CHANGELOG, lambda: 0)
    reader.register("0_0", [at_end, fresh])
    stores = reader.progress()["0_0"].stores
    assert [(s.store, s.restored, s.remaining, s.seconds_left) for s in stores] == [
        ("s", 0, 0, 0.0),
        ("t", 0, 30, None),
    ]
    restore_all(reader)
    assert [s.store for s in reader.last_restored_stores["0_0"]] == ["t"]
