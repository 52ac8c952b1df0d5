"""A stream thread wired to the Kafka fakes and real RocksDB stores in a temporary state dir.

The count topology: ``events`` (key string, value JSON ``{"n": int, "color": str}``) → keep even ``n`` →
re-key by color → repartition ``per-color`` → count in store ``counts`` → ``color-counts`` (long).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kafka_fakes import FakeCluster, FakeConsumer, FakeProducer, FakeRestoreConsumer
from streamapp.config import StreamsConfig
from streamapp.kafka.types import ProducerClient, TopicPartition
from streamapp.processing.state_manager import StoreFactory
from streamapp.processing.status import WorkerStatus
from streamapp.processing.stream_thread import StreamThread
from streamapp.serdes import serde_for
from streamapp.state.rocksdb import RocksDBMemory, RocksDBStore
from streamapp.testing.cluster import InMemoryCluster, InMemoryConsumer, InMemoryRestoreConsumer
from streamapp.topology import TopologyDescription

APP = "app"
PARTITIONS = 2
COUNT_TOPOLOGY: dict[str, Any] = {
    "nodes": [
        {"name": "events", "type": "source", "topics": ["events"], "keySerde": "string", "valueSerde": "json"},
        {"name": "even", "type": "filter", "input": "events", "predicate": "counting_functions:is_even"},
        {"name": "by-color", "type": "select_key", "input": "even", "mapper": "counting_functions:color"},
        {"name": "per-color", "type": "repartition", "input": "by-color", "keySerde": "string", "valueSerde": "json"},
        {"name": "count", "type": "count", "input": "per-color", "store": "counts"},
        {"name": "changes", "type": "to_stream", "input": "count"},
        {
            "name": "out",
            "type": "sink",
            "input": "changes",
            "topic": "color-counts",
            "keySerde": "string",
            "valueSerde": "long",
        },
    ],
    "stores": [{"name": "counts", "type": "key_value", "keySerde": "string", "valueSerde": "long"}],
}
EVENTS = "events"
REPARTITION = f"{APP}-per-color-repartition"
CHANGELOG = f"{APP}-counts-changelog"
OUTPUT = "color-counts"


def new_cluster() -> FakeCluster:
    cluster = FakeCluster()
    for topic in (EVENTS, REPARTITION, CHANGELOG, OUTPUT):
        cluster.create_topic(topic, PARTITIONS)
    return cluster


def produce_events(cluster: FakeCluster, events: list[tuple[int, str]], partition: int | None = None) -> None:
    """Append ``(n, color)`` events, keyed ``e<i>``, round-robin over partitions unless one is given."""
    for i, (n, color) in enumerate(events):
        p = partition if partition is not None else i % PARTITIONS
        value = json.dumps({"n": n, "color": color}).encode()
        cluster.append(EVENTS, p, f"e{i}".encode(), value, timestamp=1_000 + i)


def latest_counts(cluster: FakeCluster, topic: str = OUTPUT) -> dict[str, int]:
    """The last value per key in ``topic`` (a long-valued output or changelog)."""
    longs = serde_for("long")
    counts: dict[str, int] = {}
    for record in cluster.records(topic):
        assert record.key is not None
        counts[record.key.decode()] = longs.deserialize(record.value)
    return counts


class ThreadHarness:
    """One stream thread over fakes. ``store_factory`` may be replaced before ``start``."""

    def __init__(self, cluster: FakeCluster, state_dir: Path, **config: Any) -> None:
        self.cluster = cluster
        self.config = StreamsConfig.from_mapping(
            {"application.id": APP, "bootstrap.servers": "fake:9092", "state.dir": str(state_dir), **config}
        )
        self.description = TopologyDescription.from_dict(COUNT_TOPOLOGY)
        self.consumer = FakeConsumer(cluster)
        self.producer = FakeProducer(cluster)
        self.restore_consumer = FakeRestoreConsumer(cluster)
        self.memory = RocksDBMemory(8 << 20, 2 << 20)
        self.store_factory: StoreFactory = lambda name, path: RocksDBStore(name, path, self.memory)
        self.reports: list[WorkerStatus] = []
        self.thread: StreamThread | None = None

    def start(self, **thread_options: Any) -> StreamThread:
        """Build and subscribe the thread; ``thread_options`` go to ``StreamThread`` (e.g. ``clock_ms``)."""
        self.thread = StreamThread(
            index=0,
            config=self.config,
            description=self.description,
            functions=self.description.resolve_functions(),
            consumer=self.consumer,
            producer=self.producer,
            restore_consumer=self.restore_consumer,
            store_factory=lambda name, path: self.store_factory(name, path),
            report=self.reports.append,
            **thread_options,
        )
        self.consumer.subscribe(sorted(self.consumer.topics or []), self.thread.tasks)
        return self.thread

    def assign_all(self) -> None:
        self.consumer.assign([TopicPartition(t, p) for t in (EVENTS, REPARTITION) for p in range(PARTITIONS)])

    def run(self, iterations: int = 20, until: Callable[[], bool] | None = None) -> None:
        assert self.thread is not None
        for _ in range(iterations):
            self.thread.run_once()
            if until is not None and until():
                return


def in_memory_thread(
    cluster: InMemoryCluster,
    config: StreamsConfig,
    description: TopologyDescription,
    producer_factory: Callable[[], ProducerClient],
) -> StreamThread:
    """A started stream thread of ``description`` over the in-memory Kafka of ``streamapp.testing`` (the single member
    of group ``application.id``) with RocksDB stores; ``producer_factory`` makes its producer, again after fencing."""
    memory = RocksDBMemory(8 << 20, 2 << 20)
    thread = StreamThread(
        index=0,
        config=config,
        description=description,
        functions=description.resolve_functions(),
        consumer=InMemoryConsumer(cluster, group_id=config.application_id),
        producer=producer_factory(),
        restore_consumer=InMemoryRestoreConsumer(cluster),
        store_factory=lambda name, path: RocksDBStore(name, path, memory),
        report=lambda status: None,
        producer_factory=producer_factory,
    )
    assert thread.start(lambda: False)
    return thread
