"""Kafka Streams' sensors: what a stream thread records for ``metrics.recording.level`` and reports as samples.

Kafka Streams records its built-in metrics with sensors of a recording level (``Sensor.RecordingLevel``): INFO
ones always, DEBUG ones when ``metrics.recording.level`` is DEBUG or TRACE, TRACE ones only at TRACE
(``StreamsMetricsImpl``). The same gates decide here what is measured at all, so INFO costs nothing per record
beyond the source and terminal nodes' end-to-end latency (Kafka's INFO ``record-e2e-latency``):

- ``ThreadSensors`` (INFO; ``ThreadMetrics``): process, poll, commit and punctuate counts and latencies (ms),
  tasks created and closed;
- ``TaskSensors``: per task, the processor nodes' ``record-e2e-latency`` at source and terminal nodes (INFO,
  ``ProcessorNodeMetrics.e2ELatencySensor``, ms: wall clock minus the record's timestamp), the nodes' process
  counts (DEBUG, ``ProcessorNodeMetrics.processSensor``) and the key-value stores' put and get counts and
  latencies (DEBUG, ns, ``StateStoreMetrics``) with their ``record-e2e-latency`` at put (TRACE);
- ``NodeSensor`` and ``MeteredKeyValueStore``: the wrappers that record them, put in place only at their level.

Avg / min / max are Kafka's sampled stats (``WindowedStat``): over the last two samples of 30 s each (Kafka's
``metrics.num.samples`` and ``metrics.sample.window.ms`` defaults), NaN when nothing was recorded in them.

A stream thread reports its sensors about once a second as ``KafkaSample`` tuples ``(group, name, tags, value)``
in Kafka's own group, metric and tag names (``streamapp.processing.status.WorkerStatus.kafka_metrics``); the
supervisor's collector maps them to Prometheus names (``streamapp.monitoring.kafka_metrics``). Not thread-safe:
one stream thread process records and reads them.
"""

from __future__ import annotations

import enum
import math
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any, Final

__all__ = [
    "NODE_GROUP",
    "SAMPLE_WINDOW_MS",
    "STATE_GROUP",
    "TASK_GROUP",
    "THREAD_GROUP",
    "KafkaSample",
    "MeteredKeyValueStore",
    "NodeSensor",
    "RecordingLevel",
    "StoreSensor",
    "TaskSensors",
    "ThreadSensors",
    "WindowedStat",
]

THREAD_GROUP: Final = "stream-thread-metrics"
TASK_GROUP: Final = "stream-task-metrics"
NODE_GROUP: Final = "stream-processor-node-metrics"
STATE_GROUP: Final = "stream-state-metrics"
SAMPLE_WINDOW_MS: Final = 30_000
"""Kafka's ``metrics.sample.window.ms`` default; two samples are kept (``metrics.num.samples``)."""

KafkaSample = tuple[str, str, dict[str, str], float]
"""``(group, metric name, tags, value)`` in Kafka's names, e.g. ``("stream-thread-metrics", "process-total",
{"thread-id": "app-0-StreamThread-1"}, 42.0)``."""

STORE_OPERATIONS: Final = ("put", "get")
"""The key-value store operations measured at DEBUG (``StateStoreMetrics``' put and get sensors of
``MeteredKeyValueStore``)."""


class RecordingLevel(enum.IntEnum):
    """``metrics.recording.level``: a sensor records when its level is at most the configured one."""

    INFO = 0
    DEBUG = 1
    TRACE = 2


_ns: Final = time.perf_counter_ns


