"""StreamThread: one consumer, one producer and their tasks, in a poll → process → commit loop.

Each iteration:

1. poll the group consumer (rebalance callbacks run here and create or close tasks); while tasks
   restore, the poll does not block so restoration keeps going;
2. buffer the records in their running tasks and run round-robin passes over them, each task processing what is
   ready (timestamp order across a task's partitions, ``max.task.idle.ms``), at most ``numIterations`` records per
   pass (Kafka's ``StreamThread.runOnce`` over ``TaskExecutor``: +1 after a pass, halved after an iteration that
   committed or punctuated; capped at ``MAX_TASK_SLICE``), the tasks of a sub-topology paced by stream time
   (``TaskManager.process_buffered``); passes go on until nothing is ready, a partition runs short of records the
   broker has (the thread polls first, without waiting) or ``poll.ms`` passed. So a catch-up interleaves the tasks
   instead of running one task's whole backlog before the next one's, which put the writers of a repartition topic
   days apart in event time and made a downstream window drop most records as late. A poll takes at most the room
   left in the thread's buffer (``TaskManager.poll_size``);
3. open newly created tasks and advance restoration by one bounded batch;
4. run wall-clock punctuations that are due;
5. commit when ``commit.interval.ms`` has passed or the buffered store writes exceed
   ``statestore.cache.max.bytes``; then, when more than ``repartition.purge.interval.ms`` passed since the last
   purge, delete the repartition records the running tasks committed past (``streamapp.processing.purge``);
6. about once a second, report a ``WorkerStatus`` to the supervisor.

Under ``exactly_once_v2`` the thread's one producer is transactional (``streamapp.processing.streams_producer``).
When the group moved on, a transaction had to be aborted or the producer was fenced, the iteration closes every
task without commit and revives the assigned ones from their stores and committed offsets (a fenced producer
is replaced first): Kafka Streams' ``TaskMigratedException`` / ``TaskCorruptedException`` handling.

A thread runs in its own worker process (``streamapp.processing.worker``): stream threads are processes.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from streamapp.config import StreamsConfig
from streamapp.kafka.types import (
    CommitFailedError,
    ConsumerClient,
    ConsumerRecord,
    Headers,
    ProducerClient,
    ProducerFencedError,
    RestoreConsumerClient,
    TransactionAbortedError,
)
from streamapp.processing.commit import write_buffer_bytes
from streamapp.processing.errors import ExceptionHandlers
from streamapp.processing.global_thread import GlobalConsumerClient, build_global_thread
from streamapp.processing.purge import CommittedRecordsPurger, RecordsDeleter, purge_due, repartition_topics
from streamapp.processing.standby import GroupDescriber, MemberRef, StandbyManager
from streamapp.processing.state_manager import StateManager, StoreFactory
from streamapp.processing.status import (
    StoreRestoreStatus,
    TaskStatus,
    ThreadMetrics,
    WorkerStatus,
    task_drop_status,
)
from streamapp.processing.streams_producer import StreamsProducer
from streamapp.processing.task import StreamTask, TaskId, TaskState
from streamapp.processing.task_manager import TaskManager
from streamapp.sensors import RecordingLevel, ThreadSensors
from streamapp.skips import flush_due_skip_logs
from streamapp.state.directory import StateCleaner, StateDirectory
from streamapp.state.record_cache import ThreadCache
from streamapp.state.restore import ChangelogReader, StoreRestoreProgress
from streamapp.topology import TopologyDescription, TopologyError
from streamapp.topology.nodes.io import RepartitionNode

__all__ = ["MAX_TASK_SLICE", "StreamThread", "repartition_writers", "source_topic_subtopologies"]

log = logging.getLogger(__name__)

StatusSink = Callable[[WorkerStatus], None]

_MIGRATED = (CommitFailedError, TransactionAbortedError, ProducerFencedError)
"""Failures after which the tasks are closed dirty and revived (the thread itself goes on)."""


def wall_clock_ms() -> int:
    """The system wall clock in epoch ms (the default ``clock_ms`` of a stream thread)."""
    return int(time.time() * 1000)


_REPORT_INTERVAL_S = 1.0

MAX_TASK_SLICE = 16
"""The most records a task processes per round-robin pass. Kafka's ``numIterations`` has no bound; here a pass's
slice is also how far one task's writes to a repartition topic can run ahead of another's in a catch-up, so it is
kept small (a pass over a dozen tasks costs a few microseconds; a slice of 16 records keeps that below 2% of a
stateless record's cost)."""


def repartition_writers(description: TopologyDescription) -> frozenset[int]:
    """The sub-topologies that write a repartition topic (a repartition node whose input is one of their nodes):
    their tasks are paced by stream time (``TaskManager.process_buffered``), since a downstream reader merges what
    they write and drops what arrives later than its stream time and grace."""
    writers: set[int] = set()
    for sub in description.subtopologies():
        members = set(sub.nodes)
        for name in sub.nodes:
            node = description.node(name)
            if isinstance(node, RepartitionNode) and node.input in members:
                writers.add(sub.id)
    return frozenset(writers)


def source_topic_subtopologies(description: TopologyDescription, application_id: str) -> dict[str, int]:
    """Every topic the application consumes, with the sub-topology that reads it.

    Raises TopologyError when two sub-topologies read one topic: a partition belongs to one task, so the
    runtime could not give both their records (Kafka Streams puts all readers of a topic into one
    sub-topology).
    """
    readers: dict[str, int] = {}
    for sub in description.subtopologies():
        for ref in sub.source_topics:
            topic = ref.resolve(application_id)
            if readers.setdefault(topic, sub.id) != sub.id:
                raise TopologyError(
                    f"topic '{topic}' is read by sub-topologies {readers[topic]} and {sub.id}; "
                    "the runtime needs one reading sub-topology per topic"
                )
    return readers


class StreamThread:
    """Runs the tasks a group consumer is assigned (see the module docstring)."""

    def __init__(
        self,
        index: int,
        config: StreamsConfig,
        description: TopologyDescription,
        functions: dict[str, dict[str, Callable[..., Any]]],
        consumer: ConsumerClient,
        producer: ProducerClient,
        restore_consumer: RestoreConsumerClient,
        store_factory: StoreFactory,
        report: StatusSink,
        *,
        clock_ms: Callable[[], int] = wall_clock_ms,
        producer_factory: Callable[[], ProducerClient] | None = None,
        global_consumer: GlobalConsumerClient | None = None,
        instance: str | None = None,
        describe_group: GroupDescriber | None = None,
        records_deleter: RecordsDeleter | None = None,
        metrics: ThreadMetrics | None = None,
    ) -> None:
        """``producer`` is the thread's producer client (transactional under exactly-once);
        ``producer_factory`` creates a replacement after fencing (default: fencing is fatal for the thread).
        ``clock_ms`` is the wall clock (epoch ms) for wall-clock punctuation and ``max.task.idle.ms``.
        ``instance`` (the name in the consumer's client id) and ``describe_group`` enable standby tasks
        (``num.standby.replicas``, ``streamapp.processing.standby``); without them there are none.
        ``records_deleter`` (the admin client) enables the purge of committed repartition records every
        ``repartition.purge.interval.ms`` of ``clock_ms``; without it repartition topics are never purged.
        ``metrics``: the thread's counters when its clients count into them too (the consumer's offset resets)."""
        self.index = index
        self.description = description
        self._config = config
        self._consumer = consumer
        self._clock_ms = clock_ms
        first: list[ProducerClient] = [producer]

        def make_producer() -> ProducerClient:
            if first:
                return first.pop()
            if producer_factory is None:
                raise ProducerFencedError("the producer was fenced and this thread cannot create another one")
            return producer_factory()

        self._producer = StreamsProducer(make_producer, config.exactly_once)
        self.handlers = ExceptionHandlers(config, self._send_dead_letter)
        self._restore_consumer = restore_consumer
        self._report = report
        self._topics = source_topic_subtopologies(description, config.application_id)
        subtopologies = {sub.id: sub for sub in description.subtopologies()}
        state_dir = Path(config.state_dir) / config.application_id
        self.recording_level = RecordingLevel[config.metrics_recording_level]
        self.sensors = ThreadSensors()
        """Kafka Streams' thread-level sensors (``streamapp.sensors``; INFO, always recorded)."""
        self.thread_id = f"{config.application_id}-{instance or 'local'}-StreamThread-{index + 1}"
        """Kafka's ``thread-id`` tag, the thread's name in its clients' ids (``streamapp.kafka.clients.client_id``):
        ``<application.id>-<instance>-StreamThread-<n>``, ``n`` from 1."""
        self._global = build_global_thread(
            description, state_dir, index, store_factory, global_consumer, config.commit_interval_ms
        )
        global_tables = self._global.global_state.table if self._global is not None else None
        # Kafka's record cache (KIP-63), one per thread, shared by its tasks; 0 turns it off (ADR 0008).
        cache_bytes = config.statestore_cache_max_bytes
        record_cache = ThreadCache(cache_bytes) if cache_bytes else None
        self._write_buffer_bytes = write_buffer_bytes(cache_bytes)

        def create_task(task_id: TaskId, state: StateManager | None) -> StreamTask:
            return StreamTask(
                task_id,
                description,
                subtopologies[task_id.subtopology],
                config.application_id,
                state_dir / str(task_id),
                self._producer,
                functions,
                store_factory,
                handlers=self.handlers,
                clock_ms=clock_ms,
                max_task_idle_ms=config.max_task_idle_ms,
                global_tables=global_tables,
                record_cache=record_cache,
                state_manager=state,
                recording_level=self.recording_level,
            )

        self._reader = ChangelogReader(restore_consumer)
        self.purger = CommittedRecordsPurger(records_deleter) if records_deleter is not None else None
        self.tasks = TaskManager(
            self._topics,
            create_task,
            consumer,
            self._producer,
            self._reader,
            buffered_records_per_partition=config.buffered_records_per_partition,
            clock_ms=clock_ms,
            purger=self.purger,
            repartition_topics=repartition_topics(description, config.application_id),
            paced_subtopologies=repartition_writers(description),
        )
        self.standbys: StandbyManager | None = None
        if config.num_standby_replicas > 0 and describe_group is not None and instance is not None:
            self.standbys = StandbyManager(
                MemberRef(instance, index),
                config.application_id,
                config.num_standby_replicas,
                description,
                self._topics,
                state_dir,
                store_factory,
                self._reader,
                describe_group,
                active_tasks=lambda: self.tasks.tasks.keys(),
            )
            self.tasks.on_task_created = self.standbys.take
            self.tasks.adopt_state = self.standbys.adopt
        self._cleaner = StateCleaner(StateDirectory(state_dir), config.state_cleanup_delay_ms, self._owned_task_ids)
        self.metrics = metrics if metrics is not None else ThreadMetrics()
        self.state = "starting"
        self._last_commit = time.monotonic()
        self._last_purge_ms = 0
        """``clock_ms`` of the last purge check that fired; 0 = none yet (Kafka's ``lastPurgeMs``)."""
        self._last_report = 0.0
        self._poll_timeout_s = config.poll_ms / 1000
        self.num_iterations = 1
        """Records each running task may process per loop iteration (Kafka's ``numIterations``)."""

    def run(self, stopping: Callable[[], bool], between_iterations: Callable[[], object] | None = None) -> None:
        """Subscribe and loop until ``stopping()``; then commit and close the tasks and the clients.
        ``between_iterations`` runs after every loop iteration (the worker answers interactive queries there,
        ``streamapp.query.channel``).

        An exception (a processing error, lost deliveries) closes the tasks without commit, leaves the
        group and propagates: the supervisor restarts the worker, which resumes from the last commit.
        Global tables are bootstrapped first: no task processes before they are up to date.
        """
        if not self.start(stopping):
            return
        try:
            while not stopping():
                self.run_once()
                if between_iterations is not None:
                    between_iterations()
        except BaseException as exc:
            self.state = "failed"
            self._report_status(force=True, error=f"{type(exc).__name__}: {exc}")
            self._close(clean=False)
            raise
        self.state = "stopping"
        self._report_status(force=True)
        self._close(clean=True)

    def start(self, stopping: Callable[[], bool]) -> bool:
        """The head of ``run``: bootstrap the global stores, then subscribe. Returns False (the thread is then
        closed) when ``stopping()`` turned true during the bootstrap; a bootstrap failure closes and raises.
        ``run_once`` may be called after a True return (the TopologyTestDriver drives the loop this way)."""
        if self._global is not None:
            try:
                bootstrapped = self._global.bootstrap(stopping)
            except BaseException as exc:
                self.state = "failed"
                self._report_status(force=True, error=f"{type(exc).__name__}: {exc}")
                self._close(clean=False)
                raise
            if not bootstrapped:
                self._close(clean=False)
                return False
        self._consumer.subscribe(sorted(self._topics), self.tasks)
        self.state = "running"
        log.info("Stream thread %d subscribed to %s", self.index, ", ".join(sorted(self._topics)))
        return True

    def close(self, clean: bool) -> None:
        """The tail of ``run``: commit and close the tasks (without commit unless ``clean``), then the clients."""
        self.state = "stopping" if clean else "failed"
        self._close(clean)

    def run_once(self) -> None:
        """One loop iteration (see the module docstring)."""
        try:
            self._iterate()
        except _MIGRATED as exc:
            self._recover(exc)
        if self.tasks.producer_fenced:
            self.tasks.producer_fenced = False
            self._producer.reset()

    def _iterate(self) -> None:
        if self._global is not None:
            self._global.poll(0.0)
        busy = self.tasks.restoring or self.tasks.more_ready
        max_records = self.tasks.poll_size(self._config.max_poll_records)
        started = time.perf_counter()
        records = self._consumer.poll(max_records, 0.0 if busy else self._poll_timeout_s)
        polled = time.perf_counter()
        processed = self._process(records)
        done = time.perf_counter()
        now_ms = self._clock_ms()
        self.sensors.record_poll((polled - started) * 1000, len(records), now_ms)
        self.sensors.record_process((done - polled) * 1000, processed, now_ms)
        self.metrics.records_processed_total += processed
        self.tasks.maintain()
        if self.standbys is not None:
            self.standbys.maybe_refresh()
        if self.tasks.restoring:
            self.tasks.restore(0.0 if records or self.tasks.more_ready else self._poll_timeout_s)
            self.metrics.restore_records_total = self._reader.records_restored
        elif self._reader.updating_standbys:
            self.tasks.restore(0.0)
        self._cleaner.maybe_run()
        started = time.perf_counter()
        punctuated = self.tasks.punctuate_wall_clock(now_ms)
        if punctuated:
            self.sensors.record_punctuate((time.perf_counter() - started) * 1000, now_ms)
        self._producer.poll()
        committed = self._maybe_commit()
        if processed and (punctuated or committed):  # Kafka's numIterations rule
            self.num_iterations = max(1, self.num_iterations // 2)
        self._report_status()

    def _process(self, records: list[ConsumerRecord]) -> int:
        """Buffer ``records`` and, while a running task writes a repartition topic (``TaskManager.interleaving``), run
        round-robin passes over the running tasks, ``num_iterations`` records per task each (Kafka's
        ``StreamThread.runOnceWithoutProcessingThreads`` loop over ``TaskExecutor.process``): after a pass that
        processed records ``num_iterations`` grows by one, up to ``MAX_TASK_SLICE``. Passes go on while ready
        records remain, no input partition ran short of a slice with more on the broker (then the thread polls
        first, so that partition's task keeps pace with the others) and ``poll.ms`` has not passed since the poll.
        Otherwise every task processes all its ready records, one after the other (what the stateless and keyed
        benchmarks run: the passes cost them 15-20% of their CPU time). Returns the records processed."""
        tasks = self.tasks
        if not tasks.interleaving:  # no task writes a repartition topic: everything ready, task by task
            return tasks.process(records) if records else tasks.process_buffered()
        deadline = time.monotonic() + self._poll_timeout_s
        slice_ = self.num_iterations
        processed = tasks.process(records, slice_) if records else tasks.process_buffered(slice_)
        total = processed
        while processed:
            slice_ = min(slice_ + 1, MAX_TASK_SLICE)
            if not tasks.more_ready or tasks.starving or time.monotonic() >= deadline:
                break
            processed = tasks.process_buffered(slice_)
            total += processed
        self.num_iterations = slice_
        return total

    def commit(self) -> None:
        """Commit now. A failure caused by the group moving on, an aborted transaction or a fenced producer
        closes and revives the tasks instead of raising."""
        try:
            result = self.tasks.commit()
        except _MIGRATED as exc:
            self._recover(exc)
        else:
            if result.tasks:
                self.metrics.observe_commit(result.seconds)
                self.sensors.record_commit(result.seconds * 1000, self._clock_ms())
        self._last_commit = time.monotonic()

    def _recover(self, exc: Exception) -> None:
        """Close every task without commit and revive them (Kafka's TaskMigrated / TaskCorrupted handling)."""
        if isinstance(exc, ProducerFencedError):
            log.warning("The producer was fenced; closing the tasks dirty and reviving them: %s", exc)
            self._producer.reset()
        elif isinstance(exc, CommitFailedError):
            log.warning("Commit failed because the group rebalanced; reprocessing from the last commit: %s", exc)
        else:
            log.warning("The transaction was aborted; reprocessing from the last commit: %s", exc)
        self.tasks.handle_commit_failure()
        self._last_commit = time.monotonic()

    def _owned_task_ids(self) -> list[str]:
        owned = [str(task_id) for task_id in self.tasks.tasks]
        if self.standbys is not None:
            owned.extend(str(task_id) for task_id in self.standbys.tasks)
        return owned

    def _send_dead_letter(
        self, topic: str, key: bytes | None, value: bytes | None, headers: Headers, timestamp: int
    ) -> None:
        self._producer.send(topic, key, value, timestamp, headers=headers)

    def _maybe_commit(self) -> bool:
        """Commit when due (interval or write buffer); True when it committed."""
        due = (time.monotonic() - self._last_commit) * 1000 >= self._config.commit_interval_ms
        committed = due or self.tasks.pending_bytes > self._write_buffer_bytes
        if committed:
            self.commit()
        self._maybe_purge()
        return committed

    def _maybe_purge(self) -> None:
        """Kafka's ``StreamThread.maybeCommit`` tail: purge committed repartition records when more than
        ``repartition.purge.interval.ms`` passed since the last purge (a purge whose predecessor is still in
        flight sends nothing but counts as done)."""
        if self.purger is None:
            return
        now = self._clock_ms()
        if purge_due(now, self._last_purge_ms, self._config.repartition_purge_interval_ms):
            self.tasks.maybe_purge_committed_records()
            self._last_purge_ms = now

    def _close(self, clean: bool) -> None:
        if clean:
            try:
                self.commit()
                self.tasks.close_all(clean=True)
            except Exception:
                log.exception("Clean shutdown of stream thread %d failed; closing without commit", self.index)
                self.tasks.close_all(clean=False)
        else:
            self.tasks.close_all(clean=False)
        if self.standbys is not None:
            self.standbys.close_all()
        for name, close in (
            ("consumer", self._consumer.close),
            ("restore consumer", self._restore_consumer.close),
            ("producer", lambda: self._producer.close(10.0 if clean else 0.0)),
        ):
            try:
                close()
            except Exception:
                log.exception("Failed to close the %s of stream thread %d", name, self.index)
        if self._global is not None:
            self._global.close()

    def status(self, error: str | None = None) -> WorkerStatus:
        """The thread's current state as plain data."""
        progress = self._reader.progress()
        tasks: list[TaskStatus] = []
        dropped = dict(self.tasks.dropped_records_closed)
        for task in sorted(self.tasks.tasks.values(), key=lambda t: t.id):
            restore = progress.get(str(task.id))
            stores = restore.stores if restore else self._reader.last_restored_stores.get(str(task.id), [])
            tasks.append(
                TaskStatus(
                    task_id=str(task.id),
                    state=task.state.value,
                    partitions=sorted(str(tp) for tp in task.input_partitions),
                    records_processed=task.records_processed,
                    restored_records=restore.restored if restore else self._reader.last_restored.get(str(task.id), 0),
                    restore_remaining=restore.remaining if restore else 0,
                    stream_time=task.stream_time,
                    stores=[_store_restore_status(store) for store in stores],
                    **task_drop_status(task.metrics),
                )
            )
            for reason, count in task.metrics.dropped.items():
                dropped[reason] = dropped.get(reason, 0) + count
        owned = {tp for task in self.tasks.tasks.values() for tp in task.input_partitions}
        lags = {str(tp): lag for tp, lag in self._consumer.lags().items() if tp in owned}
        joined = self._consumer.group_joined()
        ready = (
            self.state == "running"
            and joined
            and all(task.state is TaskState.RUNNING for task in self.tasks.tasks.values())
        )
        now_ms = self._clock_ms()
        self.sensors.task_created_total, self.sensors.task_closed_total = (
            self.tasks.tasks_created,
            self.tasks.tasks_closed,
        )
        kafka_metrics = list(self.sensors.samples(self.thread_id, now_ms))
        for task in self.tasks.tasks.values():
            kafka_metrics += task.sensors.samples(
                self.thread_id,
                str(task.id),
                now_ms,
                processed=task.records_processed,
                dropped=task.metrics.dropped_records,
                lateness=task.metrics.lateness,
            )
        self.metrics.dropped_records_total = sum(dropped.values())
        self.metrics.dropped_records_by_reason = dropped
        self.metrics.standby_records_total = self._reader.standby_records
        self.metrics.dead_letter_records_total = self.handlers.dead_letters
        self.metrics.transactions_aborted_total = self._producer.transactions_aborted
        return WorkerStatus(
            thread=self.index,
            pid=os.getpid(),
            state=self.state,
            ready=ready,
            group_joined=joined,
            reported_at=time.time(),
            tasks=tasks,
            metrics=self.metrics,
            kafka_metrics=kafka_metrics,
            consumer_lag=lags,
            error=error,
            standby_tasks=dict(self.standbys.statuses()) if self.standbys is not None else {},
            global_positions=(
                {str(tp): offset for tp, offset in self._global.global_state.positions.items()}
                if self._global is not None
                else {}
            ),
        )

    def _report_status(self, force: bool = False, error: str | None = None) -> None:
        now = time.monotonic()
        if not force and now - self._last_report < _REPORT_INTERVAL_S:
            return
        self._last_report = now
        flush_due_skip_logs()  # the count of skipped records not logged yet, once their interval is over
        try:
            self._report(self.status(error))
        except Exception:
            log.exception("Failed to report the status of stream thread %d", self.index)


def _store_restore_status(progress: StoreRestoreProgress) -> StoreRestoreStatus:
    """A store's restore progress as ``/status`` data: the rate in records/s and the time left in seconds, both
    to 0.1."""
    rate, left = progress.records_per_second, progress.seconds_left
    return StoreRestoreStatus(
        store=progress.store,
        changelog=str(progress.changelog),
        restored_records=progress.restored,
        restore_remaining=progress.remaining,
        records_per_second=None if rate is None else round(rate, 1),
        seconds_left=None if left is None else round(left, 1),
    )
