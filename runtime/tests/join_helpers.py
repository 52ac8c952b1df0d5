"""Builds stream-stream join processors over in-memory logged stores, for unit and property tests, and a stream-table
join task (``stream_table_join_task``) over RocksDB."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from kafka_fakes import FakeCluster, FakeProducer
from streamapp import StreamsBuilder
from streamapp.kafka.types import TopicPartition
from streamapp.processing.task import StreamTask, TaskId
from streamapp.processors.base import ProcessorMetrics
from streamapp.processors.joins.stream_stream import OuterJoinBuffer, StreamStreamJoinProcessor
from streamapp.serdes import serde_for
from streamapp.state.changelogging import ChangeLoggingKeyValueStore
from streamapp.state.memory import InMemoryKeyValueStore
from streamapp.state.record_cache import ThreadCache
from streamapp.state.rocksdb import RocksDBMemory, RocksDBStore
from streamapp.state.window_store import WindowStore
from streamapp.topology.windows import JoinWindowsSpec


class Collect:
    def __init__(self) -> None:
        self.records: list[tuple[Any, Any, int]] = []

    def process(self, key: Any, value: Any, timestamp: int) -> None:
        self.records.append((key, value, timestamp))


def pair(left: Any, right: Any) -> list[Any]:
    return [left, right]


def logged(name: str) -> ChangeLoggingKeyValueStore:
    return ChangeLoggingKeyValueStore(InMemoryKeyValueStore(name), TopicPartition(f"{name}-changelog", 0), lambda: 0)


def committer(stores: list[ChangeLoggingKeyValueStore]) -> Callable[[], None]:
    """A function that commits ``stores`` as a task commit does: changelog sent and acknowledged, then the
    buffered writes applied to the persistent stores."""
    cluster = FakeCluster()
    for store in stores:
        cluster.create_topic(store.changelog.topic, 1)
    producer = FakeProducer(cluster)

    def commit() -> None:
        for store in stores:
            store.send_changelog(producer)
        producer.flush(1.0)
        for store in stores:
            store.apply()

    return commit


def stream_stream_join(
    join: str, before: int, after: int, grace: int = 0, logged_stores: list[ChangeLoggingKeyValueStore] | None = None
) -> tuple[StreamStreamJoinProcessor, Collect, ProcessorMetrics]:
    """A join of sides ``"l"`` and ``"r"`` (string keys, JSON values) emitting ``[left, right]`` into a Collect.

    ``logged_stores``, when given, receives the join's logged stores (to commit them with ``committer``)."""
    created: list[ChangeLoggingKeyValueStore] = [] if logged_stores is None else logged_stores

    def logged_store(name: str) -> ChangeLoggingKeyValueStore:
        store = logged(name)
        created.append(store)
        return store

    windows = JoinWindowsSpec(before_ms=before, after_ms=after, grace_ms=grace)
    retention = max(1, windows.store_retention_ms())

    def window_store(name: str) -> WindowStore:
        return WindowStore(
            logged_store(name),
            serde_for("string"),
            serde_for("json"),
            retention_ms=retention,
            window_size_ms=windows.size,
            retain_duplicates=True,
        )

    outer = None
    if join != "inner":
        json = serde_for("json")
        outer = OuterJoinBuffer(logged_store("outer"), serde_for("string"), json, json)
    out, metrics = Collect(), ProcessorMetrics()
    processor = StreamStreamJoinProcessor(
        "l", "r", pair, join, windows, (window_store("left"), window_store("right")), outer, [out], metrics
    )
    return processor, out, metrics


APP = "app"
MEMORY = RocksDBMemory(8 << 20, 2 << 20)
TABLE, STREAM, OUTPUT = "carriers", "flights", "joined"
JOIN_STORE_CHANGELOG = f"{APP}-with-airline-store-changelog"


def stream_table_join_task(
    tmp_path: Path,
    cache: ThreadCache | None,
    shape: Callable[[Any], Any] = lambda table: table,
    join: str = "join",
    max_task_idle_ms: int = 0,
) -> tuple[StreamTask, FakeCluster, FakeProducer]:
    """A running task of ``flights`` (string values) joined (``join``: ``join`` or ``left_join``) with the table of
    ``carriers`` after ``shape`` (``KTable`` -> ``KTable``) into ``joined`` as ``"<flight> by <airline>"``, its stores
    in RocksDB under ``tmp_path``; ``cache``: the record cache (``None``: off)."""
    builder = StreamsBuilder()
    carriers = shape(builder.table(TABLE, key_serde="string", value_serde="string", name="carriers"))
    stream = builder.stream(STREAM, key_serde="string", value_serde="string", name="flights")
    joined = getattr(stream, join)(carriers, lambda flight, airline: f"{flight} by {airline}", name="with-airline")
    joined.to(OUTPUT, key_serde="string", value_serde="string", name="out")
    description = builder.build()
    (subtopology,) = description.subtopologies()
    cluster = FakeCluster()
    for topic in (TABLE, STREAM, OUTPUT, f"{APP}-carriers-store-changelog", JOIN_STORE_CHANGELOG):
        cluster.create_topic(topic, 1)
    producer = FakeProducer(cluster)
    task = StreamTask(
        TaskId(0, 0),
        description,
        subtopology,
        APP,
        tmp_path / "0_0",
        producer,
        description.resolve_functions(),
        lambda name, path: RocksDBStore(name, path, MEMORY),
        max_task_idle_ms=max_task_idle_ms,
        record_cache=cache,
    )
    task.initialize()
    task.mark_running()
    return task, cluster, producer
