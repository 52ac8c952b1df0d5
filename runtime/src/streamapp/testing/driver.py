"""TopologyTestDriver: run a topology in-process, without a broker, on the production processing core.

Follows Kafka's ``org.apache.kafka.streams.TopologyTestDriver``: pipe records into input topics, read what
the topology produced from output topics, inspect state stores, and move wall-clock time by hand. Unlike
Kafka's driver (one task for the whole topology) this one keeps the runtime's task model: one task per
sub-topology and partition, records routed to partitions by murmur2 like a producer, repartition topics
carried in-process. What runs is the real thing:

- a real ``StreamThread`` (``streamapp.processing.stream_thread``) with its ``TaskManager``: tasks are
  created, initialized, restored, routed to and committed by exactly the code that runs in a worker process;
- real ``StreamTask``s, processors and changelogging stores (RocksDB in a temporary state dir by default,
  or the in-memory engine with ``store_backend="memory"``);
- only the Kafka seam is replaced: ``streamapp.testing.cluster`` implements the consumer, producer and
  restore-consumer protocols over in-memory topics, so changelog and repartition records are captured
  (and readable through ``create_output_topic``) too.

Processing is synchronous and one record at a time (the driver sets ``max.poll.records=1``,
``commit.interval.ms=0``): ``pipe_input`` returns only when the record and every record it caused
(through repartition topics or a sink into a topic the topology reads) were processed and committed, in
the order they were produced.
"""

from __future__ import annotations

import shutil
import tempfile
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

import yaml

from streamapp.config import StreamsConfig
from streamapp.dsl import StreamsBuilder
from streamapp.dsl.builder import with_default_serdes
from streamapp.kafka.schema_registry import configure_registry_serdes
from streamapp.kafka.types import ConsumerRecord, Headers
from streamapp.processing.state_manager import StoreFactory
from streamapp.processing.status import ThreadMetrics
from streamapp.processing.stream_thread import StreamThread, source_topic_subtopologies
from streamapp.processing.task import StreamTask
from streamapp.processors import source_node_names
from streamapp.serdes import Serde, serde_for
from streamapp.state.checkpoint import release_scratch_state_dir, scratch_state_dir
from streamapp.state.memory import InMemoryKeyValueStore
from streamapp.state.rocksdb import RocksDBMemory, RocksDBStore
from streamapp.state.stores import PersistentKeyValueStore
from streamapp.testing.cluster import (
    InMemoryCluster,
    InMemoryConsumer,
    InMemoryGlobalConsumer,
    InMemoryProducer,
    InMemoryRestoreConsumer,
)
from streamapp.testing.metrics import MetricName, NodeCount, NodeLateness, TaskCounts, driver_metrics
from streamapp.testing.stores import KeyValueStoreView, SessionStoreView, VersionedStoreView, WindowStoreView
from streamapp.testing.topics import TestInputTopic, TestOutputTopic
from streamapp.topology import (
    GlobalTableNode,
    RepartitionNode,
    SinkNode,
    StoreSpec,
    TopologyDescription,
    TopologyError,
)

__all__ = ["DEFAULT_APPLICATION_ID", "TopologyTestDriver", "declared_serdes"]

DEFAULT_APPLICATION_ID = "topology-test-driver"
"""``application.id`` when the config has none (it prefixes internal topic names)."""

_DEFAULT_BOOTSTRAP = "topology-test-driver:9092"
_FORCED_CONFIG: dict[str, Any] = {"commit.interval.ms": 0, "max.poll.records": 1, "poll.ms": 0}
_MAX_IDLE_ITERATIONS = 1000

SerdeArg = str | Serde | None
"""A serde name (``"string"``), a serde object, or ``None``: take the serde the topology declares."""

TopologyArg = StreamsBuilder | TopologyDescription | Mapping[str, Any] | str
"""A DSL builder, a description, its document form (dict) or its YAML text."""


