"""What a stream thread reports to its supervisor: plain, picklable data sent about once a second.

The supervisor aggregates these into ``/readyz``, ``/status`` and ``/metrics``; nothing here talks to
Kafka or RocksDB.
"""

from __future__ import annotations

import bisect
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from streamapp.processors.drops import ProcessorMetrics
    from streamapp.sensors import KafkaSample

__all__ = [
    "COMMIT_LATENCY_BUCKETS",
    "FAILURE_TEXT_MAX_BYTES",
    "Failure",
    "RecordLatenessStatus",
    "StoreRestoreStatus",
    "TaskStatus",
    "ThreadFailed",
    "ThreadMetrics",
    "WorkerStatus",
    "bounded_text",
    "task_drop_status",
]

COMMIT_LATENCY_BUCKETS: tuple[float, ...] = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
"""Upper bounds (seconds) of the commit latency histogram buckets; +Inf is implied."""
FAILURE_TEXT_MAX_BYTES = 1024
"""Bound of a failure's error text (UTF-8 bytes): a ``/status`` document stays small whatever the error says."""


@dataclass
class StoreRestoreStatus:
    """Restore progress of one store of a task (``streamapp.state.restore.StoreRestoreProgress`` as plain data).

    ``changelog``: its changelog partition (``topic-partition``); ``restored_records``: records applied;
    ``restore_remaining``: changelog offsets left; ``records_per_second``: the restore rate over the last 10 s
    (None until known); ``seconds_left``: ``restore_remaining / records_per_second`` (None without a rate).
    """

    store: str
    changelog: str
    restored_records: int
    restore_remaining: int
    records_per_second: float | None = None
    seconds_left: float | None = None


@dataclass
class RecordLatenessStatus:
    """How late the records of one time-aware processor of a task were, since the task started (ms behind the
    processor's observed stream time; Kafka's ``record-lateness``): ``count`` records, ``avg_ms``, ``max_ms``."""

    count: int
    avg_ms: float
    max_ms: int


@dataclass
class TaskStatus:
    """One task of a stream thread. ``state``: created | restoring | running. ``restored_records``: records
    restored so far while restoring, then the count of its last completed restore (0: nothing to restore);
    ``restore_remaining``: changelog offsets left (0 once running).

    ``stores``: while restoring, every store of the task with its progress; once running, the stores its last
    restore applied records to (none when nothing was restored, so a ``/status`` of many tasks stays small).
    ``restored_records`` and ``restore_remaining`` are the sums over the stores.
    """

    task_id: str
    state: str
    partitions: list[str]
    records_processed: int = 0
    restored_records: int = 0
    restore_remaining: int = 0
    stream_time: int = -1
    stores: list[StoreRestoreStatus] = field(default_factory=list)
    dropped_records: dict[str, int] = field(default_factory=dict)
    """Records the task dropped since it was created, by reason (``streamapp.drop_reasons``; reasons that never
    happened are absent): Kafka's task-level ``dropped-records``."""
    record_lateness: dict[str, RecordLatenessStatus] = field(default_factory=dict)
    """Per time-aware processor (windowed aggregations, stream-stream joins) that has seen a record."""
    join_misses: dict[str, int] = field(default_factory=dict)
    """Per stream-table / stream-global-table join: stream records that found no table value."""


@dataclass
class ThreadMetrics:
    """Monotonic counters of one stream thread since its worker process started."""

    records_processed_total: int = 0
    dropped_records_total: int = 0
    dropped_records_by_reason: dict[str, int] = field(default_factory=dict)
    """``dropped_records_total`` by reason (``streamapp.drop_reasons``), closed tasks included: what the operator
    sums into ``StreamApp.status.droppedRecords``."""
    restore_records_total: int = 0
    standby_records_total: int = 0
    """Changelog records applied to standby tasks' stores."""
    dead_letter_records_total: int = 0
    """Failed records written to the dead-letter topic (``errors.dead.letter.queue.topic.name``)."""
    transactions_aborted_total: int = 0
    """Transactions aborted under ``exactly_once_v2`` (the tasks were revived from their last commit)."""
    commits_total: int = 0
    commit_seconds_sum: float = 0.0
    commit_seconds_buckets: list[int] = field(default_factory=lambda: [0] * len(COMMIT_LATENCY_BUCKETS))
    """Non-cumulative counts per bucket of ``COMMIT_LATENCY_BUCKETS`` (the +Inf bucket is the rest)."""
    offset_reset_skipped_records: dict[str, int] = field(default_factory=dict)
    """Per input partition (``topic-partition``), records an offset reset skipped: deleted (retention,
    ``delete_records``) before the thread read them (``streamapp.kafka.clients.KafkaConsumer``)."""

    def observe_offset_reset(self, partition: str, records: int) -> None:
        """``records`` of ``partition`` (``topic-partition``) were skipped by an offset reset."""
        self.offset_reset_skipped_records[partition] = self.offset_reset_skipped_records.get(partition, 0) + records

    def observe_commit(self, seconds: float) -> None:
        self.commits_total += 1
        self.commit_seconds_sum += seconds
        index = bisect.bisect_left(COMMIT_LATENCY_BUCKETS, seconds)
        if index < len(COMMIT_LATENCY_BUCKETS):
            self.commit_seconds_buckets[index] += 1


