"""What a stream thread reports to its supervisor: plain, picklable data sent about once a second.

The supervisor aggregates these into ``/readyz``, ``/status`` and ``/metrics``; nothing here talks to
Kafka or RocksDB.
"""

from __future__ import annotations

import bisect
from dataclasses import asdict, dataclass, field
from typing import Any

__all__ = ["COMMIT_LATENCY_BUCKETS", "TaskStatus", "ThreadMetrics", "WorkerStatus"]

COMMIT_LATENCY_BUCKETS: tuple[float, ...] = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
"""Upper bounds (seconds) of the commit latency histogram buckets; +Inf is implied."""


@dataclass
class TaskStatus:
    """One task of a stream thread. ``state``: created | restoring | running. ``restored_records``: records
    restored so far while restoring, then the count of its last completed restore (0: nothing to restore)."""

    task_id: str
    state: str
    partitions: list[str]
    records_processed: int = 0
    restored_records: int = 0
    restore_remaining: int = 0
    stream_time: int = -1


@dataclass
class ThreadMetrics:
    """Monotonic counters of one stream thread since its worker process started."""

    records_processed_total: int = 0
    dropped_records_total: int = 0
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

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)