class TopologyTestDriver:
    """Runs ``topology`` in-process (see the module docstring). Use as a context manager or call ``close``.

    ``config``: Kafka Streams keys (``streamapp.config.StreamsConfig``); ``application.id`` defaults to
    ``DEFAULT_APPLICATION_ID``, ``state.dir`` to a temporary folder removed by ``close``. The driver
    overrides ``commit.interval.ms``, ``max.poll.records`` and ``poll.ms``.
    ``initial_wall_clock_ms``: the driver's wall-clock time (epoch ms) at start.
    ``partitions``: partition count per topic (external source and sink topics); 1 for any topic not
    listed. Internal topics get the counts the topology implies (``TopologyDescription.internal_topics``).
    ``store_backend``: ``"rocksdb"`` (the production engine, in ``state.dir``) or ``"memory"``.

    Raises TopologyError when the topology cannot run (e.g. co-partitioning violated by ``partitions``),
    ConfigError for an invalid config.
    """

    def __init__(
        self,
        topology: TopologyArg,
        config: Mapping[str, Any] | None = None,
        initial_wall_clock_ms: int = 0,
        *,
        partitions: Mapping[str, int] | None = None,
        store_backend: Literal["rocksdb", "memory"] = "rocksdb",
    ) -> None:
        settings: dict[str, Any] = {"application.id": DEFAULT_APPLICATION_ID, "bootstrap.servers": _DEFAULT_BOOTSTRAP}
        settings.update(config or {})
        self.description = _description_of(topology, settings)
        self._wall_clock_ms = initial_wall_clock_ms
        self._initial_wall_clock_ms = initial_wall_clock_ms
        self._closed = False
        self._failed = False
        self._read_positions: dict[str, int] = {}
        self._temp_dir: str | None = None
        self._app_state_dir: Path | None = None
        if "state.dir" not in settings:
            self._temp_dir = tempfile.mkdtemp(prefix="streamapp-test-driver-")
            settings["state.dir"] = self._temp_dir
        settings.update(_FORCED_CONFIG)
        try:
            self._open(settings, dict(partitions or {}), store_backend)
        except BaseException:
            self._remove_state()
            raise
        try:
            self._start()
            self._run_until_idle()
        except BaseException:
            self._closed = True
            try:
                self._thread.close(clean=False)
            finally:
                self._remove_state()
            raise

    def _open(self, settings: dict[str, Any], partitions: dict[str, int], store_backend: str) -> None:
        """Validate the config, mark the state scratch, create the topics, the clients and the stream thread."""
        self.config = StreamsConfig.from_mapping(settings)
        self.application_id = self.config.application_id
        self._app_state_dir = Path(self.config.state_dir) / self.application_id
        scratch_state_dir(self._app_state_dir)
        configure_registry_serdes(self.config, self.description)  # avro/protobuf serdes (schema.registry.url)
        self.cluster = InMemoryCluster()
        self._create_topics(partitions)
        self._group_topics = set(source_topic_subtopologies(self.description, self.application_id))
        self._global_topics = {node.topic for node in self.description.nodes if isinstance(node, GlobalTableNode)}
        self._input_topics = self._group_topics | self._global_topics
        self._input_producer = InMemoryProducer(self.cluster)
        """Produces what the test pipes in (an external, non-transactional producer)."""
        self._consumer = InMemoryConsumer(self.cluster, group_id=self.application_id)
        self._restore_consumer = InMemoryRestoreConsumer(self.cluster)
        self._global_consumer = InMemoryGlobalConsumer(self.cluster)
        transactional_id = f"{self.application_id}-topology-test-driver-0"
        self._thread = StreamThread(
            index=0,
            config=self.config,
            description=self.description,
            functions=self.description.resolve_functions(),
            consumer=self._consumer,
            producer=InMemoryProducer(self.cluster, transactional_id),
            restore_consumer=self._restore_consumer,
            store_factory=self._store_factory(store_backend),
            report=lambda status: None,
            clock_ms=lambda: self._wall_clock_ms,
            producer_factory=lambda: InMemoryProducer(self.cluster, transactional_id),
            global_consumer=self._global_consumer if self._global_topics else None,
        )

    # -- lifecycle ---------------------------------------------------------------------------------

    def __enter__(self) -> TopologyTestDriver:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Commit and close every task (without commit after a processing failure), then remove the driver's
        state: ``<state.dir>/<application.id>``, and the temporary ``state.dir`` the driver made (Kafka's
        driver calls ``stateDirectory.clean()``), so a later driver on the same ``state.dir`` starts empty."""
        if self._closed:
            return
        self._closed = True
        try:
            self._thread.close(clean=not self._failed)
        finally:
            self._remove_state()

    # -- topics ------------------------------------------------------------------------------------

    def create_input_topic(
        self,
        topic: str,
        key_serde: SerdeArg = None,
        value_serde: SerdeArg = None,
        *,
        start_timestamp_ms: int | None = None,
        auto_advance_ms: int = 0,
    ) -> TestInputTopic:
        """A handle to pipe records into ``topic``, a topic the topology reads.

        Serdes default to the ones the topology's source node declares for ``topic``; records piped
        without a timestamp are stamped ``start_timestamp_ms`` (default: the current wall-clock time)
        plus ``auto_advance_ms`` per record. Raises ValueError for a topic the topology does not read,
        or when the serdes cannot be inferred.
        """
        self._check_open()
        if topic not in self._input_topics:
            raise ValueError(
                f"topic '{topic}' is not read by the topology; input topics: {', '.join(sorted(self._input_topics))}"
            )
        key, value = self._serdes(topic, key_serde, value_serde, reading=True)
        start = self._wall_clock_ms if start_timestamp_ms is None else start_timestamp_ms
        return TestInputTopic(self, topic, key, value, start, auto_advance_ms)

    def create_output_topic(
        self, topic: str, key_serde: SerdeArg = None, value_serde: SerdeArg = None
    ) -> TestOutputTopic:
        """A handle to read what the topology produced to ``topic``: any topic name (a sink's, a repartition or
        changelog topic, a topic a ``topic_extractor`` picks, or one nothing writes: reading it finds it empty).

        Serdes default to the ones the topology declares for writing ``topic`` (sink node, repartition
        node or store); for a topic no node writes, to those of the source reading it, else to those of the
        topology's ``topic_extractor`` sinks, else to ``bytes``. Raises ValueError when the declared serdes disagree.
        """
        self._check_open()
        key, value = self._serdes(topic, key_serde, value_serde, reading=False)
        self._read_positions.setdefault(topic, 0)
        return TestOutputTopic(self, topic, key, value)

    def produced_topics(self) -> list[str]:
        """Every topic with at least one record (inputs, outputs and internal topics)."""
        return [topic for topic in self.cluster.topics() if self.cluster.visible_count(topic)]

    # -- state and time ----------------------------------------------------------------------------

    def get_key_value_store(self, name: str) -> KeyValueStoreView:
        """A typed read view of key-value store ``name`` across all tasks. Raises KeyError if unknown or
        not a key-value store."""
        spec = self._store_spec(name, "key_value")

        def instances() -> list[tuple[Any, PersistentKeyValueStore]]:
            return [(task.stores[name], task.stores[name].inner) for task in self.tasks() if name in task.stores]

        topic = self.description.changelog_topic(self.application_id, name)
        key_serde, value_serde = serde_for(spec.key_serde, topic, is_key=True), serde_for(spec.value_serde, topic)
        return KeyValueStoreView(name, key_serde, value_serde, instances)

    def get_versioned_store(self, name: str) -> VersionedStoreView:
        """A read view of versioned store ``name`` across all tasks (``get(key, as_of)``, Kafka's
        ``VersionedKeyValueStore``). Raises KeyError if unknown or not a versioned store."""
        self._store_spec(name, "versioned")
        return VersionedStoreView(
            name, lambda: [task.windowed_state.versioned_store(name) for task in self.tasks() if name in task.stores]
        )

    def get_window_store(self, name: str) -> WindowStoreView:
        """A read view of window store ``name`` across all tasks. Raises KeyError if unknown or not a window
        store."""
        self._store_spec(name, "window")
        return WindowStoreView(
            name, lambda: [task.windowed_state.window_store(name) for task in self.tasks() if name in task.stores]
        )

    def get_session_store(self, name: str) -> SessionStoreView:
        """A read view of session store ``name`` across all tasks. Raises KeyError if unknown or not a session
        store."""
        self._store_spec(name, "session")
        return SessionStoreView(
            name, lambda: [task.windowed_state.session_store(name) for task in self.tasks() if name in task.stores]
        )

    @property
    def wall_clock_ms(self) -> int:
        """The driver's current wall-clock time (epoch ms)."""
        return self._wall_clock_ms

    def advance_wall_clock_time(self, ms: int) -> None:
        """Move wall-clock time forward by ``ms`` and run the work that became due. Raises ValueError if < 0."""
        self._check_open()
        if ms < 0:
            raise ValueError(f"wall-clock time cannot go back (advance by {ms} ms)")
        self._wall_clock_ms += ms
        self._run_until_idle()

    def tasks(self) -> list[StreamTask]:
        """The running tasks, ordered by task id."""
        return [self._thread.tasks.tasks[task_id] for task_id in sorted(self._thread.tasks.tasks)]

    def task_ids(self) -> list[str]:
        return [str(task.id) for task in self.tasks()]

    def metrics(self) -> ThreadMetrics:
        """The stream thread's counters (records processed, dropped records, commits, ...)."""
        return self._thread.status().metrics

    def kafka_metrics(self) -> dict[MetricName, float]:
        """The metrics under Kafka Streams' names and tags, as Kafka's ``TopologyTestDriver.metrics()``:
        ``process-total`` / ``process-rate`` per thread, task and source node, ``dropped-records-total`` /
        ``-rate`` per task, ``record-lateness-avg`` / ``-max`` per time-aware processor, ``commit-total`` per
        thread (``streamapp.testing.metrics``)."""
        thread = self.metrics()
        tasks = [
            TaskCounts(
                str(task.id),
                task.records_processed,
                task.metrics.dropped_records,
                self._source_counts(task),
                tuple(
                    NodeLateness(node, lateness.avg_ms, lateness.max_ms)
                    for node, lateness in sorted(task.metrics.lateness.items())
                    if lateness.count
                ),
            )
            for task in self.tasks()
        ]
        elapsed_ms = self._wall_clock_ms - self._initial_wall_clock_ms
        return driver_metrics(
            threading.current_thread().name, thread.records_processed_total, thread.commits_total, tasks, elapsed_ms
        )

    def _source_counts(self, task: StreamTask) -> tuple[NodeCount, ...]:
        """Per source node of ``task``, the records it consumed from the node's topics (its consumed offsets:
        the driver's topics start at offset 0 and lose no record)."""
        out = []
        for name in sorted(source_node_names(self.description, task.subtopology)):
            node = self.description.node(name)
            if isinstance(node, RepartitionNode):
                topics = [self.description.repartition_topic(self.application_id, name)]
            else:
                topics = list(getattr(node, "topics", []))
            consumed = sum(offset for tp, offset in task.consumed_offsets.items() if tp.topic in topics)
            out.append(NodeCount(name, consumed))
        return tuple(out)

    # -- used by the test topics -------------------------------------------------------------------

    def _pipe(
        self, topic: str, key: bytes | None, value: bytes | None, timestamp_ms: int, headers: Headers | None = None
    ) -> None:
        self._check_open()
        self._input_producer.send(topic, key, value, timestamp_ms, headers=headers)
        self._run_until_idle()

    def _read(self, topic: str) -> ConsumerRecord | None:
        position = self._read_positions.get(topic, 0)
        record = self.cluster.visible_at(topic, position)
        if record is not None:
            self._read_positions[topic] = position + 1
        return record

    def _unread(self, topic: str) -> int:
        return self.cluster.visible_count(topic) - self._read_positions.get(topic, 0)

    # -- internals ---------------------------------------------------------------------------------

    def _run_until_idle(self) -> None:
        """Run the stream thread until every task runs, no consumed topic has an unfetched record and an
        iteration processed nothing (records a task buffers may wait for ``max.task.idle.ms``: then only
        more input or ``advance_wall_clock_time`` lets them through, as in Kafka's driver)."""
        idle_iterations = 0
        while True:
            before = self._thread.metrics.records_processed_total
            try:
                self._thread.run_once()
            except BaseException:
                self._failed = True
                raise
            settled = not self._has_fetchable() and self._thread.tasks.all_running()
            if self._thread.metrics.records_processed_total != before:
                idle_iterations = 0
                # Nothing left to fetch or to process: another iteration would only find that out (and cost
                # as much as this one: the driver commits every iteration).
                if settled and not any(task.input.buffered() for task in self._thread.tasks.tasks.values()):
                    return
                continue
            if settled:
                return
            idle_iterations += 1
            if idle_iterations > _MAX_IDLE_ITERATIONS:
                raise RuntimeError(
                    "TopologyTestDriver made no progress: tasks "
                    f"{[repr(t) for t in self._thread.tasks.tasks.values()]} never became ready"
                )

    def _start(self) -> None:
        """Bootstrap the global stores and subscribe, as ``StreamThread.run`` does before its loop."""
        if not self._thread.start(lambda: False):
            raise RuntimeError("the stream thread did not start")

    def _has_fetchable(self) -> bool:
        return self._consumer.has_fetchable() or bool(self._global_topics and self._global_consumer.has_fetchable())

    def _create_topics(self, partitions: dict[str, int]) -> None:
        sources = {topic: partitions.get(topic, 1) for topic in self.description.external_source_topics()}
        for topic, count in sources.items():
            self.cluster.create_topic(topic, count)
        for internal in self.description.internal_topics(self.application_id, sources):
            self.cluster.create_topic(internal.name, internal.partitions)
        for topic in self.description.sink_topics():
            self.cluster.create_topic(topic, partitions.get(topic, 1))
        for topic, count in partitions.items():
            self.cluster.create_topic(topic, count)

    def _store_factory(self, backend: str) -> StoreFactory:
        if backend == "memory":
            return lambda name, path: InMemoryKeyValueStore(name)
        if backend == "rocksdb":
            memory = RocksDBMemory(self.config.rocksdb_block_cache_bytes, self.config.rocksdb_write_buffer_bytes)
            # close() removes the state: a write-ahead log would only recover it after a crash
            return lambda name, path: RocksDBStore(name, path, memory, write_ahead_log=False)
        raise ValueError(f"store_backend must be 'rocksdb' or 'memory', got {backend!r}")

    def _serdes(self, topic: str, key_serde: SerdeArg, value_serde: SerdeArg, reading: bool) -> tuple[Serde, Serde]:
        declared = declared_serdes(self.description, self.application_id, topic, reading)
        if not declared and not reading:  # read back an input topic, or a topic only an extractor may pick
            declared = (
                declared_serdes(self.description, self.application_id, topic, reading=True)
                or _extractor_sink_serdes(self.description)
                or {("bytes", "bytes")}
            )
        resolved: list[Serde] = []
        for role, given, index in (("key", key_serde, 0), ("value", value_serde, 1)):
            if given is None:
                names = {pair[index] for pair in declared}
                if len(names) != 1:
                    found = f"the topology declares {sorted(names)}" if names else "the topology declares none"
                    raise ValueError(f"topic '{topic}': pass {role}_serde ({found})")
                given = names.pop()
            resolved.append(serde_for(given, topic, is_key=index == 0) if isinstance(given, str) else given)
        return resolved[0], resolved[1]

    def _store_spec(self, name: str, store_type: str) -> StoreSpec:
        self._check_open()
        try:
            spec = self.description.store(name)
        except (KeyError, TopologyError):
            raise KeyError(f"the topology has no store '{name}'") from None
        if spec.type != store_type:
            raise KeyError(f"store '{name}' is a {spec.type} store, not a {store_type} store")
        return spec

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError("the TopologyTestDriver is closed")

    def _remove_state(self) -> None:
        if self._app_state_dir is not None:
            release_scratch_state_dir(self._app_state_dir)
            shutil.rmtree(self._app_state_dir, ignore_errors=True)
        if self._temp_dir is not None:
            shutil.rmtree(self._temp_dir, ignore_errors=True)
            self._temp_dir = None


