"""The TopologyTestDriver's metrics under Kafka Streams' names, groups and tags.

``driver.kafka_metrics()`` returns ``{MetricName: value}`` like Kafka's ``TopologyTestDriver.metrics()``
(``StreamsMetricsImpl``, ``ThreadMetrics``, ``TaskMetrics``, ``ProcessorNodeMetrics``):

=============================  ================================================  ==================================
group                          names                                             tags
=============================  ================================================  ==================================
stream-thread-metrics          process-total, process-rate, commit-total         thread-id
stream-task-metrics            process-total, process-rate,                      thread-id, task-id
                               dropped-records-total, dropped-records-rate
stream-processor-node-metrics  process-total, process-rate (source nodes only,   thread-id, task-id,
                               as in Kafka since KIP-444); record-lateness-avg,  processor-node-id
                               record-lateness-max (time-aware processors)
=============================  ================================================  ==================================

Kafka records ``record-lateness`` per task since KIP-444 (per processor node before); here it is per time-aware
processor (windowed aggregations, stream-stream joins), whose observed stream time decides its drops
(docs/metrics.md), in ms since the task started.

``thread-id`` is the calling Python thread's name, as Kafka's driver uses ``Thread.currentThread().getName()``;
``task-id`` is ``<sub-topology>_<partition>``. A ``-total`` is a count since the driver started; a ``-rate``
is that count per second of the driver's wall-clock time (``advance_wall_clock_time``), dividing by at least
30 s, as Kafka's ``Rate`` with its default two 30 s samples does. A source node's ``process-total`` counts the
records its task consumed from the node's topics (records skipped for an invalid timestamp or a handled
deserialization error included; Kafka counts only those passed on).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

__all__ = ["MetricName", "NodeCount", "NodeLateness", "TaskCounts", "driver_metrics"]

THREAD_GROUP = "stream-thread-metrics"
TASK_GROUP = "stream-task-metrics"
NODE_GROUP = "stream-processor-node-metrics"
_MIN_RATE_WINDOW_MS = 30_000
"""Kafka's ``Rate`` divides by at least ``(samples - 1) * window`` = 30 s with the default config."""


@dataclass(frozen=True)
class MetricName:
    """A metric's identity (Kafka's ``MetricName``): ``name``, ``group`` and ``tags`` as sorted pairs.

    Build one with ``MetricName.of("process-total", "stream-task-metrics", {"thread-id": t, "task-id": "0_0"})``.
    """

    name: str
    group: str
    tags: tuple[tuple[str, str], ...] = ()

    @classmethod
    def of(cls, name: str, group: str, tags: Mapping[str, str]) -> MetricName:
        return cls(name, group, tuple(sorted(tags.items())))

    def tag(self, key: str) -> str | None:
        return dict(self.tags).get(key)


@dataclass(frozen=True)
class NodeCount:
    """Records a source node of a task took in."""

    node: str
    records: int


@dataclass(frozen=True)
class NodeLateness:
    """How late a time-aware processor's records were (ms behind its observed stream time)."""

    node: str
    avg_ms: float
    max_ms: int


@dataclass(frozen=True)
class TaskCounts:
    """One task's counters: records processed, records dropped, per source node the records taken in, and per
    time-aware processor its records' lateness."""

    task_id: str
    processed: int
    dropped: int
    sources: tuple[NodeCount, ...] = ()
    lateness: tuple[NodeLateness, ...] = ()


def driver_metrics(
    thread_id: str, processed: int, commits: int, tasks: Iterable[TaskCounts], elapsed_ms: int
) -> dict[MetricName, float]:
    """The metrics map (see the module docstring) from the thread's and the tasks' counters."""
    window_s = max(elapsed_ms, _MIN_RATE_WINDOW_MS) / 1000

    def total_and_rate(out: dict[MetricName, float], prefix: str, group: str, tags: dict[str, str], n: int) -> None:
        out[MetricName.of(f"{prefix}-total", group, tags)] = float(n)
        out[MetricName.of(f"{prefix}-rate", group, tags)] = n / window_s

    thread_tags = {"thread-id": thread_id}
    out: dict[MetricName, float] = {}
    total_and_rate(out, "process", THREAD_GROUP, thread_tags, processed)
    out[MetricName.of("commit-total", THREAD_GROUP, thread_tags)] = float(commits)
    for task in tasks:
        task_tags = {**thread_tags, "task-id": task.task_id}
        total_and_rate(out, "process", TASK_GROUP, task_tags, task.processed)
        total_and_rate(out, "dropped-records", TASK_GROUP, task_tags, task.dropped)
        for source in task.sources:
            node_tags = {**task_tags, "processor-node-id": source.node}
            total_and_rate(out, "process", NODE_GROUP, node_tags, source.records)
        for node in task.lateness:
            node_tags = {**task_tags, "processor-node-id": node.node}
            out[MetricName.of("record-lateness-avg", NODE_GROUP, node_tags)] = node.avg_ms
            out[MetricName.of("record-lateness-max", NODE_GROUP, node_tags)] = float(node.max_ms)
    return out