class WindowedStat:
    """Count, sum, min and max of the values recorded in the current and the previous sample window (Kafka's
    ``SampledStat`` with two samples of ``window_ms``): ``avg``/``min``/``max`` at ``now_ms`` are over the samples
    not older than two windows, NaN when none has a value."""

    __slots__ = ("_prev", "count", "max", "min", "start", "total", "window_ms")

    def __init__(self, window_ms: int = SAMPLE_WINDOW_MS) -> None:
        self.window_ms = window_ms
        self.start = -(1 << 62)
        self.count = 0
        self.total = 0.0
        self.min = math.inf
        self.max = -math.inf
        self._prev: tuple[int, int, float, float, float] | None = None

    def record(self, value: float, now_ms: int) -> None:
        """Record ``value`` at ``now_ms`` (epoch ms)."""
        if now_ms - self.start >= self.window_ms:
            self._roll(now_ms)
        self.count += 1
        self.total += value
        if value < self.min:
            self.min = value
        if value > self.max:
            self.max = value

    def _roll(self, now_ms: int) -> None:
        self._prev = (self.start, self.count, self.total, self.min, self.max) if self.count else None
        self.start, self.count, self.total, self.min, self.max = now_ms, 0, 0.0, math.inf, -math.inf

    def _samples(self, now_ms: int) -> list[tuple[int, float, float, float]]:
        horizon = now_ms - 2 * self.window_ms
        samples = []
        if self._prev is not None and self._prev[0] > horizon:
            samples.append(self._prev[1:])
        if self.count and self.start > horizon:
            samples.append((self.count, self.total, self.min, self.max))
        return samples

    def avg(self, now_ms: int) -> float:
        samples = self._samples(now_ms)
        count = sum(s[0] for s in samples)
        return sum(s[1] for s in samples) / count if count else math.nan

    def minimum(self, now_ms: int) -> float:
        samples = self._samples(now_ms)
        return min(s[2] for s in samples) if samples else math.nan

    def maximum(self, now_ms: int) -> float:
        samples = self._samples(now_ms)
        return max(s[3] for s in samples) if samples else math.nan


def _avg_max(stat: WindowedStat, prefix: str, now_ms: int) -> Iterator[tuple[str, float]]:
    yield f"{prefix}-avg", stat.avg(now_ms)
    yield f"{prefix}-max", stat.maximum(now_ms)


class ThreadSensors:
    """A stream thread's INFO sensors (``ThreadMetrics``): calls and latencies (ms) of process (per record of
    an iteration, as Kafka's ``StreamThread`` records ``processLatency / processed``), poll (with the records
    it returned), commit and punctuate."""

    def __init__(self) -> None:
        self.process = WindowedStat()
        self.process_total = 0
        self.poll = WindowedStat()
        self.poll_records = WindowedStat()
        self.poll_total = 0
        self.commit = WindowedStat()
        self.commit_total = 0
        self.punctuate = WindowedStat()
        self.punctuate_total = 0
        self.task_created_total = 0
        self.task_closed_total = 0
        """Set by the stream thread from its task manager's counts."""

    def record_poll(self, latency_ms: float, records: int, now_ms: int) -> None:
        self.poll_total += 1
        self.poll.record(latency_ms, now_ms)
        self.poll_records.record(records, now_ms)

    def record_process(self, latency_ms: float, records: int, now_ms: int) -> None:
        """``records`` processed in ``latency_ms`` by one iteration (nothing is recorded for none)."""
        if records:
            self.process_total += records
            self.process.record(latency_ms / records, now_ms)

    def record_commit(self, latency_ms: float, now_ms: int) -> None:
        self.commit_total += 1
        self.commit.record(latency_ms, now_ms)

    def record_punctuate(self, latency_ms: float, now_ms: int) -> None:
        self.punctuate_total += 1
        self.punctuate.record(latency_ms, now_ms)

    def samples(self, thread_id: str, now_ms: int) -> Iterator[KafkaSample]:
        tags = {"thread-id": thread_id}
        values: list[tuple[str, float]] = [
            ("process-total", self.process_total),
            ("poll-total", self.poll_total),
            ("commit-total", self.commit_total),
            ("punctuate-total", self.punctuate_total),
            ("task-created-total", self.task_created_total),
            ("task-closed-total", self.task_closed_total),
            *_avg_max(self.process, "process-latency", now_ms),
            *_avg_max(self.poll, "poll-latency", now_ms),
            *_avg_max(self.poll_records, "poll-records", now_ms),
            *_avg_max(self.commit, "commit-latency", now_ms),
            *_avg_max(self.punctuate, "punctuate-latency", now_ms),
        ]
        for name, value in values:
            yield THREAD_GROUP, name, tags, float(value)


