"""A task's input buffer: one queue per input partition, records taken in timestamp order (Kafka Streams'
``RecordQueue`` and ``PartitionGroup``).

- ``RecordQueue``: the consumed, not yet processed records of one input partition, in offset order. Its *head*
  is deserialized and time-stamped lazily (``stamp`` callback of the task: deserialization, timestamp
  extraction and their error handlers); a record the callback skips is reported through ``on_skipped`` so its
  offset is still committed. ``partition_time`` is the highest head timestamp seen in the partition.
- ``PartitionGroup``: picks, among the non-empty queues, the head with the smallest timestamp (ties: the queue
  added first), so a task reading several partitions (a join, a merge) processes them in event-time order.
  ``stream_time`` is the largest timestamp taken so far.

``ready(now_ms, ...)`` follows ``PartitionGroup.readyToProcess`` and ``max.task.idle.ms``: when every partition
has buffered records the task is ready; an empty partition whose lag is unknown or positive (records exist on
the broker but were not fetched yet) makes the task wait; an empty partition with zero lag makes it wait until
``max.task.idle.ms`` after it was first seen empty, then the task processes the others ("enforced processing",
counted). ``max.task.idle.ms = -1`` never waits. A task with one input partition never waits.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from streamapp.kafka.types import ConsumerRecord, TopicPartition

__all__ = ["MAX_TASK_IDLE_DISABLED", "PartitionGroup", "RecordQueue", "StampedRecord"]

MAX_TASK_IDLE_DISABLED = -1
"""``max.task.idle.ms`` value that never waits for empty partitions (Kafka's ``MAX_TASK_IDLE_MS_DISABLED``)."""


@dataclass(slots=True)
class StampedRecord:
    """A record ready to process: the consumed record, its deserialized key and value, its timestamp (ms)."""

    record: ConsumerRecord
    key: Any
    value: Any
    timestamp: int


Stamp = Callable[["RecordQueue", ConsumerRecord], StampedRecord | None]
"""Deserializes and time-stamps a head record; ``None`` skips it (a handler continued). May raise."""


class RecordQueue:
    """One input partition's buffered records (see the module docstring)."""

    __slots__ = ("_stamp", "fetch_position", "head", "on_skipped", "partition", "partition_time", "records")

    def __init__(self, partition: TopicPartition, stamp: Stamp, on_skipped: Callable[[ConsumerRecord], None]) -> None:
        self.partition = partition
        self.records: deque[ConsumerRecord] = deque()
        """The consumed records behind the head, not stamped yet, in offset order."""
        self._stamp = stamp
        self.on_skipped = on_skipped
        self.head: StampedRecord | None = None
        self.partition_time = -1
        self.fetch_position: int | None = None
        """Offset after the last record added (the consumer's position for this partition), if known."""

    def __len__(self) -> int:
        return len(self.records) + (1 if self.head is not None else 0)

    def add(self, record: ConsumerRecord) -> None:
        self.records.append(record)
        self.fetch_position = record.offset + 1

    def peek(self) -> StampedRecord | None:
        """The head record, stamping queued records until one is not skipped; ``None`` when empty."""
        while self.head is None and self.records:
            raw = self.records.popleft()
            stamped = self._stamp(self, raw)
            if stamped is None:
                self.on_skipped(raw)
                continue
            self.head = stamped
            if stamped.timestamp > self.partition_time:
                self.partition_time = stamped.timestamp
        return self.head

    def pop(self) -> StampedRecord:
        """Take the head (call ``peek`` first)."""
        head = self.head
        assert head is not None
        self.head = None
        return head

    def clear(self) -> None:
        """Drop every buffered record (the task closes or rewinds)."""
        self.records.clear()
        self.head = None


class PartitionGroup:
    """The queues of one task (see the module docstring). ``max_task_idle_ms``: Kafka's ``max.task.idle.ms``."""

    def __init__(self, max_task_idle_ms: int) -> None:
        self.max_task_idle_ms = max_task_idle_ms
        self.queues: dict[TopicPartition, RecordQueue] = {}
        self.stream_time = -1
        self.enforced_processing = 0
        """How often the task went on without waiting for an empty partition any longer (a metric)."""
        self._idle_deadlines: dict[TopicPartition, int] = {}

    def add_queue(self, queue: RecordQueue) -> None:
        self.queues[queue.partition] = queue

    def remove_queue(self, partition: TopicPartition) -> None:
        queue = self.queues.pop(partition, None)
        if queue is not None:
            queue.clear()
        self._idle_deadlines.pop(partition, None)

    def buffered(self) -> int:
        """Records buffered over all queues."""
        return sum(len(queue) for queue in self.queues.values())

    def clear(self) -> None:
        for queue in self.queues.values():
            queue.clear()
        self._idle_deadlines.clear()

    def ready(self, now_ms: int, watermarks: Callable[[TopicPartition], tuple[int, int] | None]) -> bool:
        """Whether the task may take its next record now (``PartitionGroup.readyToProcess``).

        ``watermarks(partition)`` is the partition's ``(low, high)`` offsets from the last fetch, or ``None``
        if unknown; with the queue's ``fetch_position`` (the low watermark when nothing was consumed or
        committed yet) it gives the fetched lag.
        """
        queues = self.queues
        if len(queues) == 1 or self.max_task_idle_ms == MAX_TASK_IDLE_DISABLED:
            return any(queue.peek() is not None for queue in queues.values())
        waiting_since_deadline = False
        any_buffered = False
        for tp, queue in queues.items():
            if queue.peek() is not None:
                self._idle_deadlines.pop(tp, None)
                any_buffered = True
                continue
            marks = watermarks(tp)
            if marks is None:
                self._idle_deadlines.pop(tp, None)
                return False  # lag unknown: wait to fetch metadata for the partition
            low, high = marks
            position = queue.fetch_position if queue.fetch_position is not None else low
            if high > position:
                self._idle_deadlines.pop(tp, None)
                return False  # records on the broker not fetched yet: wait for them
            deadline = self._idle_deadlines.setdefault(tp, now_ms + self.max_task_idle_ms)
            if now_ms < deadline:
                return False
            waiting_since_deadline = True
        if waiting_since_deadline and any_buffered:
            self.enforced_processing += 1
        return any_buffered

    def next_record(self) -> StampedRecord | None:
        """Take the buffered head with the smallest timestamp (advancing stream time), or ``None``."""
        best: RecordQueue | None = None
        best_ts = 0
        for queue in self.queues.values():
            head = queue.peek()
            if head is not None and (best is None or head.timestamp < best_ts):
                best, best_ts = queue, head.timestamp
        if best is None:
            return None
        stamped = best.pop()
        if stamped.timestamp > self.stream_time:
            self.stream_time = stamped.timestamp
        return stamped
