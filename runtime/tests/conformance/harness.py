"""The dual-engine conformance harness: one topology, one input, the same output on both engines.

``engine.run(topology, inputs, outputs, config)`` runs ``topology`` and returns what it wrote:

- ``inputs``: ``[(topic, key, value, timestamp_ms), ...]`` typed records, serialized with the serdes of the
  source node that reads ``topic``, produced in this order (partition by murmur2 of the serialized key);
- ``outputs``: topic names to read; ``"{application_id}"`` in a name is replaced by the run's application
  id, so internal topics can be read too (``"{application_id}-counts-changelog"``);
- returns ``{output name as given: [(key, value, timestamp_ms), ...]}``, deserialized with the serdes the
  topology declares for writing the topic: the records of partition 0 in offset order, then partition 1, ...

Engines:

- ``DriverEngine`` ("driver"): ``streamapp.testing.TopologyTestDriver``, in-process;
- ``BrokerEngine`` ("broker"): the real local Kafka broker and a real ``streamapp run`` process (one stream
  thread, its worker process and all). Every run gets a unique ``application.id`` and a unique prefix for
  the topology's external topics (the description is rewritten, results are keyed by the original
  names); the external and internal topics are created up front; the inputs are produced once the
  instance is ready; the run ends when the group's committed offsets reached the end of every consumed
  partition and nothing changed for a quiet period; the instance is stopped with SIGTERM and the
  outputs are read with ``isolation.level=read_committed``.

Records of one partition are processed in order on both engines; records of different partitions (two
input topics of one task, or two tasks) may interleave differently on the broker. For inputs whose result
depends on their order across partitions (a stream-table join fed on both sides) pass
``one_at_a_time=True``: the broker engine then waits until each input is fully processed before it
produces the next, which is what the driver does. ``compare=True`` on the broker engine also runs the
driver and asserts both outputs are identical, and so are the final contents of every store the tasks keep: the
last record per key of each store's changelog topic, raw bytes and timestamp (what a restore rebuilds the store
from: key-value, timestamped, window, session, suppression-buffer and join-buffer stores alike), with the windows
a window store's retention has expired by the end left out on both sides, as a restore reads them
(``restored_stores``).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal, Protocol

import yaml
from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    ConsumerGroupTopicPartitions,
    IsolationLevel,
    KafkaException,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, NewTopic, OffsetSpec
from streamapp import StreamsBuilder, TopologyDescription
from streamapp.processing.stream_thread import source_topic_subtopologies
from streamapp.serdes import Serde, serde_for
from streamapp.testing import TopologyTestDriver
from streamapp.testing.driver import declared_serdes
from streamapp.topology import GlobalTableNode

__all__ = [
    "BrokerEngine",
    "DriverEngine",
    "Engine",
    "Input",
    "Outputs",
    "SparkEngine",
    "StoreContents",
    "assert_same_outputs",
    "assert_same_stores",
    "final_values",
    "store_changelogs",
    "store_contents",
]

Input = tuple[str, Any, Any, int]
"""``(topic, key, value, timestamp_ms)``."""
OutputRecord = tuple[Any, Any, int]
Outputs = dict[str, list[OutputRecord]]
RawRecord = tuple[int, bytes | None, bytes | None, int]
"""``(partition, key bytes, value bytes, timestamp_ms)`` as a topic holds it."""
StoreContents = dict[str, dict[tuple[int, bytes | None], tuple[bytes, int]]]
"""``{changelog output name: {(partition, key bytes): (value bytes, timestamp_ms)}}``: each store's final contents."""
TopologyArg = StreamsBuilder | TopologyDescription | Mapping[str, Any]
RunArgs = tuple[Sequence[Input], Sequence[str], Mapping[str, Any] | None, Mapping[str, int] | None]
"""``(inputs, outputs, config, partitions)`` of one run."""
Compare = Literal["records", "final"]

DRIVER_APPLICATION_ID = "conformance"
TESTS_DIR = Path(__file__).resolve().parent.parent
STREAMAPP = Path(sys.executable).parent / "streamapp"


class Engine(Protocol):
    name: str

    def run(
        self,
        topology: TopologyArg,
        inputs: Sequence[Input],
        outputs: Sequence[str],
        config: Mapping[str, Any] | None = None,
        *,
        partitions: Mapping[str, int] | None = None,
        one_at_a_time: bool = False,
        compare: bool | Compare = False,
    ) -> Outputs: ...


def describe(topology: TopologyArg, config: Mapping[str, Any] | None = None) -> TopologyDescription:
    """The description of ``topology``; a builder is built with ``config``'s default serdes, as the driver does."""
    if isinstance(topology, TopologyDescription):
        return topology
    if isinstance(topology, StreamsBuilder):
        return topology.build(config)
    return TopologyDescription.from_dict(topology)


