"""A window store folder written by the release before segmented stores (Kafka's window layout straight in
RocksDB) keeps its windows when this release's active or standby task opens it: the task migrates it to the
segmented layout once, and a windowed count continues from the old counts (an upgrade loses no state)."""

from __future__ import annotations

import struct
from pathlib import Path

from kafka_fakes import FakeCluster, FakeProducer
from streamapp.kafka.types import ConsumerRecord, TopicPartition
from streamapp.processing.standby import StandbyTask
from streamapp.processing.state_manager import StateManager
from streamapp.processing.task import StreamTask, TaskId
from streamapp.serdes import serde_for
from streamapp.state.rocksdb import RocksDBMemory, RocksDBStore
from streamapp.state.segments import SEGMENTS_KEY, SegmentedBytesStore
from streamapp.topology import TopologyDescription

APP = "app"
STORE = "per-minute-store"
TOPOLOGY = {
    "nodes": [
        {"name": "events", "type": "source", "topics": ["events"], "keySerde": "string", "valueSerde": "string"},
        {
            "name": "per-minute",
            "type": "windowed_count",
            "input": "events",
            "store": STORE,
            "windows": {"type": "tumbling", "sizeMs": 60_000, "graceMs": 0},
        },
        {"name": "changes", "type": "to_stream", "input": "per-minute"},
        {
            "name": "out",
            "type": "sink",
            "input": "changes",
            "topic": "counts",
            "keySerde": "windowed:string:60000",
            "valueSerde": "long",
        },
    ],
    "stores": [
        {
            "name": STORE,
            "type": "window",
            "keySerde": "string",
            "valueSerde": "long",
            "retentionMs": 60_000,
            "windowSizeMs": 60_000,
        }
    ],
}
TASK = TaskId(0, 0)
LONG = serde_for("long")
WINDOWED = serde_for("windowed:string:60000")
MEMORY = RocksDBMemory(8 << 20, 2 << 20)


def write_previous_release_store(task_dir: Path) -> None:
    """The previous release's window store: Kafka's ``key + start + seqnum`` keys and ``timestamp + value``
    values directly in RocksDB, at changelog offset 1: key ``a`` counted 2 in window [0, 60 s), ``b`` 1."""
    old = RocksDBStore(STORE, task_dir / "rocksdb" / STORE, MEMORY)
    old.write(
        {
            b"a" + struct.pack(">qi", 0, 0): struct.pack(">q", 30_000) + LONG.serialize(2),
            b"b" + struct.pack(">qi", 0, 0): struct.pack(">q", 20_000) + LONG.serialize(1),
        },
        1,
    )
    old.close()


def new_task(task_dir: Path, cluster: FakeCluster) -> tuple[StreamTask, FakeProducer]:
    description = TopologyDescription.from_dict(TOPOLOGY)
    (subtopology,) = description.subtopologies()
    producer = FakeProducer(cluster)
    task = StreamTask(
        TASK,
        description,
        subtopology,
        APP,
        task_dir,
        producer,
        description.resolve_functions(),
        lambda name, path: RocksDBStore(name, path, MEMORY),
    )
    return task, producer


def count_after_one_more_record(task: StreamTask, producer: FakeProducer, cluster: FakeCluster) -> int:
    """Process a record of key ``a`` at 40 s (window [0, 60 s)) and return the count it emits."""
    task.mark_running()
    task.process(ConsumerRecord("events", 0, 0, b"a", b"x", 40_000), TopicPartition("events", 0))
    producer.flush(5)
    (record,) = cluster.records("counts")
    assert WINDOWED.deserialize(record.key).key == "a"
    count: int = LONG.deserialize(record.value)
    return count


def new_cluster() -> FakeCluster:
    cluster = FakeCluster()
    for topic in ("events", "counts", f"{APP}-{STORE}-changelog"):
        cluster.create_topic(topic, 1)
    return cluster


def test_an_active_task_migrates_a_pre_segments_window_store_and_counts_on_from_its_windows(tmp_path: Path) -> None:
    task_dir = tmp_path / str(TASK)
    write_previous_release_store(task_dir)
    cluster = new_cluster()
    task, producer = new_task(task_dir, cluster)
    task.initialize()
    segmented = task.stores[STORE].inner
    assert isinstance(segmented, SegmentedBytesStore)
    assert segmented.migrated_entries == 2
    assert task.changelog_offsets() == {TopicPartition(f"{APP}-{STORE}-changelog", 0): 1}  # no restore from 0
    assert count_after_one_more_record(task, producer, cluster) == 3
    task.close(clean=False)


def test_a_standby_migrates_a_pre_segments_window_store_to_the_layout_the_active_task_opens(tmp_path: Path) -> None:
    task_dir = tmp_path / str(TASK)
    write_previous_release_store(task_dir)
    description = TopologyDescription.from_dict(TOPOLOGY)
    (subtopology,) = description.subtopologies()
    standby = StandbyTask(
        StateManager(TASK, task_dir, lambda name, path: RocksDBStore(name, path, MEMORY), description, subtopology, APP)
    )
    standby.open()
    migrated = standby.stores[STORE].inner
    assert isinstance(migrated, SegmentedBytesStore)
    assert migrated.migrated_entries == 2
    standby.close()
    raw = RocksDBStore(STORE, task_dir / "rocksdb" / STORE, MEMORY)
    assert raw.get(SEGMENTS_KEY) is not None  # the folder now holds the segmented layout
    raw.close()
    cluster = new_cluster()
    task, producer = new_task(task_dir, cluster)
    task.initialize()
    reopened = task.stores[STORE].inner
    assert isinstance(reopened, SegmentedBytesStore)
    assert reopened.migrated_entries == 0  # the standby's layout is the active's: nothing to migrate again
    assert count_after_one_more_record(task, producer, cluster) == 3
    task.close(clean=False)
