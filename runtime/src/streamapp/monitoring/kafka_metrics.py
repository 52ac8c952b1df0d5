"""Kafka Streams' built-in metrics as Prometheus series: the catalog, the name mapping and the collector.

The stream threads report their sensors in Kafka's names (``streamapp.sensors``); ``KAFKA_METRICS`` lists every
metric that can be reported, with its group, level and tags (Kafka's ``ThreadMetrics``, ``TaskMetrics``,
``ProcessorNodeMetrics``, ``StateStoreMetrics``). The Prometheus name is mechanical, as the Prometheus JMX
exporter's default rule names a JMX bean ``kafka.streams:type=<group>,<tags>`` attribute ``<name>``:

- ``kafka_streams_<group>_<name>`` with ``-`` as ``_``, e.g. ``stream-thread-metrics`` ``process-latency-avg``
  -> ``kafka_streams_stream_thread_metrics_process_latency_avg``;
- tags are labels with ``-`` as ``_`` (``thread-id`` -> ``thread_id``, ``rocksdb-state-id`` ->
  ``rocksdb_state_id``);
- a Kafka ``<op>-total`` is a counter ``..._<op>_total``; Kafka's ``<op>-rate`` (a 60 s windowed rate) is not
  exported: it is ``rate(..._<op>_total[1m])`` (the store level has only ``-rate`` in Kafka: its counter is
  exported the same way);
- avg / min / max are gauges over Kafka's two 30 s samples (``streamapp.sensors.WindowedStat``), NaN when
  nothing was recorded in them. Units are Kafka's: ms, except the stores' latencies (ns).

Every series also has the ``thread`` label of the ``streamapp_*`` series (the stream thread's index).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Final

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from streamapp.sensors import NODE_GROUP, STATE_GROUP, STORE_OPERATIONS, TASK_GROUP, THREAD_GROUP, KafkaSample

__all__ = ["KAFKA_METRICS", "KafkaMetric", "exported_names", "families", "prometheus_name"]

PREFIX: Final = "kafka_streams"
_THREAD = ("thread-id",)
_TASK = ("thread-id", "task-id")
_NODE = ("thread-id", "task-id", "processor-node-id")
_STORE = ("thread-id", "task-id", "rocksdb-state-id")


@dataclass(frozen=True)
class KafkaMetric:
    """One Kafka Streams metric: ``group`` and ``name`` (Kafka's), ``level`` (the lowest
    ``metrics.recording.level`` that records it), ``tags`` (Kafka's, in order), ``help`` (with the unit)."""

    group: str
    name: str
    level: str
    tags: tuple[str, ...]
    help: str

    @property
    def counter(self) -> bool:
        return self.name.endswith("-total")


def _avg_max(
    group: str, metric: str, level: str, tags: tuple[str, ...], what: str, stats: str = "avg max"
) -> list[KafkaMetric]:
    return [KafkaMetric(group, f"{metric}-{stat}", level, tags, f"{stat} {what}") for stat in stats.split()]


KAFKA_METRICS: Final[tuple[KafkaMetric, ...]] = (
    # ThreadMetrics (INFO)
    KafkaMetric(THREAD_GROUP, "process-total", "INFO", _THREAD, "records processed"),
    KafkaMetric(THREAD_GROUP, "poll-total", "INFO", _THREAD, "calls to poll"),
    KafkaMetric(THREAD_GROUP, "commit-total", "INFO", _THREAD, "calls to commit"),
    KafkaMetric(THREAD_GROUP, "punctuate-total", "INFO", _THREAD, "loop iterations that ran wall-clock punctuators"),
    KafkaMetric(THREAD_GROUP, "task-created-total", "INFO", _THREAD, "active tasks created"),
    KafkaMetric(THREAD_GROUP, "task-closed-total", "INFO", _THREAD, "active tasks closed"),
    *_avg_max(THREAD_GROUP, "process-latency", "INFO", _THREAD, "latency of processing a record (ms)"),
    *_avg_max(THREAD_GROUP, "poll-latency", "INFO", _THREAD, "poll latency (ms)"),
    *_avg_max(THREAD_GROUP, "poll-records", "INFO", _THREAD, "records a poll returned"),
    *_avg_max(THREAD_GROUP, "commit-latency", "INFO", _THREAD, "commit latency (ms)"),
    *_avg_max(THREAD_GROUP, "punctuate-latency", "INFO", _THREAD, "wall-clock punctuation latency (ms)"),
    # TaskMetrics
    KafkaMetric(TASK_GROUP, "dropped-records-total", "INFO", _TASK, "records dropped by the task"),
    KafkaMetric(TASK_GROUP, "process-total", "DEBUG", _TASK, "records processed by the task"),
    *_avg_max(TASK_GROUP, "record-lateness", "DEBUG", _TASK, "lateness of the task's records since it started (ms)"),
    # ProcessorNodeMetrics
    KafkaMetric(NODE_GROUP, "process-total", "DEBUG", _NODE, "records the node processed"),
    *_avg_max(
        NODE_GROUP,
        "record-e2e-latency",
        "INFO",
        _NODE,
        "wall clock minus record timestamp at a source or terminal node (ms)",
        "avg min max",
    ),
    # StateStoreMetrics (key-value stores)
    *(KafkaMetric(STATE_GROUP, f"{op}-total", "DEBUG", _STORE, f"calls to {op}") for op in STORE_OPERATIONS),
    *(
        m
        for op in STORE_OPERATIONS
        for m in _avg_max(STATE_GROUP, f"{op}-latency", "DEBUG", _STORE, f"{op} latency (ns)")
    ),
    *_avg_max(
        STATE_GROUP,
        "record-e2e-latency",
        "TRACE",
        _STORE,
        "wall clock minus record timestamp at a put (ms)",
        "avg min max",
    ),
)
"""Every Kafka Streams metric a stream thread reports (see the module docstring)."""

_BY_KEY: Final = {(m.group, m.name): m for m in KAFKA_METRICS}


def _snake(text: str) -> str:
    return text.replace("-", "_")


def prometheus_name(metric: KafkaMetric) -> str:
    """The family name of ``metric``: ``kafka_streams_<group>_<name>``, a counter without its ``_total``
    (``prometheus_client`` adds it to the sample)."""
    name = metric.name.removesuffix("-total") if metric.counter else metric.name
    return f"{PREFIX}_{_snake(metric.group)}_{_snake(name)}"


def exported_names() -> frozenset[str]:
    """The sample names ``/metrics`` can show for the Kafka Streams metrics (counters with ``_total``)."""
    return frozenset(prometheus_name(m) + ("_total" if m.counter else "") for m in KAFKA_METRICS)


def families(reports: Iterable[tuple[str, list[KafkaSample]]]) -> Iterator[Metric]:
    """One family per ``KAFKA_METRICS`` entry from ``(thread label, samples)`` per stream thread; a sample of an
    unknown metric raises KeyError (the catalog and the sensors disagree)."""
    built: dict[tuple[str, str], CounterMetricFamily | GaugeMetricFamily] = {}
    for metric in KAFKA_METRICS:
        labels = ["thread", *(_snake(tag) for tag in metric.tags)]
        kind = CounterMetricFamily if metric.counter else GaugeMetricFamily
        help_text = f"Kafka Streams {metric.group} {metric.name} ({metric.level}): {metric.help}"
        built[(metric.group, metric.name)] = kind(prometheus_name(metric), help_text, labels=labels)
    for thread, samples in reports:
        for group, name, tags, value in samples:
            metric = _BY_KEY[(group, name)]
            built[(group, name)].add_metric([thread, *(tags[tag] for tag in metric.tags)], value)
    yield from built.values()