def output_serdes(
    description: TopologyDescription, application_id: str, topic: str, bound: str | None = None
) -> tuple[Serde, Serde]:
    """The serdes the topology writes ``topic`` with, bound to broker topic ``bound`` (default ``topic``; Schema
    Registry serdes use it as the subject's topic); AssertionError when it declares none or several."""
    pairs = declared_serdes(description, application_id, topic, reading=False)
    assert len(pairs) == 1, f"output topic '{topic}': the topology declares serdes {sorted(pairs)}"
    key, value = pairs.pop()
    return serde_for(key, bound or topic, is_key=True), serde_for(value, bound or topic)


def input_serdes(description: TopologyDescription, topic: str, bound: str | None = None) -> tuple[Serde, Serde]:
    pairs = declared_serdes(description, DRIVER_APPLICATION_ID, topic, reading=True)
    assert len(pairs) == 1, f"input topic '{topic}': the topology declares serdes {sorted(pairs)}"
    key, value = pairs.pop()
    return serde_for(key, bound or topic, is_key=True), serde_for(value, bound or topic)


def check_inputs(inputs: Sequence[Input]) -> None:
    """Refuse inputs both engines cannot reproduce: timestamps must be positive (librdkafka stamps a record
    produced with timestamp 0 with the current time)."""
    for topic, key, _, timestamp_ms in inputs:
        if not isinstance(timestamp_ms, int) or timestamp_ms <= 0:
            raise ValueError(
                f"input ({topic!r}, {key!r}, ...): timestamp_ms must be a positive int, got {timestamp_ms!r}"
            )


def final_values(records: Sequence[OutputRecord]) -> dict[Any, Any]:
    """The last value per key of a topic's records (a table's final state; tombstones remove the key)."""
    table: dict[Any, Any] = {}
    for key, value, _ in records:
        if value is None:
            table.pop(key, None)
        else:
            table[key] = value
    return table


def assert_same_outputs(driver: Outputs, broker: Outputs, mode: Compare = "records") -> None:
    """Assert two engines' outputs are identical.

    ``mode="records"``: record for record (key, value, timestamp), naming the first that differs;
    ``mode="final"``: the same last value per key in every topic (for inputs spread over several partitions,
    whose interleaving across partitions may differ between engines).
    """
    for topic in sorted(set(driver) | set(broker)):
        left, right = driver.get(topic, []), broker.get(topic, [])
        if mode == "final":
            assert final_values(left) == final_values(right), (
                f"topic '{topic}': final values differ: driver {final_values(left)!r} != broker {final_values(right)!r}"
            )
            continue
        for i, (a, b) in enumerate(zip(left, right, strict=False)):
            assert a == b, f"topic '{topic}' record {i}: driver {a!r} != broker {b!r}"
        assert len(left) == len(right), (
            f"topic '{topic}': driver wrote {len(left)} records, broker {len(right)}: {left!r} vs {right!r}"
        )


def store_changelogs(description: TopologyDescription) -> list[str]:
    """Output names (``"{application_id}-<store>-changelog"``) of the changelog of every store a task keeps; a
    global store has none (its source topic is its changelog, read whole by every instance)."""
    global_stores = {name for node in description.nodes if isinstance(node, GlobalTableNode) for name in node.stores()}
    return [
        description.changelog_topic("{application_id}", store.name)
        for store in description.stores
        if store.name not in global_stores
    ]


def window_retentions(description: TopologyDescription) -> dict[str, int]:
    """The changelog output name of each window store whose windows are keyed by start alone (not a join buffer,
    which retains duplicates) -> its retention (ms)."""
    return {
        description.changelog_topic("{application_id}", store.name): store.retention_ms
        for store in description.stores
        if store.type == "window" and not store.retain_duplicates and store.retention_ms is not None
    }


def restored_window_contents(
    contents: dict[tuple[int, bytes | None], tuple[bytes, int]], retention_ms: int
) -> dict[tuple[int, bytes | None], tuple[bytes, int]]:
    """What a window store restored from a changelog whose final contents are ``contents`` serves: per partition,
    the store's observed stream time is the largest window start restored, and a window with ``start < observed -
    retention`` is expired, hidden from reads and never written again (``streamapp.state.window_store``, Kafka's
    ``AbstractRocksDBSegmentedBytesStore``). A key is ``key bytes + start (8 bytes) + seqnum (4 bytes)`` (Kafka's
    ``WindowKeySchema``)."""

    def start(key: bytes | None) -> int:
        return int.from_bytes((key or b"")[-12:-4], "big", signed=True)

    observed: dict[int, int] = {}
    for partition, key in contents:
        observed[partition] = max(observed.get(partition, start(key)), start(key))
    return {
        (partition, key): value
        for (partition, key), value in contents.items()
        if start(key) >= observed[partition] - retention_ms
    }