class NodeSensor:
    """A processor node seen through its sensors: counts the records it processes (DEBUG ``process-total``) and,
    at a terminal node, records ``record-e2e-latency`` after it processed one (Kafka's
    ``ProcessorContextImpl.forwardInternal``). Wraps the node's processor (or one parent's entry into it)."""

    __slots__ = ("_e2e", "_sensors", "count", "processor")

    def __init__(self, processor: Any, sensors: TaskSensors, e2e: WindowedStat | None) -> None:
        self.processor = processor
        self._sensors = sensors
        self._e2e = e2e
        self.count = 0

    def process(self, key: Any, value: Any, timestamp: int) -> None:
        self.count += 1
        self.processor.process(key, value, timestamp)
        if self._e2e is not None:
            now = self._sensors.now_ms
            self._e2e.record(now - timestamp, now)


class TaskSensors:
    """One task's sensors (see the module docstring). ``level``: ``metrics.recording.level``. ``now_ms``: the
    wall clock the task read when it started processing its records (Kafka's cached system time of the thread's
    iteration); ``timestamp``: the timestamp of the record being processed (store e2e latency, TRACE)."""

    def __init__(self, level: RecordingLevel = RecordingLevel.INFO) -> None:
        self.level = level
        self.now_ms = 0
        self.timestamp: Callable[[], int] = lambda: -1
        self.e2e: dict[str, WindowedStat] = {}
        """Per source and terminal node."""
        self.nodes: dict[str, list[NodeSensor]] = {}
        """Per node (DEBUG): the wrappers counting its records (one per parent entry)."""
        self.stores: dict[tuple[str, str], StoreSensor] = {}
        """Per ``(store type, store)`` (DEBUG)."""

    @property
    def debug(self) -> bool:
        return self.level >= RecordingLevel.DEBUG

    def e2e_of(self, node: str) -> WindowedStat:
        """The ``record-e2e-latency`` stat of source or terminal ``node`` (created on first use)."""
        stat = self.e2e.get(node)
        if stat is None:
            stat = self.e2e[node] = WindowedStat()
        return stat

    def node(self, name: str, processor: Any, *, terminal: bool) -> Any:
        """``processor`` of node ``name`` as its parent should call it: wrapped in a ``NodeSensor`` at DEBUG, or
        at a terminal node (its INFO e2e latency); else ``processor`` itself, at no cost."""
        if not (self.debug or terminal):
            return processor
        sensor = NodeSensor(processor, self, self.e2e_of(name) if terminal else None)
        self.nodes.setdefault(name, []).append(sensor)
        return sensor

    def count_node(self, name: str) -> None:
        """Count one record into source node ``name`` (DEBUG; sources are called by the task, not wrapped)."""
        sensors = self.nodes.get(name)
        if sensors is None:
            sensors = self.nodes[name] = [NodeSensor(None, self, None)]
        sensors[0].count += 1

    def store(self, store_type: str, name: str, inner: Any) -> Any:
        """``inner`` (a typed key-value store of ``store_type``, Kafka's metrics scope, e.g. ``rocksdb``) measured
        by a ``MeteredKeyValueStore`` at DEBUG, else ``inner`` itself."""
        if not self.debug:
            return inner
        sensor = self.stores.get((store_type, name))
        if sensor is None:
            sensor = self.stores[(store_type, name)] = StoreSensor(self.level >= RecordingLevel.TRACE)
        return MeteredKeyValueStore(inner, self, sensor)

    def samples(
        self, thread_id: str, task_id: str, now_ms: int, *, processed: int, dropped: int, lateness: Mapping[str, Any]
    ) -> Iterator[KafkaSample]:
        """The task's samples: ``processed`` and ``dropped`` records (task-level ``process-total`` at DEBUG,
        ``dropped-records-total`` at INFO) and, at DEBUG, ``record-lateness-avg``/``-max`` over ``lateness`` (the
        processors' ``RecordLateness``, since the task started) besides the sensors above."""
        tags = {"thread-id": thread_id, "task-id": task_id}
        yield TASK_GROUP, "dropped-records-total", tags, float(dropped)
        if self.debug:
            yield TASK_GROUP, "process-total", tags, float(processed)
            count = sum(stat.count for stat in lateness.values())
            total = sum(stat.total_ms for stat in lateness.values())
            yield TASK_GROUP, "record-lateness-avg", tags, total / count if count else math.nan
            yield TASK_GROUP, "record-lateness-max", tags, float(max((s.max_ms for s in lateness.values()), default=0))
        for node, stat in self.e2e.items():
            node_tags = {**tags, "processor-node-id": node}
            yield NODE_GROUP, "record-e2e-latency-avg", node_tags, stat.avg(now_ms)
            yield NODE_GROUP, "record-e2e-latency-min", node_tags, stat.minimum(now_ms)
            yield NODE_GROUP, "record-e2e-latency-max", node_tags, stat.maximum(now_ms)
        for node, sensors in self.nodes.items() if self.debug else ():
            yield NODE_GROUP, "process-total", {**tags, "processor-node-id": node}, float(sum(s.count for s in sensors))
        for (store_type, store), sensor in self.stores.items():
            store_tags = {**tags, f"{store_type}-state-id": store}
            for op, count, stat in (("put", sensor.put_count, sensor.put), ("get", sensor.get_count, sensor.get)):
                yield STATE_GROUP, f"{op}-total", store_tags, float(count)
                yield STATE_GROUP, f"{op}-latency-avg", store_tags, stat.avg(now_ms)
                yield STATE_GROUP, f"{op}-latency-max", store_tags, stat.maximum(now_ms)
            e2e = sensor.e2e
            if e2e is not None:
                yield STATE_GROUP, "record-e2e-latency-avg", store_tags, e2e.avg(now_ms)
                yield STATE_GROUP, "record-e2e-latency-min", store_tags, e2e.minimum(now_ms)
                yield STATE_GROUP, "record-e2e-latency-max", store_tags, e2e.maximum(now_ms)


