"""StreamThread: one consumer, one producer and their tasks, in a poll → process → commit loop.

Each iteration:

1. poll the group consumer (rebalance callbacks run here and create or close tasks); while tasks
   restore, the poll does not block so restoration keeps going;
2. route the records to their running tasks;
3. open newly created tasks and advance restoration by one bounded batch;
4. commit when ``commit.interval.ms`` has passed or the buffered store writes exceed
   ``statestore.cache.max.bytes``;
5. about once a second, report a ``WorkerStatus`` to the supervisor.

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
    ProducerClient,
    RestoreConsumerClient,
)
from streamapp.processing.status import TaskStatus, ThreadMetrics, WorkerStatus
from streamapp.processing.task import StoreFactory, StreamTask, TaskId, TaskState
from streamapp.processing.task_manager import TaskManager
from streamapp.state.restore import ChangelogReader
from streamapp.topology import TopologyDescription, TopologyError

__all__ = ["StreamThread", "source_topic_subtopologies"]

log = logging.getLogger(__name__)

StatusSink = Callable[[WorkerStatus], None]

_REPORT_INTERVAL_S = 1.0


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
    ) -> None:
        self.index = index
        self._config = config
        self._consumer = consumer
        self._producer = producer
        self._restore_consumer = restore_consumer
        self._report = report
        self._topics = source_topic_subtopologies(description, config.application_id)
        subtopologies = {sub.id: sub for sub in description.subtopologies()}
        state_dir = Path(config.state_dir) / config.application_id

        def create_task(task_id: TaskId) -> StreamTask:
            return StreamTask(
                task_id,
                description,
                subtopologies[task_id.subtopology],
                config.application_id,
                state_dir / str(task_id),
                producer,
                functions,
                store_factory,
            )

        self._reader = ChangelogReader(restore_consumer)
        self.tasks = TaskManager(self._topics, create_task, consumer, producer, self._reader)
        self.metrics = ThreadMetrics()
        self.state = "starting"
        self._last_commit = time.monotonic()
        self._last_report = 0.0
        self._poll_timeout_s = config.poll_ms / 1000

    def run(self, stopping: Callable[[], bool]) -> None:
        """Subscribe and loop until ``stopping()``; then commit and close the tasks and the clients.

        An exception (a processing error, lost deliveries) closes the tasks without commit, leaves the
        group and propagates: the supervisor restarts the worker, which resumes from the last commit.
        """
        self._consumer.subscribe(sorted(self._topics), self.tasks)
        self.state = "running"
        log.info("Stream thread %d subscribed to %s", self.index, ", ".join(sorted(self._topics)))
        try:
            while not stopping():
                self.run_once()
        except BaseException as exc:
            self.state = "failed"
            self._report_status(force=True, error=f"{type(exc).__name__}: {exc}")
            self._close(clean=False)
            raise
        self.state = "stopping"
        self._report_status(force=True)
        self._close(clean=True)

    def run_once(self) -> None:
        restoring = self.tasks.restoring
        records = self._consumer.poll(self._config.max_poll_records, 0.0 if restoring else self._poll_timeout_s)
        if records:
            self.metrics.records_processed_total += self.tasks.process(records)
        self.tasks.maintain()
        if self.tasks.restoring:
            self.tasks.restore(0.0 if records else self._poll_timeout_s)
            self.metrics.restore_records_total = self._reader.records_restored
        self._producer.poll()
        self._maybe_commit()
        self._report_status()

    def commit(self) -> None:
        """Commit now (a rebalance-caused failure closes and revives the tasks instead of raising)."""
        try:
            result = self.tasks.commit()
        except CommitFailedError as exc:
            log.warning("Commit failed because the group rebalanced; reprocessing from the last commit: %s", exc)
            self.tasks.handle_commit_failure()
        else:
            if result.tasks:
                self.metrics.observe_commit(result.seconds)
        self._last_commit = time.monotonic()

    def _maybe_commit(self) -> None:
        due = (time.monotonic() - self._last_commit) * 1000 >= self._config.commit_interval_ms
        if due or self.tasks.pending_bytes > self._config.statestore_cache_max_bytes:
            self.commit()

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
        for name, close in (
            ("consumer", self._consumer.close),
            ("restore consumer", self._restore_consumer.close),
            ("producer", lambda: self._producer.close(10.0 if clean else 0.0)),
        ):
            try:
                close()
            except Exception:
                log.exception("Failed to close the %s of stream thread %d", name, self.index)

    def status(self, error: str | None = None) -> WorkerStatus:
        """The thread's current state as plain data."""
        progress = self._reader.progress()
        tasks: list[TaskStatus] = []
        dropped = self.tasks.dropped_records_closed
        for task in sorted(self.tasks.tasks.values(), key=lambda t: t.id):
            restore = progress.get(str(task.id))
            tasks.append(
                TaskStatus(
                    task_id=str(task.id),
                    state=task.state.value,
                    partitions=sorted(str(tp) for tp in task.input_partitions),
                    records_processed=task.records_processed,
                    restored_records=restore.restored if restore else 0,
                    restore_remaining=restore.remaining if restore else 0,
                    stream_time=task.stream_time,
                )
            )
            dropped += task.metrics.dropped_records
        owned = {tp for task in self.tasks.tasks.values() for tp in task.input_partitions}
        lags = {str(tp): lag for tp, lag in self._consumer.lags().items() if tp in owned}
        joined = self._consumer.group_joined()
        ready = (
            self.state == "running"
            and joined
            and all(task.state is TaskState.RUNNING for task in self.tasks.tasks.values())
        )
        self.metrics.dropped_records_total = dropped
        return WorkerStatus(
            thread=self.index,
            pid=os.getpid(),
            state=self.state,
            ready=ready,
            group_joined=joined,
            reported_at=time.time(),
            tasks=tasks,
            metrics=self.metrics,
            consumer_lag=lags,
            error=error,
        )

    def _report_status(self, force: bool = False, error: str | None = None) -> None:
        now = time.monotonic()
        if not force and now - self._last_report < _REPORT_INTERVAL_S:
            return
        self._last_report = now
        try:
            self._report(self.status(error))
        except Exception:
            log.exception("Failed to report the status of stream thread %d", self.index)