def restored_stores(description: TopologyDescription, stores: StoreContents) -> StoreContents:
    """``stores`` as a new version restoring each changelog would read them: window stores without the windows
    their retention has expired by the end (``restored_window_contents``), every other store as it is. The
    comparison of stores is on these, so an engine may leave expired windows out of a changelog (the Spark replay
    does: ``run_replay``'s ``expire_windows``) or keep them (a streaming run, until the broker deletes them)."""
    retentions = window_retentions(description)
    return {
        name: restored_window_contents(contents, retentions[name]) if name in retentions else contents
        for name, contents in stores.items()
    }


def store_contents(records: Sequence[RawRecord]) -> dict[tuple[int, bytes | None], tuple[bytes, int]]:
    """A changelog's final contents: the last value and timestamp per (partition, key); a tombstone removes the
    key (what a restore from offset 0 leaves in the store)."""
    contents: dict[tuple[int, bytes | None], tuple[bytes, int]] = {}
    for partition, key, value, timestamp_ms in records:
        if value is None:
            contents.pop((partition, key), None)
        else:
            contents[(partition, key)] = (value, timestamp_ms)
    return contents


def assert_same_stores(driver: StoreContents, other: StoreContents, engine: str) -> None:
    """Assert every store ends with the same contents on the driver and on ``engine``: the same keys, value bytes
    and timestamps, naming the store and the first key that differs."""
    for changelog in sorted(set(driver) | set(other)):
        left, right = driver.get(changelog, {}), other.get(changelog, {})
        for key in sorted(set(left) | set(right), key=lambda k: (k[0], k[1] or b"")):
            assert left.get(key) == right.get(key), (
                f"store changelog '{changelog}', partition {key[0]} key {key[1]!r}: "
                f"driver ends with {left.get(key)!r}, {engine} with {right.get(key)!r}"
            )


# -- the driver --------------------------------------------------------------------------------------


class DriverEngine:
    """Runs on ``streamapp.testing.TopologyTestDriver`` (application id ``conformance``)."""

    name = "driver"

    def run(
        self,
        topology: TopologyArg,
        inputs: Sequence[Input],
        outputs: Sequence[str],
        config: Mapping[str, Any] | None = None,
        *,
        partitions: Mapping[str, int] | None = None,
        one_at_a_time: bool = False,
        compare: bool | Compare = False,
    ) -> Outputs:
        return self.execute(topology, (inputs, outputs, config, partitions))[0]

    def execute(self, topology: TopologyArg, run: RunArgs) -> tuple[Outputs, StoreContents]:
        """``run``'s outputs for ``(inputs, outputs, config, partitions)`` and the final contents of every store
        (``store_contents`` of each changelog)."""
        inputs, outputs, config, partitions = run
        check_inputs(inputs)
        settings = {**(config or {}), "application.id": DRIVER_APPLICATION_ID}
        description = describe(topology, settings)
        with TopologyTestDriver(description, settings, partitions=partitions) as driver:
            topics = {}
            for topic, key, value, timestamp_ms in inputs:
                if topic not in topics:
                    topics[topic] = driver.create_input_topic(topic)
                topics[topic].pipe_input(key, value, timestamp_ms)
            result: Outputs = {}
            for name in outputs:
                records = driver.create_output_topic(name.format(application_id=DRIVER_APPLICATION_ID))
                ordered = sorted(records.read_records_to_list(), key=lambda r: r.partition or 0)
                result[name] = [(r.key, r.value, r.timestamp_ms or 0) for r in ordered]
            stores: StoreContents = {}
            for name in store_changelogs(description):
                raw = driver.create_output_topic(name.format(application_id=DRIVER_APPLICATION_ID), "bytes", "bytes")
                stores[name] = store_contents(
                    [(r.partition or 0, r.key, r.value, r.timestamp_ms or 0) for r in raw.read_records_to_list()]
                )
            return result, stores


