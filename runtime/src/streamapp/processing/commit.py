"""The at-least-once commit of a stream thread's tasks.

Order, and why:

1. every task queues its buffered store writes to its changelog partitions;
2. the producer is flushed: sink, repartition and changelog records are all acknowledged;
3. the consumed offsets are committed synchronously;
4. only then each task applies its store batch to RocksDB atomically with the offset of its last changelog
   record, and rewrites its ``.checkpoint``.

A crash before 3 reprocesses the records since the last commit (at-least-once; output may repeat). A
crash between 3 and 4 loses nothing: the store is at the previous batch and restore replays the changelog
tail that 2 made durable, so the store is again exactly at the committed input offsets (DESIGN.md §3:
store writes are applied only after the commit succeeded). Under exactly-once (issue 3) steps 2-3 become
one transaction and step 4 stays after it.

If 3 fails because the group rebalanced (CommitFailedError) the tasks' buffers and progress are discarded;
the caller closes the tasks without committing (Kafka Streams' ``TaskMigratedException`` handling).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

from streamapp.kafka.types import CommitFailedError, ConsumerClient, ProducerClient, TopicPartition
from streamapp.processing.task import StreamTask

__all__ = ["CommitResult", "commit_tasks"]


@dataclass(frozen=True)
class CommitResult:
    """What a commit did: tasks committed, offsets committed, wall-clock duration in seconds."""

    tasks: int
    offsets: int
    seconds: float


def commit_tasks(
    tasks: Sequence[StreamTask],
    consumer: ConsumerClient,
    producer: ProducerClient,
    flush_timeout_s: float,
) -> CommitResult:
    """Commit every task that processed records since its last commit (see the module docstring).

    Raises DeliveryError when the producer cannot deliver (nothing is committed), CommitFailedError when
    the group rebalanced (the tasks' uncommitted progress is discarded first), KafkaClientError otherwise.
    """
    started = time.monotonic()
    dirty = [task for task in tasks if task.commit_needed()]
    if not dirty:
        return CommitResult(0, 0, 0.0)
    for task in dirty:
        task.send_changelog()
    producer.flush(flush_timeout_s)
    offsets: dict[TopicPartition, int] = {}
    for task in dirty:
        offsets.update(task.offsets_to_commit())
    try:
        consumer.commit(offsets)
    except CommitFailedError:
        for task in dirty:
            task.discard_pending()
        raise
    for task in dirty:
        task.complete_commit()
    return CommitResult(len(dirty), len(offsets), time.monotonic() - started)