def _description_of(topology: TopologyArg, config: Mapping[str, Any]) -> TopologyDescription:
    """The description to run; a builder is built with ``config``'s default serdes (``default.key.serde``, ...)."""
    if isinstance(topology, TopologyDescription):
        return topology
    if isinstance(topology, StreamsBuilder):
        return topology.build(config)
    if isinstance(topology, str):
        try:
            topology = yaml.safe_load(topology)
        except yaml.YAMLError as exc:
            raise TopologyError(f"topology description is not valid YAML: {exc}") from exc
    return TopologyDescription.from_dict(with_default_serdes(topology, config))


def _extractor_sink_serdes(description: TopologyDescription) -> set[tuple[str, str]]:
    """The ``(key serde, value serde)`` pairs of the sinks whose topic a ``topic_extractor`` picks per record."""
    return {
        (node.key_serde, node.value_serde)
        for node in description.nodes
        if isinstance(node, SinkNode) and node.topic_extractor is not None
    }


def declared_serdes(
    description: TopologyDescription, application_id: str, topic: str, reading: bool
) -> set[tuple[str, str]]:
    """The ``(key serde, value serde)`` pairs the topology declares for reading or writing ``topic``.

    Reading: nodes without inputs (sources of any kind) naming the topic, and repartition nodes. Writing:
    nodes with inputs naming it in ``topic`` (sinks), repartition nodes, and stores for their changelog.
    """
    found: set[tuple[str, str]] = set()
    for node in description.nodes:
        key, value = getattr(node, "key_serde", None), getattr(node, "value_serde", None)
        if not isinstance(key, str) or not isinstance(value, str):
            continue
        if isinstance(node, RepartitionNode):
            if description.repartition_topic(application_id, node.name) == topic:
                found.add((key, value))
            continue
        named = [*(getattr(node, "topics", None) or []), getattr(node, "topic", None)]
        if topic in named and (not node.inputs()) == reading:
            found.add((key, value))
    if not reading:
        for store in description.stores:
            if description.changelog_topic(application_id, store.name) == topic:
                found.add((store.key_serde, store.value_serde))
    return found