def compare_with_driver(
    engine: str,
    description: TopologyDescription,
    run: RunArgs,
    result: Outputs,
    stores: StoreContents,
    mode: Compare,
) -> None:
    """Run the driver on the same ``(inputs, outputs, config, partitions)`` and assert ``engine`` wrote the same
    outputs (``assert_same_outputs`` in ``mode``) and ended with the same store contents as a restore reads them
    (``restored_stores``).

    The driver runs with the record cache the other engine ran with (off unless ``config`` sets it, as
    ``BrokerEngine`` does): its outputs are the same either way (the driver flushes after every record), but the
    old value a cached store forwards for a new key is ``None`` where an uncached aggregation forwards its
    initial value, as in Kafka Streams, and a suppression buffer keeps that old value."""
    inputs, outputs, config, partitions = run
    cache = {"statestore.cache.max.bytes": 0, **(config or {})}
    expected, expected_stores = DriverEngine().execute(description, (inputs, outputs, cache, partitions))
    assert_same_outputs(expected, result, mode)
    assert_same_stores(restored_stores(description, expected_stores), restored_stores(description, stores), engine)


# -- the broker --------------------------------------------------------------------------------------


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def global_table_topics(description: TopologyDescription) -> list[str]:
    """Topics of the topology's global tables (read by every worker's global consumer, never by the group)."""
    return [node.topic for node in description.nodes if isinstance(node, GlobalTableNode)]


def rename_topics(document: dict[str, Any], rename: Callable[[str], str]) -> dict[str, Any]:
    """A copy of a description document with every external topic name (``topic``/``topics``) renamed."""
    nodes = []
    for node in document["nodes"]:
        node = dict(node)
        if isinstance(node.get("topics"), list):
            node["topics"] = [rename(t) for t in node["topics"]]
        if isinstance(node.get("topic"), str):
            node["topic"] = rename(node["topic"])
        nodes.append(node)
    return {**document, "nodes": nodes}


class BrokerEngine:
    """Runs a ``streamapp run`` process against the broker at ``bootstrap`` (see the module docstring)."""

    name = "broker"

    def __init__(
        self, bootstrap: str, workdir: Path, timeout_s: float = 120.0, quiet_s: float = 1.0, delete_topics: bool = True
    ) -> None:
        self.bootstrap = bootstrap
        self.workdir = workdir
        self.timeout_s = timeout_s
        self.quiet_s = quiet_s
        self.delete_topics = delete_topics
        self.admin = AdminClient({"bootstrap.servers": bootstrap})
        self.logs: list[Path] = []
        """The ``streamapp run`` log of every run (the conftest prints them when a test fails)."""

    def run(
        self,
        topology: TopologyArg,
        inputs: Sequence[Input],
        outputs: Sequence[str],
        config: Mapping[str, Any] | None = None,
        *,
        partitions: Mapping[str, int] | None = None,
        one_at_a_time: bool = False,
        compare: bool | Compare = False,
    ) -> Outputs:
        check_inputs(inputs)
        description = describe(topology, config)
        run = _BrokerRun(self, description, dict(config or {}), dict(partitions or {}))
        self.logs.append(run.log_file)
        try:
            result = run.execute(inputs, outputs, one_at_a_time)
            stores = run.store_contents() if compare else {}
        finally:
            run.cleanup()
        if compare:
            mode: Compare = "records" if compare is True else compare
            compare_with_driver(self.name, description, (inputs, outputs, config, partitions), result, stores, mode)
        return result


