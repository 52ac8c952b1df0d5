"""TaskManager: a stream thread's tasks, created, restored, committed and closed as partitions move.

- Assigned partitions map to tasks (``TaskId(subtopology of the topic, partition)``); a new task starts
  ``CREATED`` and its partitions are paused until it is restored.
- ``maintain`` opens created tasks' stores and registers them with the changelog reader; a store still
  locked by its previous owner (another worker process closing it) is retried on the next call.
- ``restore`` advances restoration; a restored task turns ``RUNNING`` and its partitions are resumed.
- Revocation commits every running task (one commit, as Kafka Streams does), then closes the tasks that
  lost all their partitions. Lost partitions (the member was fenced) close their tasks without a commit.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from streamapp.kafka.types import (
    OFFSET_BEGINNING,
    CommitFailedError,
    ConsumerClient,
    ConsumerRecord,
    ProducerClient,
    TopicPartition,
)
from streamapp.processing.commit import CommitResult, commit_tasks
from streamapp.processing.task import StreamTask, TaskId, TaskState
from streamapp.state.restore import ChangelogReader
from streamapp.state.rocksdb import StoreLockedError

__all__ = ["TaskManager"]

log = logging.getLogger(__name__)

TaskFactory = Callable[[TaskId], StreamTask]

_LOCK_RETRY_S = 0.5


@dataclass
class _Pending:
    """A task waiting to be initialized and when to try next."""

    not_before: float = 0.0
    attempts: int = 0


class TaskManager:
    """Owns a stream thread's active tasks; it is the consumer's rebalance listener."""

    def __init__(
        self,
        topic_subtopologies: dict[str, int],
        task_factory: TaskFactory,
        consumer: ConsumerClient,
        producer: ProducerClient,
        changelog_reader: ChangelogReader,
        flush_timeout_s: float = 120.0,
    ) -> None:
        self._topic_subtopologies = topic_subtopologies
        self._task_factory = task_factory
        self._consumer = consumer
        self._producer = producer
        self._reader = changelog_reader
        self._flush_timeout_s = flush_timeout_s
        self.tasks: dict[TaskId, StreamTask] = {}
        self._by_partition: dict[TopicPartition, StreamTask] = {}
        self._pending: dict[TaskId, _Pending] = {}
        self.assignment_received = False
        self.last_commit: CommitResult | None = None
        self.dropped_records_closed = 0
        """Records dropped by tasks closed since the thread started (keeps the thread's counter monotonic)."""

    # -- RebalanceListener -------------------------------------------------------------------------

    def on_partitions_assigned(self, partitions: list[TopicPartition]) -> None:
        self.assignment_received = True
        to_pause: list[TopicPartition] = []
        for tp in partitions:
            subtopology = self._topic_subtopologies.get(tp.topic)
            if subtopology is None:
                log.warning("Ignored assigned partition %s of a topic no sub-topology reads", tp)
                continue
            task_id = TaskId(subtopology, tp.partition)
            task = self.tasks.get(task_id)
            if task is None:
                task = self._task_factory(task_id)
                self.tasks[task_id] = task
                self._pending[task_id] = _Pending()
                log.info("Created task %s", task_id)
            task.input_partitions.add(tp)
            self._by_partition[tp] = task
            if task.state is not TaskState.RUNNING:
                to_pause.append(tp)
        self._consumer.pause(to_pause)
        if partitions:
            log.info("Assigned partitions %s", ", ".join(sorted(map(str, partitions))))

    def on_partitions_revoked(self, partitions: list[TopicPartition]) -> None:
        if not partitions:
            return
        log.info("Revoked partitions %s", ", ".join(sorted(map(str, partitions))))
        affected = self._tasks_of(partitions)
        try:
            self.commit()
        except CommitFailedError as exc:
            log.warning("Commit on revocation failed; closing all tasks without commit: %s", exc)
            revoked = set(partitions)
            kept = [tp for tp in self._by_partition if tp not in revoked]
            self._close_dirty_and_revive(kept)
            return
        self._remove_partitions(partitions, affected)

    def on_partitions_lost(self, partitions: list[TopicPartition]) -> None:
        if not partitions:
            return
        log.warning("Lost partitions %s; closing all tasks without commit", ", ".join(map(str, partitions)))
        lost = set(partitions)
        self._close_dirty_and_revive([tp for tp in self._by_partition if tp not in lost])

    # -- the stream thread's steps -----------------------------------------------------------------

    def maintain(self) -> None:
        """Initialize created tasks whose stores can be opened and register them for restore."""
        now = time.monotonic()
        for task_id, pending in list(self._pending.items()):
            if pending.not_before > now:
                continue
            task = self.tasks[task_id]
            try:
                task.initialize()
            except StoreLockedError as exc:
                pending.attempts += 1
                pending.not_before = now + _LOCK_RETRY_S
                if pending.attempts % 20 == 1:
                    log.info("Task %s waits for its state to be released: %s", task_id, exc)
                continue
            del self._pending[task_id]
            if self._reader.register(str(task_id), list(task.stores.values())):
                self._start(task)

    def restore(self, timeout_s: float) -> None:
        """Advance restoration by one bounded poll; start the tasks that finished."""
        for task_id in self._reader.restore(timeout_s):
            task = self.tasks.get(TaskId.parse(task_id))
            if task is not None:
                self._start(task)

    def process(self, records: Iterable[ConsumerRecord]) -> int:
        """Route records to their running tasks; returns how many were processed.

        A record of a task that is not running yet (fetched just before its partition was paused) is not
        processed: its partition is rewound to it and paused, so it is read again once the task runs.
        """
        processed = 0
        rewound: set[TopicPartition] = set()
        for record in records:
            tp = record.topic_partition
            task = self._by_partition.get(tp)
            if task is None or tp in rewound:
                continue
            if task.state is not TaskState.RUNNING:
                self._consumer.seek(tp, record.offset)
                self._consumer.pause([tp])
                rewound.add(tp)
                continue
            task.process(record, tp)
            processed += 1
        return processed

    def commit(self) -> CommitResult:
        """Commit all running tasks (``streamapp.processing.commit``).

        Raises DeliveryError if records were not acknowledged, and CommitFailedError when the group
        rebalanced: the tasks' uncommitted progress is gone, call ``handle_commit_failure``.
        """
        running = [task for task in self.tasks.values() if task.state is TaskState.RUNNING]
        result = commit_tasks(running, self._consumer, self._producer, self._flush_timeout_s)
        if result.tasks:
            self.last_commit = result
        return result

    def handle_commit_failure(self) -> None:
        """After a CommitFailedError: close every task without commit and start over from the committed
        offsets for the partitions still assigned (Kafka Streams closes dirty and revives the tasks)."""
        self._close_dirty_and_revive(list(self._by_partition))

    def close_all(self, clean: bool) -> None:
        """Close every task (right after a successful commit when ``clean``), e.g. on shutdown."""
        for task in list(self.tasks.values()):
            self._close(task, clean)

    # -- views -------------------------------------------------------------------------------------

    @property
    def restoring(self) -> bool:
        return any(task.state is not TaskState.RUNNING for task in self.tasks.values())

    @property
    def pending_bytes(self) -> int:
        return sum(task.pending_bytes for task in self.tasks.values())

    def all_running(self) -> bool:
        return all(task.state is TaskState.RUNNING for task in self.tasks.values())

    # -- internals ---------------------------------------------------------------------------------

    def _start(self, task: StreamTask) -> None:
        task.mark_running()
        self._consumer.resume(task.input_partitions)
        log.info("Task %s is running", task.id)

    def _tasks_of(self, partitions: Iterable[TopicPartition]) -> list[StreamTask]:
        found: dict[TaskId, StreamTask] = {}
        for tp in partitions:
            task = self._by_partition.get(tp)
            if task is not None:
                found[task.id] = task
        return list(found.values())

    def _remove_partitions(self, partitions: Iterable[TopicPartition], tasks: Iterable[StreamTask]) -> None:
        """After a successful commit: close the tasks left without partitions."""
        for tp in partitions:
            task = self._by_partition.pop(tp, None)
            if task is not None:
                task.input_partitions.discard(tp)
        for task in tasks:
            if not task.input_partitions:
                self._close(task, clean=True)

    def _close_dirty_and_revive(self, still_assigned: list[TopicPartition]) -> None:
        """Close every task without commit; recreate tasks for ``still_assigned`` partitions, rewound to
        their committed offsets, so records processed but not committed are processed again."""
        for task in list(self.tasks.values()):
            self._close(task, clean=False)
        if not still_assigned:
            return
        committed = self._consumer.committed(still_assigned)
        for tp in still_assigned:
            offset = committed.get(tp)
            self._consumer.seek(tp, offset if offset is not None else OFFSET_BEGINNING)
        self.on_partitions_assigned(still_assigned)

    def _close(self, task: StreamTask, clean: bool) -> None:
        for tp in list(task.input_partitions):
            self._by_partition.pop(tp, None)
        task.input_partitions.clear()
        self._reader.unregister(str(task.id))
        self._pending.pop(task.id, None)
        if not clean:
            task.discard_pending()
        task.close(clean=clean and task.state is not TaskState.CREATED)
        self.dropped_records_closed += task.metrics.dropped_records
        del self.tasks[task.id]