class StoreSensor:
    """The DEBUG sensors of one store of a task: put and get counts and latency stats (ns), and at TRACE the
    end-to-end latency of its puts (ms; ``None`` below TRACE)."""

    __slots__ = ("e2e", "get", "get_count", "put", "put_count")

    def __init__(self, trace: bool) -> None:
        self.put_count = 0
        self.get_count = 0
        self.put = WindowedStat()
        self.get = WindowedStat()
        self.e2e = WindowedStat() if trace else None


class MeteredKeyValueStore:
    """A typed key-value store (``streamapp.state.stores.TypedKeyValueStore``) measured like Kafka's
    ``MeteredKeyValueStore``: each put (``put``, ``put_raw_key``, ``put_serialized``) and get (``get``,
    ``get_with_timestamp``, ``get_raw_key``) that returns is counted and timed (ns, ``time.perf_counter_ns``) into
    its ``StoreSensor``; at TRACE a put also records the record's end-to-end latency (``now_ms`` minus the
    timestamp of the record being processed). Other attributes pass through to the store."""

    def __init__(self, inner: Any, sensors: TaskSensors, sensor: StoreSensor) -> None:
        self._inner = inner
        self._sensors = sensors
        self._sensor = sensor

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def get(self, key: Any) -> Any:
        started = _ns()
        value = self._inner.get(key)
        self._got(started)
        return value

    def get_with_timestamp(self, key: Any) -> Any:
        started = _ns()
        found = self._inner.get_with_timestamp(key)
        self._got(started)
        return found

    def get_raw_key(self, raw_key: bytes) -> Any:
        started = _ns()
        found = self._inner.get_raw_key(raw_key)
        self._got(started)
        return found

    def put(self, key: Any, value: Any, *timestamp: int) -> None:
        started = _ns()
        self._inner.put(key, value, *timestamp)
        self._put(started)

    def put_raw_key(self, raw_key: bytes, value: Any, *timestamp: int) -> None:
        started = _ns()
        self._inner.put_raw_key(raw_key, value, *timestamp)
        self._put(started)

    def put_serialized(self, raw_key: bytes, raw_value: bytes | None, *timestamp: int) -> None:
        started = _ns()
        self._inner.put_serialized(raw_key, raw_value, *timestamp)
        self._put(started)

    def _got(self, started: int) -> None:
        sensor = self._sensor
        sensor.get_count += 1
        sensor.get.record(_ns() - started, self._sensors.now_ms)

    def _put(self, started: int) -> None:
        sensor, now = self._sensor, self._sensors.now_ms
        sensor.put_count += 1
        sensor.put.record(_ns() - started, now)
        if sensor.e2e is not None:
            sensor.e2e.record(now - self._sensors.timestamp(), now)