class _BrokerRun:
    """One broker run: topics, the instance, inputs, the wait, the outputs."""

    def __init__(
        self, engine: BrokerEngine, description: TopologyDescription, config: dict[str, Any], partitions: dict[str, int]
    ) -> None:
        description.check_exportable()  # another process runs it: user functions must be importable by name
        self.engine = engine
        self.description = description
        self.prefix = unique("cf")
        self.app_id = f"{self.prefix}-app"
        self.workdir = engine.workdir / self.prefix
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.external = sorted(set(description.external_source_topics()) | set(description.sink_topics()))
        self.partitions = partitions
        self.config = {
            "commit.interval.ms": 100,
            # the harness reads repartition topics from offset 0 after the run: never purge them under it
            "repartition.purge.interval.ms": 3_600_000,
            # the record cache off: one update per record on the broker, like the driver, which commits after
            # every record (docs/record-cache.md); a test passing the key gets Kafka's cached behaviour
            "statestore.cache.max.bytes": 0,
            **config,
            "application.id": self.app_id,
            "bootstrap.servers": engine.bootstrap,
            "num.stream.threads": 1,
            "state.dir": str(self.workdir / "state"),
        }
        self.transactional = str(self.config.get("processing.guarantee", "")).startswith("exactly_once")
        self.process: subprocess.Popen[bytes] | None = None
        self.port = free_port()
        self.log_file = self.workdir / "streamapp.log"
        self.created: list[str] = []
        self._last_data_offset: dict[tuple[TopicPartition, int], int] = {}
        self._partition_counts: dict[str, int] = {}
        self._probe: Any = None

    def topic(self, name: str) -> str:
        """The broker-side name of one of the topology's topics (external ones get the run's prefix)."""
        return f"{self.prefix}.{name}" if name in self.external else name.format(application_id=self.app_id)

    # -- steps ---------------------------------------------------------------------------------------

    def execute(self, inputs: Sequence[Input], outputs: Sequence[str], one_at_a_time: bool) -> Outputs:
        self.create_topics()
        self.start()
        self.wait_ready()
        producer = Producer(
            {
                "bootstrap.servers": self.engine.bootstrap,
                "partitioner": "murmur2_random",
                "linger.ms": 0,
                # a retried request never lands behind later ones: the broker holds the inputs in test order
                "enable.idempotence": True,
            }
        )
        serdes: dict[str, tuple[Serde, Serde]] = {}
        previous_topic: str | None = None
        for topic, key, value, timestamp_ms in inputs:
            if previous_topic is not None and topic != previous_topic:
                # the records of the previous topic are on the broker before the next topic's first one, as the
                # driver pipes them: partitions of two topics are sent independently, so without this a stream
                # record could reach the broker before the table record a test put ahead of it (seen under load:
                # a stream-table join's flight found no plane)
                assert producer.flush(30) == 0, "inputs were not delivered"
            previous_topic = topic
            if topic not in serdes:
                serdes[topic] = input_serdes(self.description, topic, self.topic(topic))
            key_serde, value_serde = serdes[topic]
            producer.produce(
                self.topic(topic),
                key=key_serde.serialize(key),
                value=value_serde.serialize(value),
                timestamp=timestamp_ms,
            )
            if one_at_a_time:
                assert producer.flush(30) == 0, "inputs were not delivered"
                self.wait_processed(quiet=False)
        assert producer.flush(30) == 0, "inputs were not delivered"
        self.wait_processed()
        code = self.stop()
        assert code == 0, f"streamapp exited with {code}; log:\n{self.log_tail()}"
        return {name: self.read(name) for name in outputs}

    def create_topics(self) -> None:
        sources = {t: self.partitions.get(t, 1) for t in self.description.external_source_topics()}
        # test records carry old timestamps (1970, 2013): without retention.ms=-1 the broker's time-based
        # retention deletes them at its next check, and inputs or outputs vanish mid-test
        wanted: dict[str, tuple[int, dict[str, str]]] = {
            self.topic(t): (self.partitions.get(t, 1), {"retention.ms": "-1"}) for t in self.external
        }
        for internal in self.description.internal_topics(self.app_id, sources):
            config = dict(internal.config)
            if "retention.ms" in config:  # window/session changelogs (compact,delete): the same old timestamps
                config["retention.ms"] = "-1"
            wanted[internal.name] = (internal.partitions, config)
        futures = self.engine.admin.create_topics(
            [NewTopic(name, count, 1, config=config) for name, (count, config) in wanted.items()]
        )
        for name, future in futures.items():
            future.result()
            self.created.append(name)

    def start(self) -> None:
        topology_file = self.workdir / "topology.yaml"
        config_file = self.workdir / "streams.yaml"
        document = rename_topics(self.description.to_dict(), lambda t: self.topic(t))
        topology_file.write_text(yaml.safe_dump(document))
        config_file.write_text(yaml.safe_dump({**self.config, "http.port": self.port}))
        env = {**os.environ, "STREAMAPP_HTTP_HOST": "127.0.0.1"}
        env.pop("STREAMAPP_INSTANCE_ID", None)
        paths = [str(TESTS_DIR), str(Path(__file__).resolve().parent), *sys.path]
        env["PYTHONPATH"] = os.pathsep.join(p for p in paths if p and Path(p).is_dir())
        with open(self.log_file, "ab") as log:
            self.process = subprocess.Popen(
                [str(STREAMAPP), "run", "--topology", str(topology_file), "--config", str(config_file)],
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
                start_new_session=True,
            )

    def wait_ready(self) -> None:
        self._wait(lambda: self._http("/readyz") == 200, "the instance to be ready")

    def wait_processed(self, quiet: bool = True) -> None:
        """Wait until every consumed partition is committed to its end (and, with ``quiet``, nothing moved for
        ``quiet_s`` after that).

        Sound without the quiet period: committed offsets are read *before* end offsets, and a task commits
        an input offset only after everything it produced is acknowledged, so "committed >= end" for every
        consumed partition means no record is in flight. The quiet period guards what that cannot see
        (output without input, e.g. wall-clock punctuation).
        """
        global_topics = [self.topic(t) for t in global_table_topics(self.description)]
        consumed = [  # what the group reads: external sources (prefixed here) and repartition topics
            self.topic(t) if t in self.external else t
            for t in source_topic_subtopologies(self.description, self.app_id)
        ]
        watched = [
            *consumed,
            *(self.topic(t) for t in self.description.sink_topics()),
            *(self.description.changelog_topic(self.app_id, s.name) for s in self.description.stores),
        ]
        deadline = time.monotonic() + self.engine.timeout_s
        while True:
            self._assert_running()
            if self._caught_up(consumed) and self._globals_caught_up(global_topics):
                if not quiet:
                    return
                snapshot = self._end_offsets(watched)
                time.sleep(self.engine.quiet_s)
                if (
                    self._end_offsets(watched) == snapshot
                    and self._caught_up(consumed)
                    and self._globals_caught_up(global_topics)
                ):
                    return
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"the instance did not process every input within {self.engine.timeout_s:.0f}s; "
                    f"log:\n{self.log_tail()}"
                )
            time.sleep(0.05)

    def stop(self, timeout_s: float = 60.0) -> int:
        assert self.process is not None
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self.kill()
            raise AssertionError(f"streamapp did not stop within {timeout_s:.0f}s; log:\n{self.log_tail()}") from None

    def read(self, name: str) -> list[OutputRecord]:
        """Every committed record of output ``name``: partition 0 in offset order, then 1, ..."""
        topic = self.topic(name)
        key_serde, value_serde = output_serdes(
            self.description, self.app_id, topic if name not in self.external else name, topic
        )
        return [
            (key_serde.deserialize(key), value_serde.deserialize(value), timestamp)
            for _, key, value, timestamp in self.read_raw(topic)
        ]

    def store_contents(self) -> StoreContents:
        """The final contents of every store, from its changelog (``store_contents``)."""
        return {name: store_contents(self.read_raw(self.topic(name))) for name in store_changelogs(self.description)}

    def read_raw(self, topic: str) -> list[RawRecord]:
        """Every committed record of broker topic ``topic`` as bytes: partition 0 in offset order, then 1, ..."""
        ends = self._end_offsets([topic])
        consumer = Consumer(
            {
                "bootstrap.servers": self.engine.bootstrap,
                "group.id": unique("reader"),
                "enable.auto.commit": False,
                "isolation.level": "read_committed",
            }
        )
        records: dict[int, list[tuple[int, RawRecord]]] = {}
        try:
            partitions = [TopicPartition(topic, tp.partition, OFFSET_BEGINNING) for tp, end in ends.items() if end > 0]
            if partitions:
                consumer.assign(partitions)
            remaining = {tp.partition for tp in partitions}
            deadline = time.monotonic() + 120
            idle_since = time.monotonic()
            while remaining:
                assert time.monotonic() < deadline, f"reading '{topic}': partitions {sorted(remaining)} unfinished"
                message = consumer.poll(0.2)
                if message is None:
                    positions = consumer.position([TopicPartition(topic, p) for p in remaining])
                    remaining -= {
                        tp.partition for tp in positions if tp.offset >= ends[TopicPartition(topic, tp.partition)]
                    }
                    if remaining and time.monotonic() - idle_since > 3:  # only transaction markers left?
                        self._check_read_to_last_record(topic, ends, records, remaining)
                        break
                    continue
                if message.error():
                    continue
                idle_since = time.monotonic()
                p, offset = int(message.partition() or 0), int(message.offset() or 0)
                _, timestamp = message.timestamp()
                records.setdefault(p, []).append((offset, (p, message.key(), message.value(), timestamp)))
                if offset + 1 >= ends[TopicPartition(topic, p)]:
                    remaining.discard(p)
        finally:
            consumer.close()
        return [record for p in sorted(records) for _, record in sorted(records[p], key=lambda r: r[0])]

    def _check_read_to_last_record(
        self,
        topic: str,
        ends: Mapping[TopicPartition, int],
        records: Mapping[int, list[tuple[int, RawRecord]]],
        remaining: set[int],
    ) -> None:
        """A read that went idle before the end offsets must hold each partition's last committed record (the rest
        are transaction markers); a slow broker's pause is a failure naming the partition, never a partial read."""
        for partition in sorted(remaining):
            tp = TopicPartition(topic, partition)
            read = records.get(partition, [])
            last = self._last_data_offset_plus_one(tp, ends[tp])
            assert (read[-1][0] + 1 if read else 0) >= last, (
                f"reading '{topic}' partition {partition}: stopped at offset {read[-1][0] if read else None}, "
                f"its last committed record is at {last - 1}"
            )

    def cleanup(self) -> None:
        self.kill()
        if self._probe is not None:
            self._probe.close()
        if self.engine.delete_topics and self.created:
            with contextlib.suppress(Exception):
                for future in self.engine.admin.delete_topics(self.created).values():
                    future.result()

    def kill(self) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait(10)

    def log_tail(self, lines: int = 80) -> str:
        if not self.log_file.exists():
            return "(no log)"
        return "\n".join(self.log_file.read_text(errors="replace").splitlines()[-lines:])

    # -- internals -----------------------------------------------------------------------------------

    def _wait(self, condition: Callable[[], bool], what: str) -> None:
        deadline = time.monotonic() + self.engine.timeout_s
        while time.monotonic() < deadline:
            self._assert_running()
            if condition():
                return
            time.sleep(0.2)
        raise AssertionError(f"timed out waiting for {what}; log:\n{self.log_tail()}")

    def _assert_running(self) -> None:
        assert self.process is not None
        code = self.process.poll()
        assert code is None, f"streamapp exited with {code}; log:\n{self.log_tail()}"

    def _http(self, path: str) -> int:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}{path}", timeout=5) as response:
                return int(response.status)
        except urllib.error.HTTPError as exc:
            return int(exc.code)
        except OSError:
            return 0

    def _end_offsets(self, topics: Sequence[str]) -> dict[TopicPartition, int]:
        """High watermarks of every partition of ``topics`` (topics that do not exist are left out)."""
        if self._probe is None:
            self._probe = Consumer({"bootstrap.servers": self.engine.bootstrap, "group.id": unique("probe")})
        ends: dict[TopicPartition, int] = {}
        for topic in topics:
            metadata = self._probe.list_topics(topic, timeout=10).topics.get(topic)
            if metadata is None or metadata.error is not None:
                continue
            for p in metadata.partitions:
                tp = TopicPartition(topic, p)
                ends[tp] = int(self._probe.get_watermark_offsets(tp, timeout=10, cached=False)[1])
        return ends

    def _globals_caught_up(self, topics: Sequence[str]) -> bool:
        """True when every worker's global consumer read every global-table partition to its end (from the
        ``global_positions`` each worker reports in ``/status``, about once a second)."""
        if not topics:
            return True
        ends = self._end_offsets(topics)
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/status", timeout=5) as response:
                workers = json.load(response)["workers"]
        except (OSError, ValueError, KeyError):
            return False
        if not workers:
            return False
        for worker in workers:
            positions = worker.get("global_positions") or {}
            if any(end > 0 and positions.get(f"{tp.topic}-{tp.partition}", 0) < end for tp, end in ends.items()):
                return False
        return True

    def _caught_up(self, consumed: Sequence[str]) -> bool:
        """True when the group committed every consumed partition up to its end (committed offsets are read
        first, end offsets second: see ``wait_processed``)."""
        partitions = [TopicPartition(t, p) for t in consumed for p in range(self._partition_count(t))]
        group = ConsumerGroupTopicPartitions(self.app_id, partitions)
        result = self.engine.admin.list_consumer_group_offsets([group])[self.app_id].result()
        committed = {(tp.topic, tp.partition): tp.offset for tp in result.topic_partitions}
        for tp, end in self._end_offsets(consumed).items():
            offset = committed.get((tp.topic, tp.partition), -1)
            if end == 0 or offset >= end:
                continue
            # a transactional writer leaves commit markers after its last record: compare with that record
            if not self.transactional or offset < 0 or offset < self._last_data_offset_plus_one(tp, end):
                return False
        return True

    def _partition_count(self, topic: str) -> int:
        counts = self._partition_counts.get(topic)
        if counts is None:
            counts = len(self._end_offsets([topic]))
            self._partition_counts[topic] = counts
        return counts

    def _last_data_offset_plus_one(self, tp: TopicPartition, end: int) -> int:
        cached = self._last_data_offset.get((tp, end))
        if cached is not None:
            return cached
        consumer = Consumer(
            {
                "bootstrap.servers": self.engine.bootstrap,
                "group.id": unique("probe"),
                "enable.auto.commit": False,
                "isolation.level": "read_committed",
            }
        )
        last = 0
        try:
            consumer.assign([TopicPartition(tp.topic, tp.partition, OFFSET_BEGINNING)])
            idle = 0
            while idle < 3:
                message = consumer.poll(0.2)
                if message is None or message.error():
                    idle += 1
                    continue
                idle = 0
                last = int(message.offset() or 0) + 1
                if last >= end:
                    break
        finally:
            consumer.close()
        self._last_data_offset[(tp, end)] = last
        return last


