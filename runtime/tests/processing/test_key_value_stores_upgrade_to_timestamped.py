"""A count's key-value store written by the release before timestamped stores (KIP-258) keeps counting when this
release's task opens it: a store folder with plain values (no ``value.format`` marker) is upgraded in place by the
active or standby task, each old count getting timestamp -1 (Kafka's ``RocksDBTimestampedStore`` upgrade); a
plain changelog restores each count with its changelog record's timestamp. The next records increase the old
counts (no reset, no doubling) and are emitted at the later of the record's and the stored count's timestamps."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from kafka_fakes import FakeCluster, FakeProducer, FakeRestoreConsumer
from streamapp.kafka.types import ConsumerRecord, TopicPartition
from streamapp.processing import state_manager as state_manager_module
from streamapp.processing.standby import StandbyTask
from streamapp.processing.state_manager import StateManager
from streamapp.processing.task import StreamTask, TaskId
from streamapp.serdes import serde_for
from streamapp.state.checkpoint import CHECKPOINT_FILE_NAME, OffsetCheckpoint
from streamapp.state.restore import ChangelogReader
from streamapp.state.rocksdb import RocksDBMemory, RocksDBStore
from streamapp.state.stores import TypedKeyValueStore
from streamapp.state.timestamped import FORMAT_MARKER_KEY, NO_TIMESTAMP, TIMESTAMPED_FORMAT
from streamapp.topology import TopologyDescription

APP = "app"
STORE = "counts"
TOPOLOGY = {
    "nodes": [
        {"name": "events", "type": "source", "topics": ["events"], "keySerde": "string", "valueSerde": "string"},
        {"name": "count", "type": "count", "input": "events", "store": STORE},
        {"name": "changes", "type": "to_stream", "input": "count"},
        {
            "name": "out",
            "type": "sink",
            "input": "changes",
            "topic": "counts",
            "keySerde": "string",
            "valueSerde": "long",
        },
    ],
    "stores": [{"name": STORE, "type": "key_value", "keySerde": "string", "valueSerde": "long"}],
}
DESCRIPTION = TopologyDescription.from_dict(TOPOLOGY)
(SUBTOPOLOGY,) = DESCRIPTION.subtopologies()
TASK = TaskId(0, 0)
EVENTS = TopicPartition("events", 0)
CHANGELOG = TopicPartition(f"{APP}-{STORE}-changelog", 0)
LONG = serde_for("long")
MEMORY = RocksDBMemory(8 << 20, 2 << 20)

PREVIOUS_RELEASE_RECORDS = [("a", 1_000), ("b", 2_000), ("a", 3_000)]
"""What the previous release counted, one commit each: changelog ``a=1@1000, b=1@2000, a=2@3000`` (offsets 0-2)."""
NEXT_RECORDS = [("a", 2_500), ("b", 4_000)]
"""What this release counts next: ``a`` out of order (before the old count's changelog timestamp), ``b`` after."""


def new_cluster() -> FakeCluster:
    cluster = FakeCluster()
    for topic in ("events", "counts", CHANGELOG.topic):
        cluster.create_topic(topic, 1)
    return cluster


def open_rocksdb(name: str, path: Path) -> RocksDBStore:
    return RocksDBStore(name, path, MEMORY)


def new_task(task_dir: Path, cluster: FakeCluster) -> tuple[StreamTask, FakeProducer]:
    producer = FakeProducer(cluster)
    functions = DESCRIPTION.resolve_functions()
    return StreamTask(TASK, DESCRIPTION, SUBTOPOLOGY, APP, task_dir, producer, functions, open_rocksdb), producer


def folder_format(task_dir: Path) -> tuple[bytes | None, int | None]:
    """The value format marker and the changelog offset the task's count store folder holds."""
    raw = open_rocksdb(STORE, task_dir / "rocksdb" / STORE)
    try:
        return raw.get_metadata(FORMAT_MARKER_KEY), raw.changelog_offset()
    finally:
        raw.close()


def process_and_commit(task: StreamTask, producer: FakeProducer, records: list[tuple[str, int]]) -> None:
    """Process each ``(key, timestamp)`` record and commit after it (the commit protocol's task steps)."""
    for key, timestamp in records:
        offset = task.consumed_offsets.get(EVENTS, 0)
        task.process(ConsumerRecord("events", 0, offset, key.encode(), b"x", timestamp), EVENTS)
        task.send_changelog()
        producer.flush(5)
        task.complete_commit()


@pytest.fixture
def previous_release(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, FakeCluster]:
    """The task folder and the cluster the previous release left (``write_previous_release_state``)."""
    task_dir, cluster = tmp_path / str(TASK), new_cluster()
    write_previous_release_state(task_dir, cluster, monkeypatch)
    return task_dir, cluster


def write_previous_release_state(task_dir: Path, cluster: FakeCluster, monkeypatch: pytest.MonkeyPatch) -> None:
    """The previous release's task counting ``PREVIOUS_RELEASE_RECORDS``: it kept every key-value store plain
    (``logged_store(False, ...)``, still this release's layout for non-DSL stores), so its count store folder holds
    plain longs without the format marker, its ``.checkpoint`` offset 2 and its changelog the plain counts at
    the timestamps of the records that wrote them. Closed dirty, as a killed instance leaves it."""
    with monkeypatch.context() as previous_release:
        previous_release.setattr(state_manager_module, "timestamped_stores", lambda nodes, stores: frozenset())
        task, producer = new_task(task_dir, cluster)
        task.initialize()
        task.mark_running()
        process_and_commit(task, producer, PREVIOUS_RELEASE_RECORDS)
        task.close(clean=False)
    raw = open_rocksdb(STORE, task_dir / "rocksdb" / STORE)
    assert dict(raw.items()) == {b"a": LONG.serialize(2), b"b": LONG.serialize(1)}
    raw.close()
    assert folder_format(task_dir) == (None, 2)
    assert OffsetCheckpoint(task_dir / CHECKPOINT_FILE_NAME).read() == {CHANGELOG: 2}
    logged = [(r.key, LONG.deserialize(r.value), r.timestamp) for r in cluster.records(CHANGELOG.topic)]
    assert logged == [(b"a", 1, 1_000), (b"b", 1, 2_000), (b"a", 2, 3_000)]
    cluster.topics["counts"] = [[]]  # only this release's outputs are looked at


def outputs(cluster: FakeCluster) -> list[tuple[str, int, int]]:
    """``(key, count, timestamp)`` of every record the count emitted."""
    return [(r.key.decode(), LONG.deserialize(r.value), r.timestamp) for r in cluster.records("counts") if r.key]


def stored_counts(task: StreamTask) -> dict[str, tuple[int, int]]:
    store = TypedKeyValueStore(task.stores[STORE], serde_for("string", is_key=True), LONG)
    return {key: found for key in ("a", "b") if (found := store.get_with_timestamp(key)) is not None}


def test_an_active_task_upgrades_a_plain_count_store_and_counts_on_from_its_counts(
    previous_release: tuple[Path, FakeCluster], caplog: pytest.LogCaptureFixture
) -> None:
    task_dir, cluster = previous_release
    task, producer = new_task(task_dir, cluster)

    task.initialize()

    assert task.stores[STORE].timestamped
    assert task.changelog_offsets() == {CHANGELOG: 2}  # the old offset is kept: no restore from 0
    assert "checkpoint file said" not in caplog.text
    assert stored_counts(task) == {"a": (2, NO_TIMESTAMP), "b": (1, NO_TIMESTAMP)}
    task.mark_running()
    process_and_commit(task, producer, NEXT_RECORDS)
    # max(record, -1): an upgraded count takes the next record's timestamp
    assert outputs(cluster) == [("a", 3, 2_500), ("b", 2, 4_000)]
    assert stored_counts(task) == {"a": (3, 2_500), "b": (2, 4_000)}
    task.close(clean=True)
    assert folder_format(task_dir) == (TIMESTAMPED_FORMAT, 4)


def test_a_task_restores_a_plain_changelog_with_its_record_timestamps_and_counts_on(
    previous_release: tuple[Path, FakeCluster],
) -> None:
    task_dir, cluster = previous_release
    shutil.rmtree(task_dir)  # the state folder is lost: only the previous release's changelog is left
    task, producer = new_task(task_dir, cluster)
    task.initialize()
    reader = ChangelogReader(FakeRestoreConsumer(cluster))

    assert not reader.register(str(TASK), list(task.stores.values()))
    while reader.restoring:
        reader.restore(0.1)

    assert reader.last_restored[str(TASK)] == 3
    assert task.changelog_offsets() == {CHANGELOG: 2}
    assert stored_counts(task) == {"a": (2, 3_000), "b": (1, 2_000)}
    task.mark_running()
    process_and_commit(task, producer, NEXT_RECORDS)
    # max(record, stored): the out-of-order ``a`` keeps its restored count's changelog timestamp
    assert outputs(cluster) == [("a", 3, 3_000), ("b", 2, 4_000)]
    task.close(clean=True)


def test_a_standby_upgrades_a_plain_count_store_to_the_layout_the_active_task_opens(
    previous_release: tuple[Path, FakeCluster],
) -> None:
    task_dir, cluster = previous_release
    standby = StandbyTask(StateManager(TASK, task_dir, open_rocksdb, DESCRIPTION, SUBTOPOLOGY, APP))
    standby.open()
    assert standby.stores[STORE].timestamped
    assert standby.changelog_offsets() == {CHANGELOG: 2}
    standby.close()
    assert folder_format(task_dir) == (TIMESTAMPED_FORMAT, 2)  # the folder now holds timestamped values
    task, producer = new_task(task_dir, cluster)

    task.initialize()

    assert stored_counts(task) == {"a": (2, NO_TIMESTAMP), "b": (1, NO_TIMESTAMP)}  # not converted twice
    task.mark_running()
    process_and_commit(task, producer, NEXT_RECORDS)
    assert outputs(cluster) == [("a", 3, 2_500), ("b", 2, 4_000)]
    task.close(clean=True)
