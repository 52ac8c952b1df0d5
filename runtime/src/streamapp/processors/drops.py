"""Every drop visible: the counters one task's processors update, and the log line each drop gets.

``ProcessorMetrics`` is per task (``StreamTask.metrics``), filled by its processors and read by the stream
thread's status report (``streamapp.processing.status``), which ``/metrics`` and ``/status`` show:

- ``dropped``: records dropped, by reason (``streamapp.drop_reasons``): Kafka's task-level ``dropped-records``
  split by why;
- ``lateness``: per time-aware processor (windowed aggregations, stream-stream joins), how far behind its
  observed stream time the records arrived (ms): Kafka's ``record-lateness`` avg / max (Kafka records it per
  task; here per task and processor, because a processor's own stream time decides its drops);
- ``join_misses``: per stream-table or stream-global-table join, stream records that found no table value.

Each drop and miss is logged at WARN through a ``streamapp.skips.SkipLog``: at most one line per kind and
processor every ``SKIP_LOG_INTERVAL_S`` (10 s); the skips in between are counted and the next line says how
many there were. A line names the record being processed (the task's ``RecordContext``: topic, partition,
offset) and, for late records, the window and stream time, as Kafka's ``AbstractKStreamTimeWindowAggregate
Processor`` does::

    Skipping record for expired window in count-per-origin: task=[0_1] topic=[flights] partition=[1]
    offset=[17] timestamp=[1000] window=[0,60000) expiration=[61000] streamTime=[121000]

Not thread-safe: one task is processed by one stream thread process.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from streamapp.drop_reasons import LATE
from streamapp.skips import SkipLog, skip_log

if TYPE_CHECKING:
    from streamapp.processors.base import RecordContext

__all__ = ["JoinMissLog", "ProcessorMetrics", "RecordLateness", "drop_log", "short_repr"]

log = logging.getLogger(__name__)


KEY_REPR_MAX = 80
"""A key is named in a log line by at most this many characters of its ``repr``."""


def short_repr(value: object) -> str:
    """``repr(value)``, cut to ``KEY_REPR_MAX`` characters (marked with ``...``)."""
    text = repr(value)
    return text if len(text) <= KEY_REPR_MAX else text[: KEY_REPR_MAX - 3] + "..."


def drop_log() -> SkipLog:
    """The process's rate-limited log of dropped records (logger ``streamapp.processors.drops``)."""
    return skip_log(log)


@dataclass(slots=True)
class RecordLateness:
    """How late the records of one processor were (ms behind its observed stream time, 0 for a record that
    advanced it), since the task started: Kafka's ``record-lateness`` with ``avg`` = ``total_ms / count``."""

    count: int = 0
    total_ms: int = 0
    max_ms: int = 0

    def record(self, lateness_ms: int) -> None:
        self.count += 1
        if lateness_ms > 0:
            self.total_ms += lateness_ms
            if lateness_ms > self.max_ms:
                self.max_ms = lateness_ms

    @property
    def avg_ms(self) -> float:
        return self.total_ms / self.count if self.count else 0.0


@dataclass
class ProcessorMetrics:
    """The counters the processors of one task update (see the module docstring).

    ``task``: the task id the log lines name (``""`` for a bare processor graph). ``record_context``: the task's
    record being processed (set when the task's processors are built). ``log``: where drops are logged
    (default: the process's ``drop_log()``; tests pass a ``SkipLog`` with their own clock).
    """

    task: str = ""
    record_context: RecordContext | None = None
    dropped: dict[str, int] = field(default_factory=dict)
    """Records dropped by reason (``streamapp.drop_reasons``); a reason is absent until it first happens."""
    lateness: dict[str, RecordLateness] = field(default_factory=dict)
    """Per processor name."""
    join_misses: dict[str, int] = field(default_factory=dict)
    """Per join processor name."""
    log: SkipLog | None = None

    @property
    def dropped_records(self) -> int:
        """Records dropped for any reason: Kafka Streams' ``dropped-records-total`` of the task."""
        return sum(self.dropped.values())

    def lateness_of(self, processor: str) -> RecordLateness:
        """The lateness record of ``processor`` (created on first use; processors keep it)."""
        found = self.lateness.get(processor)
        if found is None:
            found = self.lateness[processor] = RecordLateness()
        return found

    def count_drop(self, reason: str) -> None:
        """Count one record dropped for ``reason`` whose log line another component writes (the exception
        handlers, the timestamp extractor)."""
        self.dropped[reason] = self.dropped.get(reason, 0) + 1

    def drop(self, reason: str, processor: str, what: str, detail: str = "") -> None:
        """Count one record dropped for ``reason`` by ``processor`` and log it, rate-limited per ``what`` (e.g.
        ``"Skipping record due to null key or value"``) and processor; ``detail`` adds to the record's place."""
        self.count_drop(reason)
        where = self.where()
        self._log().skipped(f"{what} in {processor}", f"{where} {detail}" if detail else where)

    def late(self, processor: str, timestamp: int, window: str, expiration: int, stream_time: int) -> None:
        """Count and log one record dropped for an expired window (``window`` as ``[start,end)`` or
        ``[start,end]``; ``expiration``: the close time the window's end was behind, ms)."""
        detail = f"timestamp=[{timestamp}] window={window} expiration=[{expiration}] streamTime=[{stream_time}]"
        self.drop(LATE, processor, "Skipping record for expired window", detail)

    def join_miss(self, processor: str, why: str) -> None:
        """Count one stream record of join ``processor`` that found no table value and log ``why``."""
        self.join_misses[processor] = self.join_misses.get(processor, 0) + 1
        self._log().skipped(f"Stream record found no table value in join {processor}", f"{self.where()} {why}")

    def where(self) -> str:
        """The task and the source record being processed, Kafka's log fields: ``task=[0_1] topic=[t]
        partition=[1] offset=[17]`` (``topic=[] partition=[-1] offset=[-1]`` outside a record, e.g. in a
        punctuation)."""
        context = self.record_context
        source = context.source if context is not None else None
        if source is None:
            return f"task=[{self.task}] topic=[] partition=[-1] offset=[-1]"
        return f"task=[{self.task}] topic=[{source.topic}] partition=[{source.partition}] offset=[{source.offset}]"

    def _log(self) -> SkipLog:
        if self.log is None:
            self.log = drop_log()
        return self.log


class JoinMissLog:
    """What a stream-table join knows about its table to say why a stream record found no value: the oldest
    and newest table update timestamps it processed since the task started (ms; ``None`` before the first)."""

    __slots__ = ("newest", "oldest")

    def __init__(self) -> None:
        self.oldest: int | None = None
        self.newest: int | None = None

    def table_update(self, timestamp: int) -> None:
        if self.oldest is None or timestamp < self.oldest:
            self.oldest = timestamp
        if self.newest is None or timestamp > self.newest:
            self.newest = timestamp

    def why(self, key: object, timestamp: int) -> str:
        """Why a stream record at ``timestamp`` found no value for ``key``: the table's updates are all newer
        than the record (the table side was behind in event time, e.g. not loaded yet), or the key is absent."""
        if self.oldest is not None and self.oldest > timestamp:
            return (
                f"timestamp=[{timestamp}] key=[{short_repr(key)}]: the table has only updates newer than the stream "
                f"record (oldest table update processed at {self.oldest}): the table side was behind in event time"
            )
        return f"timestamp=[{timestamp}] key=[{short_repr(key)}]: the key is absent from the table"