# -- the Spark replay ----------------------------------------------------------------------------------


def _retrying(call: Callable[[], Any], attempts: int = 20, pause_s: float = 0.5) -> Any:
    """``call()``, retried on a KafkaException (e.g. NOT_LEADER_FOR_PARTITION just after a topic was created)."""
    for attempt in range(attempts):
        try:
            return call()
        except KafkaException:
            if attempt == attempts - 1:
                raise
            time.sleep(pause_s)


def wait_stable(admin: AdminClient, partitions: Sequence[TopicPartition], timeout_s: float = 60.0) -> None:
    """Wait until no transaction is open on ``partitions``: last stable offset = high watermark. A committed
    transaction's records become visible only when the coordinator wrote its markers, just after the commit."""
    deadline = time.monotonic() + timeout_s
    while partitions:
        committed = admin.list_offsets(
            {tp: OffsetSpec.latest() for tp in partitions}, isolation_level=IsolationLevel.READ_COMMITTED
        )
        uncommitted = admin.list_offsets(
            {tp: OffsetSpec.latest() for tp in partitions}, isolation_level=IsolationLevel.READ_UNCOMMITTED
        )
        if all(committed[tp].result().offset == uncommitted[tp].result().offset for tp in partitions):
            return
        assert time.monotonic() < deadline, f"transactions still open on {partitions} after {timeout_s:.0f}s"
        time.sleep(0.1)