@dataclass
class WorkerStatus:
    """A stream thread's state as of ``reported_at`` (epoch seconds).

    ``state``: starting | running | waiting (cannot join the group yet) | stopping | failed.
    ``ready``: the thread is in the group and every task it owns is restored and running.
    ``consumer_lag``: records behind the end, per owned input partition (``topic-partition``), where known.
    ``global_positions``: next offset the global consumer reads, per global-table partition (``topic-partition``).
    ``standby_tasks``: the thread's standby tasks, each with the next changelog offset it applies per changelog
    partition (``topic-partition``).
    """

    thread: int
    pid: int
    state: str
    ready: bool
    group_joined: bool
    reported_at: float
    tasks: list[TaskStatus] = field(default_factory=list)
    metrics: ThreadMetrics = field(default_factory=ThreadMetrics)
    consumer_lag: dict[str, int] = field(default_factory=dict)
    error: str | None = None
    global_positions: dict[str, int] = field(default_factory=dict)
    standby_tasks: dict[str, dict[str, int]] = field(default_factory=dict)
    kafka_metrics: list[KafkaSample] = field(default_factory=list)
    """Kafka Streams' metrics of the thread and its tasks, ``(group, name, tags, value)`` in Kafka's names
    (``streamapp.sensors``), as ``metrics.recording.level`` records them: what ``/metrics`` exports as
    ``kafka_streams_*`` (``streamapp.monitoring.kafka_metrics``)."""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Failure:
    """Why a stream thread (or the instance) failed: ``/status`` ``workers[].last_failure`` and the top-level
    ``last_failure``.

    ``task`` (``"0_1"``), ``topic``, ``partition`` and ``offset`` name the record being processed when it is
    known (a record handler said *fail*), else ``None``. ``error``: ``"<Type>: <message>"``, at most
    ``FAILURE_TEXT_MAX_BYTES``. ``at``: epoch seconds.
    """

    error: str
    at: float
    task: str | None = None
    topic: str | None = None
    partition: int | None = None
    offset: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "task": self.task,
            "topic": self.topic,
            "partition": self.partition,
            "offset": self.offset,
            "error": self.error,
            "at": self.at,
        }


@dataclass(frozen=True)
class ThreadFailed:
    """The last report of a worker process whose stream thread failed (sent just before it exits non-zero)."""

    thread: int
    pid: int
    failure: Failure


def bounded_text(text: str, max_bytes: int = FAILURE_TEXT_MAX_BYTES) -> str:
    """``text`` cut to at most ``max_bytes`` UTF-8 bytes (never inside a character), marked with ``...``."""
    data = text.encode()
    if len(data) <= max_bytes:
        return text
    return data[: max_bytes - 3].decode(errors="ignore") + "..."


def task_drop_status(metrics: ProcessorMetrics) -> dict[str, Any]:
    """A task's drop counters as ``TaskStatus`` fields (``dropped_records``, ``record_lateness``,
    ``join_misses``), copied: the report is pickled while the task goes on counting."""
    return {
        "dropped_records": dict(metrics.dropped),
        "record_lateness": {
            name: RecordLatenessStatus(lateness.count, round(lateness.avg_ms, 1), lateness.max_ms)
            for name, lateness in metrics.lateness.items()
            if lateness.count
        },
        "join_misses": dict(metrics.join_misses),
    }
