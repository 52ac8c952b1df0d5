"""TaskManager: a stream thread's tasks, created, restored, committed and closed as partitions move.

- Assigned partitions map to tasks (``TaskId(subtopology of the topic, partition)``); a new task starts
  ``CREATED`` and its partitions are paused until it is restored.
- ``maintain`` opens created tasks' stores and registers them with the changelog reader; a store still
  locked by its previous owner (another worker process closing it) is retried on the next call. Before a
  task restores, the group's committed offsets of its partitions are read: they tell the task where its
  input starts (lag of empty partitions) and, under ``read_committed``, the call waits until no transaction
  of a previous owner is still pending on them (KIP-447), so restore sees that owner's final changelog.
- ``restore`` advances restoration; a restored task turns ``RUNNING`` and its partitions are resumed.
- ``process`` buffers polled records in their tasks and lets every running task process what is ready, at most
  ``max_per_task`` records each per call (one round-robin pass of Kafka's ``TaskExecutor``: the stream thread
  passes its adaptive ``numIterations``, so a catch-up interleaves the tasks instead of running one task's whole
  backlog before the next one's); an input partition with ``buffered.records.per.partition`` records buffered is
  paused until its task caught up.
- Revocation commits every running task (one commit, as Kafka Streams does), then closes the tasks that
  lost all their partitions; with standbys on, the open state of such a task is offered to the thread's standbys
  (``adopt_state``) instead of being closed, and a task created where the thread holds a standby takes over the
  standby's open state (``on_task_created``): Kafka's task recycling, ``streamapp.processing.state_manager``.
  Lost partitions (the member was fenced) close their tasks without a commit.
  A failed commit (group moved on, aborted transaction, fenced producer) closes every task without commit and
  revives the tasks still assigned from their stores and committed offsets; ``producer_fenced`` then tells the
  stream thread to replace its producer.
- ``maybe_purge_committed_records`` deletes the records of repartition partitions that running tasks committed
  past (Kafka's ``TaskManager.maybePurgeCommittedRecords``, ``streamapp.processing.purge``).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass

from streamapp.kafka.types import (
    OFFSET_BEGINNING,
    CommitFailedError,
    ConsumerClient,
    ConsumerRecord,
    KafkaClientError,
    ProducerFencedError,
    TopicPartition,
    TransactionAbortedError,
)
from streamapp.processing.commit import CommitResult, commit_tasks
from streamapp.processing.partition_group import RecordQueue
from streamapp.processing.purge import CommittedRecordsPurger, purgeable_offsets
from streamapp.processing.state_manager import StateManager
from streamapp.processing.streams_producer import StreamsProducer
from streamapp.processing.task import UNBOUNDED, StreamTask, TaskId, TaskState
from streamapp.state.directory import TaskDirectoryLockedError
from streamapp.state.restore import ChangelogReader
from streamapp.state.stores import StoreLockedError

__all__ = ["TaskManager"]

log = logging.getLogger(__name__)

TaskFactory = Callable[[TaskId, StateManager | None], StreamTask]
"""Creates the active task of a task id, on the open state recycled from a standby when one is given."""

_LOCK_RETRY_S = 0.5


def _no_lag(partition: TopicPartition) -> tuple[int, int] | None:
    """Watermarks for a consumer that cannot tell (a client without ``fetched_watermarks``): no lag."""
    return (0, 0)


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
        producer: StreamsProducer,
        changelog_reader: ChangelogReader,
        flush_timeout_s: float = 120.0,
        *,
        buffered_records_per_partition: int = 1000,
        clock_ms: Callable[[], int] | None = None,
        purger: CommittedRecordsPurger | None = None,
        repartition_topics: Collection[str] = (),
        paced_subtopologies: Collection[int] = (),
    ) -> None:
        """``purger`` and ``repartition_topics`` (real topic names) enable the purge of committed repartition
        records; without a purger nothing is ever deleted. ``paced_subtopologies``: the sub-topologies whose tasks
        ``process_buffered`` paces by stream time (those writing repartition topics)."""
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
        self.dropped_records_closed: dict[str, int] = {}
        """Records dropped by tasks closed since the thread started, by reason (keeps the thread's counters
        monotonic)."""
        self.tasks_created = 0
        self.tasks_closed = 0
        """Active tasks created and closed since the thread started (Kafka's ``task-created-total`` and
        ``task-closed-total``)."""
        self.on_task_created: Callable[[TaskId], StateManager | None] | None = None
        """Called before an active task is created: the open state of the thread's standby of that task, which the
        new task takes over, or ``None``."""
        self.adopt_state: Callable[[StateManager], bool] | None = None
        """Offered the open state of a task closed cleanly at a revocation: True when the thread keeps it (as a
        standby), False to close it."""
        self.producer_fenced = False
        """Set when a commit inside a rebalance callback found the producer fenced (the thread resets it)."""
        self._max_buffered = buffered_records_per_partition
        self._full: set[TopicPartition] = set()
        self._clock_ms = clock_ms or (lambda: int(time.time() * 1000))
        self._purger = purger
        self._repartition_topics = frozenset(repartition_topics)
        self._paced = frozenset(paced_subtopologies)
        self.more_ready = False
        """Whether the last ``process_buffered`` pass left records a task could process at once (the stream thread
        then polls without waiting)."""
        self.starving = False
        """Whether the last pass left an input partition short of a slice while the broker has more of it."""
        self._unfetched_hold_until: dict[TaskId, float] = {}
        """Per running task none of whose records were fetched yet, until when (monotonic s) it holds back the
        tasks of its sub-topology that are ahead of it."""

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
                state = self.on_task_created(task_id) if self.on_task_created is not None else None
                task = self._task_factory(task_id, state)
                self.tasks[task_id] = task
                self._pending[task_id] = _Pending()
                self.tasks_created += 1
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
        except (CommitFailedError, TransactionAbortedError, ProducerFencedError) as exc:
            log.warning("Commit on revocation failed; closing all tasks without commit: %s", exc)
            self.producer_fenced = self.producer_fenced or isinstance(exc, ProducerFencedError)
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
            except (StoreLockedError, TaskDirectoryLockedError) as exc:
                pending.attempts += 1
                pending.not_before = now + _LOCK_RETRY_S
                if pending.attempts % 20 == 1:
                    log.info("Task %s waits for its state to be released: %s", task_id, exc)
                continue
            try:
                committed = self._consumer.committed_with_metadata(sorted(task.input_partitions))
                task.set_input_positions({tp: found.offset if found else None for tp, found in committed.items()})
                task.restore_commit_metadata(committed)
            except KafkaClientError as exc:
                # e.g. a previous owner's transaction still pending on these offsets: try again soon
                task.close(clean=False)
                task.state = TaskState.CREATED
                pending.attempts += 1
                pending.not_before = now + _LOCK_RETRY_S
                log.info("Task %s waits for stable committed offsets: %s", task_id, exc)
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

    def process(self, records: Iterable[ConsumerRecord], max_per_task: int = UNBOUNDED) -> int:
        """Buffer records in their running tasks, then process what every running task has ready, at most
        ``max_per_task`` records per task (``process_buffered``); returns how many records were processed.

        A record of a task that is not running yet (fetched just before its partition was paused) is not
        buffered: its partition is rewound to it and paused, so it is read again once the task runs.
        """
        rewound: set[TopicPartition] = set()
        touched: dict[TopicPartition, RecordQueue] = {}
        last: tuple[str, int] | None = None
        queue: RecordQueue | None = None
        # consume() returns runs of one partition: look the partition's queue up once per run, not per record
        for record in records:
            key = (record.topic, record.partition)
            if key != last:
                last = key
                tp = TopicPartition(record.topic, record.partition)
                task = self._by_partition.get(tp)
                if task is None or tp in rewound:
                    queue = None
                elif task.state is not TaskState.RUNNING:
                    self._consumer.seek(tp, record.offset)
                    self._consumer.pause([tp])
                    rewound.add(tp)
                    queue = None
                else:
                    queue = touched[tp] = task.input_queue(tp)
            if queue is not None:
                queue.records.append(record)
                queue.fetch_position = record.offset + 1
        limit = self._partition_limit()
        full = [tp for tp, queue in touched.items() if len(queue) >= limit and tp not in self._full]
        processed = self.process_buffered(max_per_task)
        # Pause only what is still full after processing: a queue this pass drained needs no pause, and
        # librdkafka's pause drops the partition's prefetched records (a pause/resume per poll = a refetch).
        full = [tp for tp in full if self._buffered(tp) >= limit]
        if full:
            self._full.update(full)
            self._consumer.pause(full)
        return processed

    def process_buffered(self, max_per_task: int = UNBOUNDED) -> int:
        """One round-robin pass: every running task processes its ready records, at most ``max_per_task`` of them
        (Kafka's ``TaskExecutor.process(maxNumRecords)``); resume partitions that have room again.

        Sets ``more_ready`` when a task may have more ready records than the pass took, and ``starving`` when an
        input partition of a paced task (below) has fewer than ``max_per_task`` records buffered but more on the
        broker (or its lag is not known yet): a poll should fetch them before the next pass.

        Event-time pacing (beyond Kafka, whose slices count records), for the tasks of ``paced_subtopologies``: a
        task whose stream time is ahead of the slowest task of its sub-topology that has records buffered skips the
        pass, and so does one ahead of a task
        of its sub-topology whose partitions were not fetched yet (for at most a second: in a catch-up the
        partitions' first fetches do not arrive together). The
        tasks of a sub-topology write the same repartition topics, whose readers drop what arrives later than their
        stream time and grace; partitions differ in how many records an hour holds, so equal slices alone let the
        writers drift apart by hours over a catch-up (Kafka's ``max.task.idle.ms`` paces the partitions of one
        task the same way)."""
        processed = 0
        more = starving = False
        now = self._clock_ms()
        watermarks = getattr(self._consumer, "fetched_watermarks", _no_lag)
        paced = self._paced
        floors: dict[int, int] = {}
        unfetched: set[TaskId] = set()
        running = [task for task in self.tasks.values() if task.state is TaskState.RUNNING]
        for task in running:
            if task.id.subtopology not in self._paced:
                continue
            if not task.input.buffered():
                if any(watermarks(tp) is None for tp in task.input.queues):
                    unfetched.add(task.id)
                    if time.monotonic() >= self._unfetched_hold_until.setdefault(task.id, time.monotonic() + 1.0):
                        continue  # still nothing after a second: stop holding the others for it
                else:
                    continue
            sub, time_ = task.id.subtopology, task.stream_time
            if time_ < floors.get(sub, time_ + 1):
                floors[sub] = time_
        for task_id in [t for t in self._unfetched_hold_until if t not in unfetched]:
            del self._unfetched_hold_until[task_id]
        for task in running:
            floor = floors.get(task.id.subtopology)
            if floor is not None and task.stream_time > floor:
                more = more or bool(task.input.buffered())
                continue  # ahead of the slowest busy task of its sub-topology: let that one catch up first
            taken = task.process_ready(watermarks, now, max_per_task)
            processed += taken
            queues = task.input.queues
            if taken >= max_per_task:
                more = True
            if task.id.subtopology not in paced:  # its pace does not matter: no poll for it
                if len(queues) == 1 and task.input.buffered():
                    more = True
                continue
            for queue in queues.values():
                buffered = len(queue)
                if buffered >= max_per_task:
                    continue
                if buffered and len(queues) == 1:
                    more = True
                marks = watermarks(queue.partition)
                position = queue.fetch_position
                if marks is None or marks[1] > (marks[0] if position is None else position):
                    starving = True  # not fetched yet, or more on the broker: poll first
        self.more_ready = more and processed > 0
        self.starving = starving
        if self._full:
            limit = self._partition_limit()
            room = [tp for tp in self._full if self._buffered(tp) < limit]
            if room:
                self._full.difference_update(room)
                self._consumer.resume(room)
        return processed

    @property
    def interleaving(self) -> bool:
        """Whether a running task writes a repartition topic (a paced sub-topology): the stream thread then runs
        bounded round-robin passes (``streamapp.processing.stream_thread``)."""
        paced = self._paced
        return bool(paced) and any(
            task.id.subtopology in paced and task.state is TaskState.RUNNING for task in self.tasks.values()
        )

    def poll_size(self, max_poll_records: int) -> int:
        """How many records the next poll may take (at least 1, at most ``max_poll_records``): the room left in the
        thread's buffer, ``buffered.records.per.partition`` per assigned input partition. The thread polls while a
        task starves (``process_buffered``) and librdkafka returns one partition's fetched records after another,
        so a poll may add to a partition that has plenty already: bounding the total keeps memory bounded without
        pausing that partition (librdkafka's pause drops its prefetched records, and the refetch stalled a
        catch-up: twice the wall time of a stateless run)."""
        buffered = sum(task.input.buffered() for task in self.tasks.values() if task.state is TaskState.RUNNING)
        return max(1, min(max_poll_records, self._max_buffered * max(1, len(self._by_partition)) - buffered))

    def _partition_limit(self) -> int:
        """Buffered records at which an input partition is paused: the whole thread's buffer (``poll_size``), which
        one partition fills only while its task cannot process (e.g. a join waiting for its other partition)."""
        return self._max_buffered * max(1, len(self._by_partition))

    def punctuate_wall_clock(self, now_ms: int) -> bool:
        """Run the wall-clock punctuations due at ``now_ms`` of every running task (the Processor API's
        ``PunctuationType.WALL_CLOCK_TIME`` schedules); True when one ran."""
        punctuated = False
        for task in self.tasks.values():
            if task.state is TaskState.RUNNING and task.punctuate_wall_clock(now_ms):
                punctuated = True
        return punctuated

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

    def purgeable_offsets(self) -> dict[TopicPartition, int]:
        """Per repartition partition of a running task, its committed offset (next to read): the records
        before it may be deleted (Kafka's ``StreamTask.purgeableOffsets`` over the active running tasks)."""
        offsets: dict[TopicPartition, int] = {}
        repartition = self._repartition_topics
        if not repartition:
            return offsets
        for task in self.tasks.values():
            if task.state is TaskState.RUNNING:
                offsets.update(purgeable_offsets(task.committed_offsets, task.input_partitions, repartition))
        return offsets

    def maybe_purge_committed_records(self) -> bool:
        """Send ``DeleteRecords`` for ``purgeable_offsets`` unless the previous request is still in flight
        (Kafka's ``TaskManager.maybePurgeCommittedRecords``); returns whether one was sent. Failures are
        logged and ignored: the next purge sends newer offsets."""
        if self._purger is None:
            return False
        return self._purger.maybe_purge(self.purgeable_offsets())

    def handle_commit_failure(self) -> None:
        """After a CommitFailedError, TransactionAbortedError or ProducerFencedError: close every task without
        commit and start over from the stores and the committed offsets for the partitions still assigned
        (Kafka Streams closes dirty and revives the tasks). Aborts the open transaction first."""
        self._producer.abort()
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

    def _buffered(self, tp: TopicPartition) -> int:
        task = self._by_partition.get(tp)
        queue = task.input.queues.get(tp) if task is not None else None
        return len(queue) if queue is not None else 0

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
            self._full.discard(tp)
            if task is not None:
                task.input_partitions.discard(tp)
                task.remove_input_partition(tp)
        for task in tasks:
            if not task.input_partitions:
                self._close(task, clean=True, recycle=True)

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

    def _close(self, task: StreamTask, clean: bool, recycle: bool = False) -> None:
        """Close ``task``; ``recycle`` (a clean close at a revocation) offers its open state to ``adopt_state``."""
        for tp in list(task.input_partitions):
            self._by_partition.pop(tp, None)
            self._full.discard(tp)
        task.input_partitions.clear()
        self._reader.unregister(str(task.id))
        self._pending.pop(task.id, None)
        if not clean:
            task.discard_pending()
        if recycle and self.adopt_state is not None and task.state is not TaskState.CREATED and task.stores:
            self._recycle(task, self.adopt_state)
        else:
            task.close(clean=clean and task.state is not TaskState.CREATED)
        for reason, count in task.metrics.dropped.items():
            self.dropped_records_closed[reason] = self.dropped_records_closed.get(reason, 0) + count
        del self.tasks[task.id]
        self.tasks_closed += 1

    def _recycle(self, task: StreamTask, adopt: Callable[[StateManager], bool]) -> None:
        state = task.close_and_recycle_state()
        try:
            adopted = adopt(state)
        except Exception:
            log.exception("Failed to keep the state of task %s as a standby; closing it", task.id)
            adopted = False
        if not adopted:
            state.close(checkpoint=False)  # the checkpoint was just written