class SparkEngine:
    """Runs the topology as a Spark replay (``streamapp.replay``) over the inputs on the real broker.

    Topics are named and created as for ``BrokerEngine`` (a unique prefix and ``application.id`` per run); the
    inputs are produced first, then one replay reads every source partition from offset 0 to its end offset,
    writes sink and changelog topics (and repartition topics when an output names one), and the outputs are read
    with ``read_committed``. The replay processes what is already on the broker, so ``one_at_a_time`` changes
    nothing: its order across a task's partitions is the runtime's catch-up order (docs/replay.md). Changelog
    topics hold the final store contents (one record per key). ``compare`` runs the driver too and asserts both
    outputs and every store's final contents are identical, like ``BrokerEngine``.
    """

    name = "spark"

    def __init__(self, spark: Any, bootstrap: str, workdir: Path) -> None:
        self.spark = spark
        self.broker = BrokerEngine(bootstrap, workdir)
        self.results: list[Any] = []
        """The ``ReplayResult`` of every run."""

    def run(
        self,
        topology: TopologyArg,
        inputs: Sequence[Input],
        outputs: Sequence[str],
        config: Mapping[str, Any] | None = None,
        *,
        partitions: Mapping[str, int] | None = None,
        one_at_a_time: bool = False,
        compare: bool | Compare = False,
    ) -> Outputs:
        from streamapp.replay import ReplayPlan, run_replay
        from streamapp.replay.output import markers_topic

        check_inputs(inputs)
        description = describe(topology, config)
        run = _BrokerRun(self.broker, description, dict(config or {}), dict(partitions or {}))
        try:
            run.create_topics()
            producer = Producer(
                {
                    "bootstrap.servers": self.broker.bootstrap,
                    "partitioner": "murmur2_random",
                    "enable.idempotence": True,
                }
            )
            serdes: dict[str, tuple[Serde, Serde]] = {}
            for topic, key, value, timestamp_ms in inputs:
                if topic not in serdes:
                    serdes[topic] = input_serdes(description, topic, run.topic(topic))
                key_serde, value_serde = serdes[topic]
                producer.produce(
                    run.topic(topic),
                    key=key_serde.serialize(key),
                    value=value_serde.serialize(value),
                    timestamp=timestamp_ms,
                )
            assert producer.flush(30) == 0, "inputs were not delivered"
            renamed = TopologyDescription.from_dict(rename_topics(description.to_dict(), run.topic))
            sources = [run.topic(t) for t in description.external_source_topics()]
            ends = _retrying(lambda: run._end_offsets(sources))  # fresh topics: leaders may still move
            end_offsets: dict[str, dict[int, int]] = {}
            for tp, end in ends.items():
                end_offsets.setdefault(tp.topic, {})[tp.partition] = end
            plan = ReplayPlan(
                renamed,
                run.config,
                self.broker.bootstrap,
                start_offsets={t: dict.fromkeys(parts, 0) for t, parts in end_offsets.items()},
                end_offsets=end_offsets,
                partitions={run.topic(t): run.partitions.get(t, 1) for t in description.sink_topics()},
                replay_id=run.prefix,
                write_repartition_topics=any("-repartition" in name for name in outputs),
            )
            run.created.append(markers_topic(plan.replay_id))
            replay = run_replay(self.spark, plan)
            self.results.append(replay)
            wait_stable(self.broker.admin, [TopicPartition(w.topic, w.partition) for w in replay.writes])
            result = {name: run.read(name) for name in outputs}
            stores = run.store_contents() if compare else {}
        finally:
            run.cleanup()
        if compare:
            mode: Compare = "records" if compare is True else compare
            compare_with_driver(self.name, description, (inputs, outputs, config, partitions), result, stores, mode)
        return result
