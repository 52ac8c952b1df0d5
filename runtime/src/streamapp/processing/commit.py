"""The commit of a stream thread's tasks, under both guarantees.

Order, and why:

0. every task flushes its record cache (``statestore.cache.max.bytes``): the dirty entries are forwarded
   downstream (sinks, repartitions) and written to the changelogging stores, so what follows commits them too;
   under ``exactly_once_v2`` they are part of the transaction (Kafka's ``StreamTask.prepareCommit``);
1. every task queues its buffered store writes to its changelog partitions;
2. the producer is flushed: sink, repartition and changelog records are all acknowledged (their offsets known);
3. the consumed offsets are committed, each task's with its commit metadata (the close times of its
   emit-on-close aggregations' last final results, ``streamapp.processing.commit_metadata``; Kafka's
   ``StreamTask.committableOffsetsAndMetadata``): synchronously with the consumer under at-least-once; under
   ``exactly_once_v2`` they are added to the thread's transaction, which is then committed, so the output,
   the changelog records and the input offsets become visible together or not at all;
4. only then each task applies its store batch to RocksDB atomically with the offset of its last changelog
   record, and rewrites its ``.checkpoint``.

A crash before 3 reprocesses the records since the last commit (at-least-once; output may repeat). A
crash between 3 and 4 loses nothing: the store is at the previous batch and restore replays the changelog
tail that 2 made durable, so the store is again exactly at the committed input offsets (DESIGN.md §3:
store writes are applied only after the commit succeeded). Under exactly-once a crash before 3 completes
leaves an open transaction that the restarted thread's producer (same ``transactional.id``) aborts; the
stores hold only committed data, so a crash never needs a wipe or a full restore, and restore (from the
store's changelog offset, ``read_committed``) never applies an aborted record.

If 3 fails (CommitFailedError: the group rebalanced; TransactionAbortedError / ProducerFencedError under
exactly-once, the transaction is aborted) the tasks' buffers and progress are discarded; the caller closes the
tasks without committing and revives them (Kafka Streams' ``TaskMigratedException`` / ``TaskCorruptedException``).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

from streamapp.kafka.types import CommitFailedError, ConsumerClient, KafkaClientError, TopicPartition
from streamapp.processing.streams_producer import StreamsProducer
from streamapp.processing.task import StreamTask

__all__ = ["DEFAULT_WRITE_BUFFER_BYTES", "CommitResult", "commit_tasks", "write_buffer_bytes"]

DEFAULT_WRITE_BUFFER_BYTES = 10 * 1024 * 1024
"""The early-commit bound of the changelogging stores' write buffer when the record cache is off (bytes):
Kafka's default ``statestore.cache.max.bytes``."""


def write_buffer_bytes(cache_max_bytes: int) -> int:
    """The bound (bytes) above which a stream thread's buffered store writes (``TaskManager.pending_bytes``) make it
    commit before its commit interval: ``statestore.cache.max.bytes``, or ``DEFAULT_WRITE_BUFFER_BYTES`` when that is
    0. Turning the record cache off sends every update downstream (Kafka's ``cache.max.bytes=0``); it does not
    make the thread commit after every poll, which would flush the producer and commit offsets synchronously
    every few milliseconds (ADR 0008)."""
    return cache_max_bytes if cache_max_bytes > 0 else DEFAULT_WRITE_BUFFER_BYTES


@dataclass(frozen=True)
class CommitResult:
    """What a commit did: tasks committed, offsets committed, wall-clock duration in seconds."""

    tasks: int
    offsets: int
    seconds: float


def commit_tasks(
    tasks: Sequence[StreamTask],
    consumer: ConsumerClient,
    producer: StreamsProducer,
    flush_timeout_s: float,
) -> CommitResult:
    """Commit every task that processed records since its last commit (see the module docstring); under
    exactly-once also a transaction with no dirty task (e.g. records a punctuation sent).

    Raises DeliveryError when the producer cannot deliver (nothing is committed), CommitFailedError when
    the group rebalanced, TransactionAbortedError / ProducerFencedError (exactly-once; the transaction was
    aborted), KafkaClientError otherwise. On any failure the dirty tasks' uncommitted progress is discarded.
    """
    started = time.monotonic()
    dirty = [task for task in tasks if task.commit_needed()]
    if not dirty and not producer.transaction_in_flight:
        return CommitResult(0, 0, 0.0)
    try:
        for task in dirty:
            task.flush_cache()
        for task in dirty:
            task.send_changelog()
        producer.flush(flush_timeout_s)
        offsets: dict[TopicPartition, int] = {}
        metadata: dict[TopicPartition, str] = {}
        for task in dirty:
            task_offsets = task.offsets_to_commit()
            offsets.update(task_offsets)
            task_metadata = task.commit_metadata()
            if task_metadata is not None:
                metadata.update(dict.fromkeys(task_offsets, task_metadata))
        producer.commit(offsets, consumer, metadata)
    except CommitFailedError:
        _discard(dirty)
        raise
    except KafkaClientError:
        if producer.exactly_once:  # the transaction was aborted; at-least-once: a delivery failure is fatal
            _discard(dirty)
        raise
    for task in dirty:
        task.complete_commit()
    return CommitResult(len(dirty), len(offsets), time.monotonic() - started)


def _discard(tasks: Sequence[StreamTask]) -> None:
    for task in tasks:
        task.discard_pending()
